// The lesson engine (lesson/report.hpp): chapter times and computed answers on a trace, and the
// listing and handout texts made from them.
#include "dpscope/lesson/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/stats.hpp"

namespace dpscope::lesson {
namespace {

std::string time_text(const std::optional<int64_t>& time_ns) {
  return time_ns ? trace::format_duration(*time_ns) : std::string("never");
}

std::string answer_text(const std::string& unit, const std::optional<double>& value,
                        const std::string& problem) {
  if (!value) return problem;
  return unit.empty() ? format_answer(*value) : fmt::format("{} {}", format_answer(*value), unit);
}
std::string answer_text(const Question& q, const QuestionResult& r) {
  return answer_text(q.unit, r.value, r.problem);
}

// The chapter's moment as an absolute trace time (none when its trigger never fired).
EvalContext moment(const trace::TraceData& data, const ChapterResult& chapter, const ScenarioTraces& others) {
  EvalContext context;
  context.scenarios = &others;
  if (chapter.time_ns) context.now_ns = data.min_ts_ns + *chapter.time_ns;
  return context;
}

// `text` rendered; when a placeholder cannot be computed, the source and a problem naming `where`.
// `raw` is the text as written; `text` its parsed form (load_lesson fills it; a Lesson built in code
// may leave it empty, and is parsed here).
std::string render(const TextTemplate& text, const std::string& raw, const trace::TraceData& data,
                   const EvalContext& context, const std::string& where, std::vector<std::string>& problems) {
  try {
    if (text.source() == raw) return text.render(data, context);
    return TextTemplate::parse(raw).render(data, context);
  } catch (const Error& e) {
    problems.push_back(fmt::format("{}: {}", where, e.what()));
    return raw;
  }
}

// A shell-like rendering of the command line ("dpscope train --mode ddp ...").
std::string command_line(const std::vector<std::string>& args) {
  std::string line = "dpscope";
  for (const std::string& a : args) line += " " + (a.find(' ') == std::string::npos ? a : "'" + a + "'");
  return line;
}

// A compare chapter's picture: each compared run at its own moment (the chapter's trigger matched in
// that run), where the chapter's `expect` must hold as it does in the lesson's run. Fills
// result.compare_times_ns; a run whose trace is missing, whose trigger never fires or whose
// picture misses an expectation is a problem naming the run (the last kind in `picture_problems`).
void check_compared_runs(const Chapter& chapter, const std::string& where, const trace::TraceData& data,
                         ChapterResult& result, const ScenarioTraces& others,
                         std::vector<std::string>& problems, std::vector<std::string>& picture_problems) {
  for (const std::string& name : chapter.compare) {
    const trace::TraceData* run = &data;
    std::optional<int64_t> time_ns;
    if (name == kMainRun) {
      time_ns = result.time_ns;  // its trigger's problem, if any, is reported above
    } else {
      const auto found = others.find(name);
      run = found != others.end() ? found->second : nullptr;
      if (run == nullptr) {
        problems.push_back(fmt::format("{}: compare: no trace of the run '{}'", where, name));
        result.compare_times_ns.push_back(std::nullopt);
        continue;
      }
      const std::vector<const trace::Event*> hits = matching_events(*run, chapter.trigger);
      if (hits.empty())
        problems.push_back(fmt::format("{}: compare: trigger {} never fires in the run '{}'", where,
                                       chapter.trigger.text, name));
      else
        time_ns = hits.front()->ts_ns - run->min_ts_ns;
    }
    result.compare_times_ns.push_back(time_ns);
    if (!time_ns || name == kMainRun) continue;  // the lesson's own run: checked above
    EvalContext context;
    context.scenarios = &others;
    context.now_ns = run->min_ts_ns + *time_ns;
    for (const Expectation& expect : chapter.expect) {
      try {
        if (expect.condition.evaluate(*run, context) == 0.0)
          picture_problems.push_back(fmt::format(
              "{}: compare: the run '{}' must show `{}`, but at {} it shows {}", where, name,
              expect.condition.text(), time_text(time_ns), expect.condition.evaluate_text(*run, context)));
      } catch (const Error& e) {
        picture_problems.push_back(fmt::format("{}: compare: the run '{}': expect `{}`: {}", where, name,
                                               expect.condition.text(), e.what()));
      }
    }
  }
}

}  // namespace

LessonReport evaluate_lesson(const Lesson& lesson, const trace::TraceData& data,
                             const ScenarioTraces& others) {
  LessonReport report;
  report.measured_clock = data.header.clock == "measured";
  bool declared_error_traced = false;
  int64_t first_error_ns = 0;
  for (const trace::Event& e : data.events) {
    const std::optional<RunError> error = data.run_error(e);
    if (!error) continue;
    if (!report.error_rank || e.ts_ns < first_error_ns) {  // the earliest in time; ties: file order
      first_error_ns = e.ts_ns;
      report.error_rank = e.rank;
      report.error_message = std::string(error->message);
    }
    declared_error_traced =
        declared_error_traced ||
        (!lesson.expect_error.empty() && error->message.find(lesson.expect_error) != std::string::npos);
  }
  if (!lesson.expect_error.empty() && !declared_error_traced)
    report.problems.push_back(
        fmt::format("{}: the scenario is declared to fail with '{}' (expect_error), but its trace has no "
                    "error event saying so",
                    lesson.id, lesson.expect_error));
  if (lesson.expect_error.empty() && report.error_rank)
    report.problems.push_back(fmt::format("{}: the trace ends with an error on rank {}: {}", lesson.id,
                                          *report.error_rank, report.error_message));
  for (size_t i = 0; i < lesson.chapters.size(); ++i) {
    const Chapter& chapter = lesson.chapters[i];
    ChapterResult result;
    const std::vector<const trace::Event*> hits = matching_events(data, chapter.trigger);
    if (!hits.empty()) {
      result.time_ns = hits.front()->ts_ns - data.min_ts_ns;
    } else {
      report.problems.push_back(fmt::format("{}: chapter {} '{}': trigger {} never fires", lesson.id, i + 1,
                                            chapter.title, chapter.trigger.text));
    }
    // The viewer pauses at each chapter in turn, so a chapter must not start before the previous one.
    const ChapterResult* previous = report.chapters.empty() ? nullptr : &report.chapters.back();
    if (result.time_ns && previous && previous->time_ns && *result.time_ns < *previous->time_ns)
      report.problems.push_back(fmt::format("{}: chapter {} '{}': fires at {}, before chapter {} ({})",
                                            lesson.id, i + 1, chapter.title, time_text(result.time_ns), i,
                                            time_text(previous->time_ns)));
    // Two chapters at one moment show one picture: the second teaches nothing new on the stage.
    if (result.time_ns && previous && previous->time_ns && *result.time_ns == *previous->time_ns)
      report.problems.push_back(
          fmt::format("{}: chapter {} '{}': at the same moment as chapter {} ({}): the same picture twice",
                      lesson.id, i + 1, chapter.title, i, time_text(result.time_ns)));
    const std::string where = fmt::format("{}: chapter {} '{}'", lesson.id, i + 1, chapter.title);
    const EvalContext context = moment(data, result, others);
    result.narration = render(chapter.narration_text, chapter.narration, data, context, where + ": narration",
                              report.problems);
    for (const Expectation& expect : chapter.expect) {
      if (!result.time_ns) break;  // the trigger's problem is reported above
      try {
        if (expect.condition.evaluate(data, context) == 0.0)
          report.picture_problems.push_back(fmt::format(
              "{}: its picture must show `{}`, but at {} it shows {}", where, expect.condition.text(),
              time_text(result.time_ns), expect.condition.evaluate_text(data, context)));
      } catch (const Error& e) {
        report.picture_problems.push_back(
            fmt::format("{}: expect `{}`: {}", where, expect.condition.text(), e.what()));
      }
    }
    if (!chapter.compare.empty())
      check_compared_runs(chapter, where, data, result, others, report.problems, report.picture_problems);
    report.chapters.push_back(result);
  }
  for (size_t i = 0; i < lesson.questions.size(); ++i) {
    const Question& question = lesson.questions[i];
    const size_t chapter = static_cast<size_t>(question.chapter - 1);
    const EvalContext context = chapter < report.chapters.size()
                                    ? moment(data, report.chapters[chapter], others)
                                    : EvalContext{.scenarios = &others};
    const std::string where = fmt::format("{}: question {}", lesson.id, i + 1);
    QuestionResult result;
    try {
      result.value = question.answer.evaluate(data, context);
    } catch (const Error& e) {
      result.problem = e.what();
      report.problems.push_back(fmt::format("{}: answer {} ({})", where, e.what(), question.answer.text()));
    }
    result.prompt =
        render(question.prompt_text, question.prompt, data, context, where + ": prompt", report.problems);
    result.explain =
        render(question.explain_text, question.explain, data, context, where + ": explain", report.problems);
    report.questions.push_back(std::move(result));
  }
  return report;
}

std::filesystem::path other_trace_path(const std::filesystem::path& trace, const Lesson& lesson,
                                       const OtherScenario& other) {
  return trace.parent_path() / fmt::format("{}.{}.trace.jsonl", lesson.id, other.name);
}

std::map<std::string, trace::TraceData> read_other_traces(const std::filesystem::path& trace,
                                                          const Lesson& lesson) {
  std::map<std::string, trace::TraceData> traces;
  for (const OtherScenario& other : lesson.scenarios)
    traces[other.name] = trace::read_trace(other_trace_path(trace, lesson, other));
  return traces;
}

ExerciseResult evaluate_exercise(const Lesson& lesson, size_t index, const trace::TraceData& data,
                                 const ScenarioTraces& others) {
  const Exercise& exercise = lesson.exercises.at(index);
  const std::string where = fmt::format("{}: exercise {}", lesson.id, index + 1);
  ExerciseResult result;
  std::vector<std::string> problems;
  try {
    result.value = exercise.answer.evaluate(data, EvalContext{.scenarios = &others});
  } catch (const Error& e) {
    result.problem = fmt::format("{}: answer {} ({})", where, e.what(), exercise.answer.text());
  }
  result.prompt = render(exercise.prompt_text, exercise.prompt, data, EvalContext{.scenarios = &others},
                         where + ": prompt", problems);
  result.explain = render(exercise.explain_text, exercise.explain, data, EvalContext{.scenarios = &others},
                          where + ": explain", problems);
  if (result.problem.empty() && !problems.empty()) result.problem = problems.front();
  return result;
}

std::vector<std::string> lint_lesson(const Lesson& lesson) {
  std::vector<std::string> problems;
  const auto lint = [&](std::string_view text, const std::string& where) {
    for (const std::string& finding : lint_text(text))
      problems.push_back(
          fmt::format("{}: {}: {}: write it as {{{{ expr }}}} computed from the run, or mark "
                      "a fixed fact {{{{! ... }}}}",
                      lesson.id, where, finding));
  };
  for (size_t g = 0; g < lesson.goals.size(); ++g) lint(lesson.goals[g], fmt::format("goal {}", g + 1));
  lint(lesson.title, "title");
  for (size_t c = 0; c < lesson.chapters.size(); ++c) {
    lint(lesson.chapters[c].title, fmt::format("chapter {}'s title", c + 1));
    lint(lesson.chapters[c].narration, fmt::format("chapter {} '{}'", c + 1, lesson.chapters[c].title));
  }
  for (size_t q = 0; q < lesson.questions.size(); ++q) {
    lint(lesson.questions[q].prompt, fmt::format("question {}", q + 1));
    lint(lesson.questions[q].explain, fmt::format("question {}'s explain", q + 1));
  }
  for (size_t x = 0; x < lesson.exercises.size(); ++x) {
    lint(lesson.exercises[x].prompt, fmt::format("exercise {}", x + 1));
    lint(lesson.exercises[x].explain, fmt::format("exercise {}'s explain", x + 1));
  }
  return problems;
}

std::vector<std::string> quoted_commands(const Lesson& lesson, const LessonReport& report) {
  std::vector<std::string> texts;
  for (const ChapterResult& c : report.chapters) texts.push_back(c.narration);
  for (const QuestionResult& q : report.questions) {
    texts.push_back(q.prompt);
    texts.push_back(q.explain);
  }
  for (const std::string& goal : lesson.goals) texts.push_back(goal);
  std::vector<std::string> commands;
  for (const std::string& text : texts) {
    size_t pos = 0;
    while ((pos = text.find('`', pos)) != std::string::npos) {
      const size_t close = text.find('`', pos + 1);
      if (close == std::string::npos) break;
      std::string code = text.substr(pos + 1, close - pos - 1);
      std::replace(code.begin(), code.end(), '\n', ' ');
      if (code.starts_with("dpscope train ") || code.starts_with("dpscope bench ")) commands.push_back(code);
      pos = close + 1;
    }
  }
  return commands;
}

std::string run_outcome_problem(const Lesson& lesson, const std::optional<std::string>& failure) {
  if (lesson.expect_error.empty()) {
    if (!failure) return "";
    return fmt::format(
        "the scenario failed: {} (a lesson whose run fails declares it: [scenario] expect_error)", *failure);
  }
  if (!failure)
    return fmt::format("the scenario is declared to fail with '{}' (expect_error) but ran to the end",
                       lesson.expect_error);
  if (failure->find(lesson.expect_error) == std::string::npos)
    return fmt::format("the scenario failed with '{}', not with the declared expect_error '{}'", *failure,
                       lesson.expect_error);
  return "";
}

std::string format_answer(double value) { return format_number(value); }

std::string format_report(const Lesson& lesson, const LessonReport& report) {
  std::string out = fmt::format("== lesson {}: {} ({} min) ==\n", lesson.id, lesson.title, lesson.minutes);
  if (report.error_rank)
    out += fmt::format("\nthe run stopped with an error on rank {}: {}\n", *report.error_rank,
                       report.error_message);
  for (size_t c = 0; c < lesson.chapters.size(); ++c) {
    out += fmt::format("\nchapter {} at {}: {}\n", c + 1, time_text(report.chapters[c].time_ns),
                       lesson.chapters[c].title);
    std::string narration = report.chapters[c].narration;
    for (size_t at = 0; (at = narration.find('\n', at)) != std::string::npos; at += 3)
      narration.replace(at, 1, "\n  ");
    out += fmt::format("  {}\n", narration);
    for (size_t q = 0; q < lesson.questions.size(); ++q) {
      const Question& question = lesson.questions[q];
      if (question.chapter != static_cast<int>(c + 1)) continue;
      out += fmt::format("  Q{}. {}\n      answer: {}\n", q + 1, report.questions[q].prompt,
                         answer_text(question, report.questions[q]));
    }
  }
  return out;
}

std::string handout_markdown(const Lesson& lesson, const std::vector<std::string>& args,
                             const LessonReport& report, std::string_view trace_name,
                             const std::vector<std::string>& images,
                             const std::vector<ExerciseResult>& exercises_results) {
  std::string md = fmt::format("# Lesson {}: {}\n\n*About {} minutes.*\n\n## Goals\n\n", lesson.id,
                               lesson.title, lesson.minutes);
  for (const std::string& goal : lesson.goals) md += fmt::format("- {}\n", goal);
  md += fmt::format(
      "\n## The run\n\n```\n{}\n```\n\nIts trace is `{}`; watch it, with this lesson beside it, with "
      "`dpscope-viz --lesson {} {}`.\n",
      command_line(args), trace_name, lesson.id, trace_name);
  for (size_t c = 0; c < lesson.chapters.size(); ++c) {
    const Chapter& chapter = lesson.chapters[c];
    md += fmt::format("\n## {}. {}\n\n*At {} of {} time; snippet line {}.*\n\n", c + 1, chapter.title,
                      time_text(report.chapters[c].time_ns), report.measured_clock ? "measured" : "simulated",
                      chapter.snippet_line);
    if (c < images.size() && !images[c].empty())
      md += fmt::format("![Chapter {}: {}]({})\n\n", c + 1, chapter.title, images[c]);
    md += fmt::format("{}\n", report.chapters[c].narration);
    for (size_t q = 0; q < lesson.questions.size(); ++q)
      if (lesson.questions[q].chapter == static_cast<int>(c + 1))
        md += fmt::format("\n**Question {}.** {}\n", q + 1, report.questions[q].prompt);
  }
  md += fmt::format("\n## The PyTorch code\n\n```python\n{}{}```\n", lesson.snippet,
                    lesson.snippet.ends_with('\n') ? "" : "\n");
  const size_t exercises = std::min(exercises_results.size(), lesson.exercises.size());
  if (exercises > 0) {
    md += "\n## Exercises\n\nTurn the knobs, predict, then run it and check.\n\n";
    for (size_t x = 0; x < exercises; ++x) {
      std::vector<std::string> turned;
      for (const auto& [flag, value] : lesson.exercises[x].knobs)
        turned.push_back(fmt::format("--knob {}={}", flag.substr(2), value));
      md += fmt::format("{}. {} (`dpscope lesson run {} {}`)\n", x + 1, exercises_results[x].prompt,
                        lesson.id, fmt::join(turned, " "));
    }
  }
  if (!lesson.questions.empty() || exercises > 0) {
    md += "\n## Answer key\n\n";
    if (!lesson.questions.empty()) md += "### Questions\n\n";
    for (size_t q = 0; q < lesson.questions.size(); ++q) {
      const Question& question = lesson.questions[q];
      md += fmt::format("{}. {}{}\n", q + 1, answer_text(question, report.questions[q]),
                        report.questions[q].explain.empty() ? "" : " — " + report.questions[q].explain);
    }
    if (exercises > 0) md += "\n### Exercises\n\n";
    for (size_t x = 0; x < exercises; ++x) {
      const ExerciseResult& r = exercises_results[x];
      md += fmt::format("{}. {}{}\n", x + 1, answer_text(lesson.exercises[x].unit, r.value, r.problem),
                        r.explain.empty() ? "" : " — " + r.explain);
    }
  }
  return md;
}

}  // namespace dpscope::lesson
