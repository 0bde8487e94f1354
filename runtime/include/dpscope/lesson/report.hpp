// The lesson engine: a lesson evaluated on the trace of its scenario — when each chapter starts and
// what each question's answer is — and the texts made from that (the `dpscope lesson run` listing
// and the `dpscope lesson handout` Markdown page). Used by runtime/cli/lesson_cmd.cpp and
// the visualizer's lesson mode (which pauses the player at each chapter's time).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/lesson/lesson.hpp"

namespace dpscope::lesson {

struct ChapterResult {
  // When the trigger fires: the matching event's start, from the trace's first event (ns);
  // nullopt when it never fires.
  std::optional<int64_t> time_ns;
  std::string narration;  // rendered at the chapter's moment (the source when it cannot be)
  // A chapter with `compare`: per compared run (in its order), that run's moment — the chapter's
  // trigger matched in that run, from its trace's first event (ns); nullopt when it never fires
  // there or the run's trace is missing (both are problems). Empty for other chapters.
  std::vector<std::optional<int64_t>> compare_times_ns;
};

struct QuestionResult {
  std::optional<double> value;  // nullopt when it cannot be computed
  std::string problem;          // why not ("cannot be computed: count(...) matches no event")
  std::string prompt, explain;  // rendered at the chapter's moment
};

struct ExerciseResult {
  std::optional<double> value;  // the solution on the exercise's run; nullopt when it cannot be computed
  std::string problem;
  std::string prompt, explain;  // rendered on the exercise's run
};

struct LessonReport {
  std::vector<ChapterResult> chapters;    // one per lesson chapter, same order
  std::vector<QuestionResult> questions;  // one per lesson question, same order
  // One line per problem, naming the lesson and the item: "04-ddp: chapter 2 'The ring': trigger
  // { type = "transfer" } never fires", "04-ddp: chapter 3 'Sum': fires at 1.000 us, before chapter
  // 2 (2.000 us)", "04-ddp: question 1: answer cannot be computed: ...".
  std::vector<std::string> problems;
  // A chapter's `expect` that does not hold at its moment (in the lesson's run or a compared one),
  // or cannot be computed, in the same form. A lesson declares its pictures for its default knobs:
  // `lesson check` proves them there; with knobs turned a picture may show another story.
  std::vector<std::string> picture_problems;
  // The first `error` event of the trace (the run failed; docs/trace-format.md): its rank and message.
  std::optional<int> error_rank;
  std::string error_message;
  // The trace's clock was measured (a real run: lesson 14's PyTorch job), not simulated: the
  // chapters' times are said as such.
  bool measured_clock = false;
};

// Chapter times and answers on `data`; with [scenario] expect_error, also a problem when the trace
// has no `error` event containing it ("the scenario is declared to fail ... its trace has no error
// event"), and without it, a problem when the trace has one.
// Texts are rendered and answers computed at each chapter's moment (an absolute time
// min_ts_ns + time_ns, for `at=`); a chapter's `expect` that does not hold there, a placeholder that
// cannot be computed, and a chapter at the same moment as the one before it (the same picture) are
// problems. A chapter with `compare` is also checked in each compared run at that run's own moment
// (ChapterResult::compare_times_ns): a missing trace, a trigger that never fires there or an
// `expect` that does not hold there is a problem naming the run.
// `others` holds the traces of the lesson's [[scenarios]] by name (for `@name(expr)`).
using ScenarioTraces = std::map<std::string, const trace::TraceData*>;

// Where `lesson run` writes the trace of the lesson's other scenario `other`: beside the lesson's
// own trace `trace` (DIR/ID.trace.jsonl), as DIR/ID.NAME.trace.jsonl.
std::filesystem::path other_trace_path(const std::filesystem::path& trace, const Lesson& lesson,
                                       const OtherScenario& other);

// The traces of every [[scenarios]] of `lesson` beside `trace` (a viewer that shows a lesson's run
// reads them, then passes pointers to evaluate_lesson). Throws as trace::read_trace for a missing
// or malformed one.
std::map<std::string, trace::TraceData> read_other_traces(const std::filesystem::path& trace,
                                                          const Lesson& lesson);
LessonReport evaluate_lesson(const Lesson& lesson, const trace::TraceData& data,
                             const ScenarioTraces& others = {});

// An exercise evaluated on the trace of its own run (the scenario with its knobs turned).
ExerciseResult evaluate_exercise(const Lesson& lesson, size_t index, const trace::TraceData& data,
                                 const ScenarioTraces& others = {});

// The lint (docs/lessons.md, "The lint"): literal numbers in goals, narration, prompts and
// explanations, one line each naming the lesson and the item.
std::vector<std::string> lint_lesson(const Lesson& lesson);

// The commands a lesson quotes for the student to type: the `code` spans of its rendered texts that
// start with "dpscope train " or "dpscope bench " (`lesson check` runs each one).
std::vector<std::string> quoted_commands(const Lesson& lesson, const LessonReport& report);

// How the scenario's run ended, against what the lesson declares: `failure` is the run's error
// message (nullopt: it ran to the end). Returns "" when they agree, else the problem (callers
// put the lesson's id in front):
//   the scenario is declared to fail with 'Detected mismatch' (expect_error) but ran to the end
//   the scenario failed with 'X', not with the declared expect_error 'Y'
//   the scenario failed: X (a lesson whose run fails declares it: [scenario] expect_error)
std::string run_outcome_problem(const Lesson& lesson, const std::optional<std::string>& failure);

// An answer in significant digits: integers as integers, else about four significant digits.
std::string format_answer(double value);

// What `dpscope lesson run` prints after the run: the chapters with their trigger times, the
// questions with their answers.
std::string format_report(const Lesson& lesson, const LessonReport& report);

// The handout page: title, goals, the scenario's command line, every chapter (title, time,
// narration, its questions), the PyTorch snippet, and the answers in a section of their own.
// `trace_name` is the trace file the page refers to (for dpscope-viz). `images[c]`, when given and
// not empty, is chapter c's picture (a PNG beside the page), shown under the chapter's title.
// `exercises[i]` (when given) is exercise i's result; the page then has an "Exercises" section and
// an "Answer key" at the end (answers and the exercises' solutions).
std::string handout_markdown(const Lesson& lesson, const std::vector<std::string>& args,
                             const LessonReport& report, std::string_view trace_name,
                             const std::vector<std::string>& images = {},
                             const std::vector<ExerciseResult>& exercises = {});

}  // namespace dpscope::lesson
