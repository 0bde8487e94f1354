// The lesson engine (lesson/report.hpp) and knobs (lesson/lesson.hpp scenario_args): chapter
// times, computed answers and problem lines on the hand-written trace; the handout page.
#include "dpscope/lesson/report.hpp"

#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"
#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

Chapter chapter(const std::string& title, std::initializer_list<std::pair<std::string, FilterValue>> keys) {
  Chapter c;
  c.title = title;
  c.narration = title + " narration.";
  c.snippet_line = 1;
  for (const auto& [key, value] : keys) EXPECT_EQ(set_filter_key(c.trigger, key, value), "");
  c.trigger.nth = c.trigger.nth == 0 ? 1 : c.trigger.nth;
  c.trigger.text = "{ ... }";
  return c;
}

Question question(int chapter_number, const std::string& answer, const std::string& unit) {
  Question q;
  q.chapter = chapter_number;
  q.prompt = "Q about " + answer + "?";
  q.answer = Expression::parse(answer);
  q.unit = unit;
  return q;
}

Lesson sample_lesson() {
  Lesson l;
  l.id = "09-sample";
  l.title = "A sample";
  l.minutes = 5;
  l.goals = {"see a ring"};
  l.scenario = {"bench", "all_reduce", "--iters", "1"};
  l.snippet = "import torch\n";
  l.chapters = {chapter("Reduce-scatter", {{"type", "transfer"}, {"rank", 1}}),
                chapter("All-gather", {{"name", "ring all-gather"}}),
                chapter("Never", {{"name", "checkpoint_saved"}})};
  l.questions = {question(1, "sum(bytes, type=transfer, rank=0)", "bytes"), question(2, "count(rank=9)", ""),
                 question(2, "span(category=collective) / 1000", "us")};
  return l;
}

TEST(LessonReport, ChapterTimesAreTheTriggersFromTheTraceStart) {
  const LessonReport r = evaluate_lesson(sample_lesson(), testing::hand_trace());
  ASSERT_EQ(r.chapters.size(), 3u);
  EXPECT_EQ(r.chapters[0].time_ns, 100);  // rank 1's reduce-scatter transfer
  EXPECT_EQ(r.chapters[1].time_ns, 200);
  EXPECT_FALSE(r.chapters[2].time_ns.has_value());
}

TEST(LessonReport, AnswersAreComputedOrSayWhyNot) {
  const LessonReport r = evaluate_lesson(sample_lesson(), testing::hand_trace());
  ASSERT_EQ(r.questions.size(), 3u);
  EXPECT_EQ(r.questions[0].value, 2000.0);
  EXPECT_FALSE(r.questions[1].value.has_value());
  EXPECT_EQ(r.questions[1].problem, "cannot be computed: count(rank=9) matches no event");
  EXPECT_EQ(r.questions[2].value, 0.2);
}

TEST(LessonReport, OneProblemLinePerItemNamingLessonAndItem) {
  const LessonReport r = evaluate_lesson(sample_lesson(), testing::hand_trace());
  EXPECT_EQ(r.problems,
            (std::vector<std::string>{
                "09-sample: chapter 3 'Never': trigger { ... } never fires",
                "09-sample: question 2: answer cannot be computed: count(rank=9) matches no event "
                "(count(rank=9))"}));
}

TEST(LessonReport, AChapterThatStartsBeforeThePreviousOneIsAProblem) {
  Lesson l = sample_lesson();
  l.chapters = {chapter("All-gather", {{"name", "ring all-gather"}}),
                chapter("Reduce-scatter", {{"type", "transfer"}, {"rank", 1}}),
                chapter("Same time", {{"type", "transfer"}, {"rank", 0}})};
  l.questions.clear();
  EXPECT_EQ(evaluate_lesson(l, testing::hand_trace()).problems,
            (std::vector<std::string>{
                "09-sample: chapter 2 'Reduce-scatter': fires at 100 ns, before chapter 1 (200 ns)",
                // Regression test: L5 and L8 had two chapters at one moment, the same picture twice
                "09-sample: chapter 3 'Same time': at the same moment as chapter 2 (100 ns): the same "
                "picture twice"}));
}

// A trace that ends with `error` instants (a failed run): the earliest one is the run's error.
trace::TraceData failed_trace() {
  std::string text = testing::hand_trace_text();
  text +=
      R"({"type":"instant","ts":900,"rank":1,"dev":2,"step":0,"phase":"none","name":"error","args":{"message":"Detected mismatch between collectives on ranks. late"}})"
      "\n"
      R"({"type":"instant","ts":400,"rank":0,"dev":0,"step":0,"phase":"none","name":"error","args":{"message":"Detected mismatch between collectives on ranks. first"}})"
      "\n";
  return trace::parse_trace(text, "failed.jsonl");
}

