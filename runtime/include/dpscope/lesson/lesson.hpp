// A lesson: one TOML file in lessons/ (docs/lessons.md has the format and a complete example).
//
// A lesson names the run it watches (`[scenario]`, a `dpscope train` or `dpscope bench` command
// line on simulated GPUs), the knobs a student may turn, the equivalent PyTorch snippet, chapters
// that start when a trace event happens (`trigger`, an EventFilter) and predict-then-reveal
// questions whose answers are Expressions computed from the trace. load_lesson() checks all of it
// (keys, types, ranges, filters, expressions) and reports the first problem as one line naming
// "FILE:LINE" and the key. Used by `dpscope lesson` (runtime/cli/lesson_cmd.cpp) and the
// visualizer's lesson mode (visualizer/app/lesson_mode.cpp); the engine that evaluates a lesson on
// a trace is lesson/report.hpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/lesson/expression.hpp"
#include "dpscope/lesson/filter.hpp"
#include "dpscope/lesson/sandbox.hpp"
#include "dpscope/lesson/text_template.hpp"

namespace dpscope::lesson {

// Limits on a lesson file (docs/lessons.md, "Limits"): what a hostile file can make the loader,
// the viewer's sliders and `lesson check` do stays bounded. The shipped lessons are under 10 KiB.
inline constexpr uint64_t kMaxLessonFileBytes = uint64_t{1} << 20;  // 1 MiB
inline constexpr double kMaxKnobMagnitude = 1e9;                    // |min|, |max| and |default|
inline constexpr double kMinKnobStep = 1e-6;
inline constexpr int64_t kMaxKnobValues = 1000;  // (max - min) / step + 1: a slider's stops
// How many of each a lesson may have (the shipped ones have at most 7 chapters, 7 questions, 3 knobs):
// `lesson check` evaluates every question on the trace and parses every knob value.
inline constexpr size_t kMaxGoals = 32, kMaxKnobs = 16, kMaxChapters = 64, kMaxQuestions = 128,
                        kMaxScenarioArgs = 256, kMaxExpects = 32, kMaxExercises = 8, kMaxOtherScenarios = 8;
// A chapter's `compare` names 2 to 4 runs: the side-by-side view (dpscope-viz --compare) shows that many.
inline constexpr size_t kMinCompared = 2, kMaxCompared = 4;
// The name `compare` gives the lesson's own run ([scenario], with the knobs as turned).
inline constexpr std::string_view kMainRun = "main";

// A value a student may change: numeric (min, max, step) or one of `choices`. The scenario runs
// with every knob at its value (the default unless turned), as `FLAG VALUE` appended to its args;
// a choice "none" leaves the flag out, and a switch knob (`choices = ["off", "on"]` with a flag
// taking no value) gives the bare flag for "on".
struct Knob {
  std::string flag;   // "--devices"
  std::string label;  // "GPUs"
  bool numeric = false;
  double min = 0.0, max = 0.0, step = 1.0;  // numeric knobs
  std::vector<std::string> choices;         // choice knobs
  bool is_switch = false;                   // `switch = true`: "on" adds the bare flag
  std::string default_value;                // as written on the command line ("4", "ring")
  // Values whose run ends in an error the lesson means a student to see (with the other knobs at
  // their defaults): value -> a part of that error ("t4" -> "describes one machine").
  std::map<std::string, std::string> fails;
  int line = 0;  // where its [[knobs]] table is in the lesson file

