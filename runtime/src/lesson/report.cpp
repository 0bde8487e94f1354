// The lesson engine (lesson/report.hpp): chapter times and computed answers on a trace, and the
// listing and handout texts made from them.
#include "dpscope/lesson/report.hpp"

#include <fmt/format.h>

#include <cmath>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_format/stats.hpp"

namespace dpscope::lesson {
namespace {

std::string time_text(const std::optional<int64_t>& time_ns) {
  return time_ns ? trace::format_duration(*time_ns) : std::string("never");
}

std::string answer_text(const Question& q, const QuestionResult& r) {
  if (!r.value) return r.problem;
  return q.unit.empty() ? format_answer(*r.value) : fmt::format("{} {}", format_answer(*r.value), q.unit);
}

// A shell-like rendering of the command line ("dpscope train --mode ddp ...").
std::string command_line(const std::vector<std::string>& args) {
  std::string line = "dpscope";
  for (const std::string& a : args) line += " " + (a.find(' ') == std::string::npos ? a : "'" + a + "'");
  return line;
}

}  // namespace

LessonReport evaluate_lesson(const Lesson& lesson, const trace::TraceData& data) {
  LessonReport report;
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
    report.chapters.push_back(result);
  }
  for (size_t i = 0; i < lesson.questions.size(); ++i) {
    QuestionResult result;
    try {
      result.value = lesson.questions[i].answer.evaluate(data);
    } catch (const Error& e) {
      result.problem = e.what();
      report.problems.push_back(fmt::format("{}: question {}: answer {} ({})", lesson.id, i + 1, e.what(),
                                            lesson.questions[i].answer.text()));
    }
    report.questions.push_back(std::move(result));
  }
  return report;
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

std::string format_answer(double value) {
  if (!std::isfinite(value)) return fmt::format("{}", value);
  if (std::abs(value) < 1e15 && value == std::round(value))
    return fmt::format("{}", static_cast<int64_t>(value));
  if (std::abs(value) >= 1000.0) return fmt::format("{:.1f}", value);
  return fmt::format("{:.4g}", value);
}

std::string format_report(const Lesson& lesson, const LessonReport& report) {
  std::string out = fmt::format("== lesson {}: {} ({} min) ==\n", lesson.id, lesson.title, lesson.minutes);
  if (report.error_rank)
    out += fmt::format("\nthe run stopped with an error on rank {}: {}\n", *report.error_rank,
                       report.error_message);
  for (size_t c = 0; c < lesson.chapters.size(); ++c) {
    out += fmt::format("\nchapter {} at {}: {}\n", c + 1, time_text(report.chapters[c].time_ns),
                       lesson.chapters[c].title);
    for (size_t q = 0; q < lesson.questions.size(); ++q) {
      const Question& question = lesson.questions[q];
      if (question.chapter != static_cast<int>(c + 1)) continue;
      out += fmt::format("  Q{}. {}\n      answer: {}\n", q + 1, question.prompt,
                         answer_text(question, report.questions[q]));
    }
  }
  return out;
}

std::string handout_markdown(const Lesson& lesson, const std::vector<std::string>& args,
                             const LessonReport& report, std::string_view trace_name,
                             const std::vector<std::string>& images) {
  std::string md = fmt::format("# Lesson {}: {}\n\n*About {} minutes.*\n\n## Goals\n\n", lesson.id,
                               lesson.title, lesson.minutes);
  for (const std::string& goal : lesson.goals) md += fmt::format("- {}\n", goal);
  md += fmt::format(
      "\n## The run\n\n```\n{}\n```\n\nIts trace is `{}`; watch it, with this lesson beside it, with "
      "`dpscope-viz --lesson {} {}`.\n",
      command_line(args), trace_name, lesson.id, trace_name);
  for (size_t c = 0; c < lesson.chapters.size(); ++c) {
    const Chapter& chapter = lesson.chapters[c];
    md += fmt::format("\n## {}. {}\n\n*At {} of simulated time; snippet line {}.*\n\n", c + 1, chapter.title,
                      time_text(report.chapters[c].time_ns), chapter.snippet_line);
    if (c < images.size() && !images[c].empty())
      md += fmt::format("![Chapter {}: {}]({})\n\n", c + 1, chapter.title, images[c]);
    md += fmt::format("{}\n", chapter.narration);
    for (size_t q = 0; q < lesson.questions.size(); ++q)
      if (lesson.questions[q].chapter == static_cast<int>(c + 1))
        md += fmt::format("\n**Question {}.** {}\n", q + 1, lesson.questions[q].prompt);
  }
  md += fmt::format("\n## The PyTorch code\n\n```python\n{}{}```\n", lesson.snippet,
                    lesson.snippet.ends_with('\n') ? "" : "\n");
  if (!lesson.questions.empty()) {
    md += "\n## Answers\n\n";
    for (size_t q = 0; q < lesson.questions.size(); ++q) {
      const Question& question = lesson.questions[q];
      md += fmt::format("{}. {}{}\n", q + 1, answer_text(question, report.questions[q]),
                        question.explain.empty() ? "" : " — " + question.explain);
    }
  }
  return md;
}

}  // namespace dpscope::lesson