Lesson one_chapter_lesson(const std::string& expect_error) {
  Lesson l = sample_lesson();
  l.chapters = {chapter("It stops", {{"name", "error"}})};
  l.questions = {question(1, "count(name=error)", "ranks")};
  l.expect_error = expect_error;
  return l;
}

TEST(LessonReport, TheEarliestErrorEventIsTheRunsErrorAndTriggersFireOnIt) {
  const LessonReport r = evaluate_lesson(one_chapter_lesson("Detected mismatch"), failed_trace());
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
  ASSERT_TRUE(r.error_rank.has_value());
  EXPECT_EQ(*r.error_rank, 0);
  EXPECT_EQ(r.error_message, "Detected mismatch between collectives on ranks. first");
  ASSERT_TRUE(r.chapters[0].time_ns.has_value());
  EXPECT_EQ(*r.chapters[0].time_ns, 400);
  EXPECT_EQ(r.questions[0].value, 2.0);
  EXPECT_NE(
      format_report(one_chapter_lesson("Detected mismatch"), r)
          .find("the run stopped with an error on rank 0: Detected mismatch between collectives on ranks. "
                "first\n"),
      std::string::npos);
}

TEST(LessonReport, ADeclaredErrorMissingFromTheTraceIsAProblemAndSoIsAnUndeclaredOne) {
  Lesson declared = one_chapter_lesson("Expected to have finished reduction");
  const LessonReport wrong = evaluate_lesson(declared, failed_trace());
  ASSERT_EQ(wrong.problems.size(), 1u);
  EXPECT_EQ(wrong.problems[0],
            "09-sample: the scenario is declared to fail with 'Expected to have finished reduction' "
            "(expect_error), but its trace has no error event saying so");
  const LessonReport undeclared = evaluate_lesson(one_chapter_lesson(""), failed_trace());
  ASSERT_EQ(undeclared.problems.size(), 1u);
  EXPECT_EQ(
      undeclared.problems[0],
      "09-sample: the trace ends with an error on rank 0: Detected mismatch between collectives on ranks. "
      "first");
}

TEST(LessonReport, RunOutcomeAgainstExpectError) {
  const Lesson declared = one_chapter_lesson("Detected mismatch");
  const Lesson plain = one_chapter_lesson("");
  EXPECT_EQ(run_outcome_problem(declared, "rank 0 failed: Detected mismatch between collectives"), "");
  EXPECT_EQ(run_outcome_problem(plain, std::nullopt), "");
  EXPECT_EQ(run_outcome_problem(declared, std::nullopt),
            "the scenario is declared to fail with 'Detected mismatch' (expect_error) but ran to the end");
  EXPECT_EQ(
      run_outcome_problem(declared, "out of memory"),
      "the scenario failed with 'out of memory', not with the declared expect_error 'Detected mismatch'");
  EXPECT_EQ(
      run_outcome_problem(plain, "out of memory"),
      "the scenario failed: out of memory (a lesson whose run fails declares it: [scenario] expect_error)");
}

TEST(LessonReport, FormatAnswerUsesSignificantDigits) {
  EXPECT_EQ(format_answer(2000.0), "2000");
  EXPECT_EQ(format_answer(0.2), "0.2");
  EXPECT_EQ(format_answer(-0.31168), "-0.3117");
  EXPECT_EQ(format_answer(289.9612), "290");
  EXPECT_EQ(format_answer(12345.678), "12345.7");
  EXPECT_EQ(format_answer(1.0 / 3.0), "0.3333");
}

TEST(LessonReport, RunListingShowsChaptersWithTheirQuestions) {
  const Lesson l = sample_lesson();
  EXPECT_EQ(format_report(l, evaluate_lesson(l, testing::hand_trace())),
            "== lesson 09-sample: A sample (5 min) ==\n"
            "\nchapter 1 at 100 ns: Reduce-scatter\n"
            "  Reduce-scatter narration.\n"
            "  Q1. Q about sum(bytes, type=transfer, rank=0)?\n      answer: 2000 bytes\n"
            "\nchapter 2 at 200 ns: All-gather\n"
            "  All-gather narration.\n"
            "  Q2. Q about count(rank=9)?\n      answer: cannot be computed: count(rank=9) matches no event\n"
            "  Q3. Q about span(category=collective) / 1000?\n      answer: 0.2 us\n"
            "\nchapter 3 at never: Never\n"
            "  Never narration.\n");
}