  // Returns "" when `value` is allowed, else the reason ("--devices must be an integer from 1 to 8
  // in steps of 1, got 9").
  std::string check(const std::string& value) const;
};

// What a chapter's picture must show: an expression over the trace at the chapter's moment
// (`at=` filters; docs/lessons.md, "Pictures at their moment"), true when non-zero.
struct Expectation {
  Expression condition;  // "count(name=grad_ready, rank=0, step=0, at=started) == params"
  int line = 0;
};

struct Chapter {
  std::string title;
  EventFilter trigger;          // nth defaults to 1
  std::string narration;        // as written, placeholders included
  TextTemplate narration_text;  // rendered by evaluate_lesson at the chapter's moment
  std::vector<Expectation> expect;
  int snippet_line = 0;  // 1-based line of the snippet to highlight
  // `compare = ["main", "tree", "naive"]`: the runs the chapter shows side by side, in this order —
  // "main" (kMainRun) for the lesson's own run, else a [[scenarios]] name. Each is shown at its own
  // moment: the chapter's trigger matched in that run; the chapter's `expect` must hold in each.
  // Empty: the chapter shows the lesson's run alone.
  std::vector<std::string> compare;
  int compare_line = 0;
};

struct Question {
  int chapter = 1;     // 1-based: the chapter during which it is asked
  std::string prompt;  // as written
  TextTemplate prompt_text;
  Expression answer;
  std::string unit;         // "bytes", "us", "" for a count
  double tolerance = 0.01;  // relative: an answer within 1 % is right by default
  std::string explain;      // shown after the reveal (optional), as written
  TextTemplate explain_text;
};

// For teachers: turn knobs, predict, check. The solution is computed from a run of the scenario
// with `knobs` turned (`lesson check` runs it; `lesson handout` prints it in the answer key).
struct Exercise {
  std::string prompt;                        // as written
  TextTemplate prompt_text;                  // rendered on the exercise's run
  std::map<std::string, std::string> knobs;  // flag -> value, as --knob takes them
  Expression answer;
  std::string unit;
  double tolerance = 0.01;
  std::string explain;
  TextTemplate explain_text;
  int line = 0;
};

// [[scenarios]]: another run the lesson compares with (one GPU beside DDP, tree beside ring). Its
// trace is OUT/ID.NAME.trace.jsonl; texts read it as `@name(expr)`. No knob applies to it.
struct OtherScenario {
  std::string name;  // "one-gpu"
  std::vector<std::string> args;
  // The lesson's knobs that apply to this run too (`knobs = ["--batch"]`): a student who turns
  // the batch size compares like with like.
  std::vector<std::string> knobs;
  int line = 0;
};

struct Lesson {
  std::filesystem::path file;
  std::string id;  // "04-ddp": the file's stem
  std::string title;
  std::vector<std::string> goals;
  int minutes = 0;
  std::vector<std::string> scenario;  // ["train", "--mode", "ddp", ...] without --trace
  // [scenario] expect_error: the scenario is declared to fail, with a message containing this
  // (a pitfall lesson watches a run that stops with an error); "" = it must run to the end.
  std::string expect_error;
  std::vector<OtherScenario> scenarios;  // [[scenarios]], in file order
  std::vector<Knob> knobs;
  std::string snippet;  // PyTorch code
  std::vector<Chapter> chapters;
  std::vector<Question> questions;
  std::vector<Exercise> exercises;

  const Knob* find_knob(std::string_view flag) const;  // "--devices" or "devices"; nullptr if none
  int snippet_lines() const;
};

// Reads and checks one lesson file. Throws Error(kIo) when it cannot be read (missing, a directory,
// a FIFO or device: never opened, so reading never blocks), Error(kFormat) "FILE:LINE: what" for
// anything malformed (TOML syntax, unknown or missing key, bad type, a value out of range or past
// the limits above, a bad trigger, an answer that does not parse: "... question 2: answer column 7:
// ...", a scenario that writes outside its scratch directory or asks for help).
Lesson load_lesson(const std::filesystem::path& file);

// The same checks on a lesson's text, as if read from `file` (its name gives the id and the messages'
// FILE); load_lesson() is read + parse_lesson(). The fuzzer (tests/fuzz/lesson_file_fuzz.cpp) calls it.
Lesson parse_lesson(std::string_view text, const std::filesystem::path& file);

// Why `path` cannot be a lesson file, in words ("… is a directory: give it as --lessons-dir …",
// "… is not a regular file (a FIFO)", "… no such file"); "" for a regular file. Looks with stat(),
// never opens it.
std::string lesson_path_problem(const std::filesystem::path& path);

// The lesson files in `dir` (*.toml), sorted by name. Throws Error(kIo) when `dir` is not a directory.
std::vector<std::filesystem::path> lesson_files(const std::filesystem::path& dir);

// Loads every lesson in `dir`, sorted by id. Throws on the first malformed one.
std::vector<Lesson> load_lessons(const std::filesystem::path& dir);

// The scenario's command line with every knob at its value: `overrides` maps a knob's flag
// ("--devices" or "devices") to a value. Throws Error(kUsage) for a flag that is no knob of the
// lesson, a knob given twice ("devices" and "--devices") or a value out of its range, naming both.
std::vector<std::string> scenario_args(const Lesson& lesson,
                                       const std::map<std::string, std::string>& overrides = {});

// The command line of the lesson's other scenario `other`, with the knobs it shares (its `knobs`)
// at their values; `overrides` as for scenario_args (checked there).
std::vector<std::string> other_scenario_args(const Lesson& lesson, const OtherScenario& other,
                                             const std::map<std::string, std::string>& overrides = {});

}  // namespace dpscope::lesson