TEST(LessonReport, HandoutHasNarrationQuestionsSnippetAndAnswersApart) {
  const Lesson l = sample_lesson();
  const std::string md =
      handout_markdown(l, scenario_args(l), evaluate_lesson(l, testing::hand_trace()), "t.jsonl");
  EXPECT_TRUE(
      md.starts_with("# Lesson 09-sample: A sample\n\n*About 5 minutes.*\n\n## Goals\n\n- see a ring\n"));
  EXPECT_NE(md.find("```\ndpscope bench all_reduce --iters 1\n```"), std::string::npos);
  EXPECT_NE(md.find("watch it, with this lesson beside it, with `dpscope-viz --lesson 09-sample t.jsonl`"),
            std::string::npos);
  EXPECT_NE(md.find("## 1. Reduce-scatter\n\n*At 100 ns of simulated time; snippet line "
                    "1.*\n\nReduce-scatter narration.\n"
                    "\n**Question 1.** Q about sum(bytes, type=transfer, rank=0)?\n"),
            std::string::npos);
  EXPECT_NE(md.find("## The PyTorch code\n\n```python\nimport torch\n```\n"), std::string::npos);
  // Answers come after every chapter, in a section of their own.
  const std::string key = "\n## Answer key\n\n### Questions\n\n1. ";
  const size_t answers = md.find(key + "2000 bytes\n2. cannot be computed");
  ASSERT_NE(answers, std::string::npos);
  EXPECT_GT(answers, md.find("## 3. Never"));
  EXPECT_EQ(md.find("2000 bytes"), answers + key.size());
}

// A real run's trace (lesson 14: PyTorch's own job) has a measured clock: its chapters' times are
// not simulated time (the handout said so for every lesson).
TEST(LessonReport, HandoutSaysAMeasuredRunsTimesAreMeasured) {
  const Lesson l = sample_lesson();
  trace::TraceData measured = testing::hand_trace();
  measured.header.clock = "measured";
  const std::string md = handout_markdown(l, scenario_args(l), evaluate_lesson(l, measured), "t.jsonl");
  EXPECT_NE(md.find("*At 100 ns of measured time; snippet line 1.*"), std::string::npos) << md;
  EXPECT_EQ(md.find("simulated time"), std::string::npos) << md;
}

Lesson knob_lesson() {
  Lesson l;
  l.id = "09-knobs";
  l.scenario = {"train", "--mode", "ddp"};
  Knob devices;
  devices.flag = "--devices";
  devices.numeric = true;
  devices.min = 2;
  devices.max = 8;
  devices.step = 2;
  devices.default_value = "4";
  Knob pitfall;
  pitfall.flag = "--pitfall";
  pitfall.choices = {"none", "no-average"};
  pitfall.default_value = "none";
  Knob zero;
  zero.flag = "--zero";
  zero.is_switch = true;
  zero.choices = {"off", "on"};
  zero.default_value = "off";
  l.knobs = {devices, pitfall, zero};
  return l;
}

TEST(Knobs, DefaultsAreAppendedAndNoneOrOffLeaveTheFlagOut) {
  EXPECT_EQ(scenario_args(knob_lesson()),
            (std::vector<std::string>{"train", "--mode", "ddp", "--devices", "4"}));
}

TEST(Knobs, TurnedKnobsReplaceTheirDefault) {
  EXPECT_EQ(scenario_args(knob_lesson(), {{"devices", "8"}, {"--pitfall", "no-average"}, {"zero", "on"}}),
            (std::vector<std::string>{"train", "--mode", "ddp", "--devices", "8", "--pitfall", "no-average",
                                      "--zero"}));
}

TEST(Knobs, ValuesOutsideTheRangeAreUsageErrors) {
  auto message = [](const std::map<std::string, std::string>& knobs) -> std::string {
    try {
      scenario_args(knob_lesson(), knobs);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage);
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(message({{"devices", "9"}}),
            "lesson 09-knobs: --devices must be a number from 2 to 8 in steps of 2, got '9'");
  EXPECT_EQ(message({{"devices", "3"}}),
            "lesson 09-knobs: --devices must be a number from 2 to 8 in steps of 2, got '3'");
  EXPECT_EQ(message({{"devices", "4x"}}),
            "lesson 09-knobs: --devices must be a number from 2 to 8 in steps of 2, got '4x'");
  EXPECT_EQ(message({{"pitfall", "no-set-epoch"}}),
            "lesson 09-knobs: --pitfall must be one of: none, no-average; got 'no-set-epoch'");
  EXPECT_EQ(message({{"batch", "8"}}),
            "lesson 09-knobs has no knob batch (its knobs: --devices, --pitfall, --zero)");
}

}  // namespace
}  // namespace dpscope::lesson

namespace dpscope::lesson {
namespace {

TEST(LessonReport, OtherScenariosTracesLieBesideTheLessonsTrace) {
  Lesson l;
  l.id = "04-ddp";
  l.scenarios.push_back({.name = "one-gpu", .args = {"train"}});
  EXPECT_EQ(other_trace_path("out/lessons/04-ddp/04-ddp.trace.jsonl", l, l.scenarios[0]),
            std::filesystem::path("out/lessons/04-ddp/04-ddp.one-gpu.trace.jsonl"));
  const std::filesystem::path dir = testing::scratch_dir();
  testing::write_file(dir / "04-ddp.one-gpu.trace.jsonl", testing::hand_trace_text());
  const std::map<std::string, trace::TraceData> others = read_other_traces(dir / "04-ddp.trace.jsonl", l);
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others.at("one-gpu").header.devices.size(), 3u);
  l.scenarios.push_back({.name = "dp", .args = {"train"}});
  EXPECT_THROW((void)read_other_traces(dir / "04-ddp.trace.jsonl", l), Error);
}

}  // namespace
}  // namespace dpscope::lesson

namespace dpscope::lesson {
namespace {

// A compare chapter: each compared run at its own moment (the trigger matched in it), where the
// chapter's expect must hold too; a run whose trace is missing, whose trigger never fires or whose
// picture misses an expectation is a problem naming the run.
TEST(LessonReport, CompareChapterShowsEachRunAtItsMoment) {
  Lesson l = sample_lesson();
  l.chapters.resize(1);  // "Reduce-scatter": the first transfer of rank 1 (ts 100)
  l.questions.clear();
  l.scenarios = {{.name = "again", .args = {"train"}}, {.name = "later", .args = {"train"}}};
  l.chapters[0].compare = {"main", "again", "later"};
  l.chapters[0].expect = {{Expression::parse("count(type=transfer, rank=1, at=started) == 1"), 1}};
  const trace::TraceData main = testing::hand_trace();
  const trace::TraceData again = testing::hand_trace();
  std::string text = testing::hand_trace_text();  // every time 1000 ns later
  for (const std::string ts : {"100", "200", "300", "310"}) {
    const std::string from = "\"ts\":" + ts + ",";
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + 1))
      text.replace(at, from.size(), "\"ts\":" + std::to_string(std::stoi(ts) + 1000) + ",");
  }
  const trace::TraceData later = trace::parse_trace(text, "later.jsonl");
  LessonReport r = evaluate_lesson(l, main, {{"again", &again}, {"later", &later}});
  EXPECT_EQ(r.problems, std::vector<std::string>{});
  ASSERT_EQ(r.chapters[0].compare_times_ns.size(), 3u);
  EXPECT_EQ(r.chapters[0].compare_times_ns[0], std::optional<int64_t>(100));
  EXPECT_EQ(r.chapters[0].compare_times_ns[1], std::optional<int64_t>(100));
  EXPECT_EQ(r.chapters[0].compare_times_ns[2], std::optional<int64_t>(1100));

  l.chapters[0].expect = {{Expression::parse("count(type=transfer, at=started) == 2"), 1}};
  r = evaluate_lesson(l, main, {{"again", &again}});
  EXPECT_EQ(r.problems, (std::vector<std::string>{
                            "09-sample: chapter 1 'Reduce-scatter': compare: no trace of the run 'later'"}));
  EXPECT_EQ(r.chapters[0].compare_times_ns[2], std::nullopt);

  l.chapters[0].expect = {{Expression::parse("count(type=transfer, rank=0, at=started) == 1"), 1}};
  const trace::TraceData no_rank1 = trace::parse_trace(
      testing::hand_trace_text().substr(0, testing::hand_trace_text().find("{\"type\":\"transfer\"")),
      "cut.jsonl");
  r = evaluate_lesson(l, main, {{"again", &no_rank1}, {"later", &later}});
  EXPECT_EQ(
      r.problems,
      (std::vector<std::string>{
          "09-sample: chapter 1 'Reduce-scatter': compare: trigger { ... } never fires in the run 'again'"}));
}

}  // namespace
}  // namespace dpscope::lesson
