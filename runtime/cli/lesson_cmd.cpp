// `dpscope lesson`: the lessons in lessons/ (docs/lessons.md).
//   dpscope lesson list                          id, title and minutes of every lesson
//   dpscope lesson run ID [--out DIR] [--knob FLAG=VALUE ...] [--no-viz]
//                                                runs the scenario in-process with a trace, prints the
//                                                chapters' trigger times and the computed answers, and
//                                                opens dpscope-viz on the trace when a display is there
//   dpscope lesson check [ID] [--out DIR]        runs every lesson (or one) headlessly: exit 1 with one
//                                                line per problem (a trigger that never fires, an answer
//                                                that cannot be computed, a snippet that is not Python)
//   dpscope lesson handout ID OUT [--no-png] [--knob FLAG=VALUE ...]
//                                                writes OUT/ID.md (narration, questions, exercises, code,
//                                                answer key) and OUT/ID-chapter-N.png (screenshots)
// Every subcommand takes --lessons-dir DIR; by default lessons are found next to the assets (the
// presets' lookup, base/asset_dir.hpp asset_dir()). The scenario runs through the same `train` and
// `bench` commands as on the command line (registered on a private CLI11 app), so a lesson's run
// is exactly the command it shows. A scenario writes only inside its scratch directory: load_lesson
// checks that on the text, run_lesson again on the resolved paths just before the run.
// `check` without --out works in a TempRunDir (lesson/run_dir.hpp): removed on every way out,
// SIGINT and SIGTERM included, and swept at the next start when the process was killed outright.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "dpscope/base/asset_dir.hpp"
#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/cli_empty_values.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/process.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/lesson/catalog.hpp"
#include "dpscope/lesson/lesson.hpp"
#include "dpscope/lesson/report.hpp"
#include "dpscope/lesson/run_dir.hpp"
#include "dpscope/lesson/torch_scenario.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "lesson_run_cache.hpp"
#include "lesson_torch.hpp"

namespace dpscope::cli {
namespace {

namespace fs = std::filesystem;

struct LessonArgs {
  std::string lessons_dir;
  std::string id;
  std::string out;
  std::vector<std::string> knobs;  // FLAG=VALUE
  bool no_viz = false;
  bool no_png = false;     // handout: the Markdown page only
  std::string reuse_runs;  // run: where traces of earlier runs are kept by command line
};

fs::path lessons_dir(const LessonArgs& args) {
  return lesson::find_lessons_dir(asset_dir(), args.lessons_dir);
}

// Sends stdout to /dev/null while it lives (the scenario's own progress and summary, for `check`
// and `handout`, which print one line per lesson instead).
class QuietStdout {
 public:
  explicit QuietStdout(bool quiet) {
    if (!quiet) return;
    std::fflush(stdout);
    saved_ = dup(STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (saved_ < 0 || null < 0 || dup2(null, STDOUT_FILENO) < 0) {
      if (null >= 0) close(null);
      restore();
      return;
    }
    close(null);
  }
  ~QuietStdout() { restore(); }
  QuietStdout(const QuietStdout&) = delete;
  QuietStdout& operator=(const QuietStdout&) = delete;

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    dup2(saved_, STDOUT_FILENO);
    close(saved_);
    saved_ = -1;
  }
  int saved_ = -1;
};

// Parses `args` (a `train` or `bench` command line) on a private app; with `dry_run`, the commands'
// callbacks are dropped, so only the flags and their types are checked and nothing runs.
// The running scenario's deadline (ScenarioDeadline, commands.hpp): steady-clock nanoseconds, 0 for
// none. Atomic: a DDP run's step reports come from its rank threads.
std::atomic<int64_t> scenario_deadline_ns{0};

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void parse_scenario(const std::vector<std::string>& args, bool dry_run) {
  CLI::App app{"dpscope lesson scenario", "dpscope"};
  app.require_subcommand(1);
  // Parse-only, not a callback replaced afterwards: the replaced callback owned the options' values
  // (ASan: heap-use-after-free in the parse).
  const Registration registration = dry_run ? Registration::kParseOnly : Registration::kRun;
  register_train(app, registration);
  register_bench(app, registration);
  refuse_empty_values(app);
  refuse_unfit_integers(app);
  std::vector<std::string> argv_text = {"dpscope"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& a : argv_text) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Success&) {
    // --help or --version (load_lesson refuses them; this is the backstop): CLI11's own text for
    // this, "This should be caught in your main function", means nothing to a lesson's reader.
    throw Error(ErrorKind::kFormat,
                "the scenario's command line asks for help or the version instead of a run");
  } catch (const CLI::ParseError& e) {
    throw Error(ErrorKind::kFormat, fmt::format("the scenario's command line is wrong: {}", e.what()));
  }
}

// Prints a lesson's problem as one "dpscope: ..." line (a run's error may span lines; what it quotes
// of a lesson file is written out, base/terminal_text.hpp).
void print_problem(const std::string& problem) {
  std::string line = problem;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::fprintf(stderr, "dpscope: %s\n", printable_line(line).c_str());
}

// Whether every knob of `knobs` is at its default value (no knob given counts too).
bool at_default_knobs(const lesson::Lesson& lesson, const std::map<std::string, std::string>& knobs) {
  for (const auto& [flag, value] : knobs)
    if (const lesson::Knob* knob = lesson.find_knob(flag); knob == nullptr || knob->default_value != value)
      return false;
  return true;
}

// A run's problems for `run` and `handout`. The chapters' pictures are declared for the default
// knobs (`check` proves them there): with knobs turned, a picture that tells another story is
// said in one note, not as problems.
void print_run_problems(const lesson::Lesson& lesson, const lesson::LessonReport& report,
                        const std::map<std::string, std::string>& knobs) {
  for (const std::string& problem : report.problems) print_problem(problem);
  if (at_default_knobs(lesson, knobs)) {
    for (const std::string& problem : report.picture_problems) print_problem(problem);
  } else if (!report.picture_problems.empty()) {
    fmt::print(
        "note: with these knobs {} of the chapters' declared pictures show another moment of the story "
        "than at the default knobs, where `dpscope lesson check {}` proves them\n",
        report.picture_problems.size(), printable_line(lesson.id));
  }
}

// Runs `args` in-process with --trace `trace`, within ScenarioDeadline::kSeconds.
void run_scenario(const std::vector<std::string>& args, const fs::path& trace, bool quiet) {
  std::vector<std::string> with_trace = args;
  with_trace.push_back("--trace");
  with_trace.push_back(trace.string());
  QuietStdout quiet_stdout(quiet);
  const ScenarioDeadline deadline;
  parse_scenario(with_trace, /*dry_run=*/false);
}

// A numeric knob's value as the command line writes it ("8", "0.5").
std::string knob_number(double v) {
  return std::floor(v) == v ? fmt::format("{}", static_cast<int64_t>(v)) : fmt::format("{}", v);
}

// What `lesson check` proves about the knobs beyond the default run: every value a student can
// choose (each choice; a numeric knob's min and max) parses as part of the scenario's command line,
// and a --preset knob's choices are presets that exist. One line per problem, naming FILE:LINE.
std::vector<std::string> knob_problems(const lesson::Lesson& lesson) {
  std::vector<std::string> problems;
  for (const lesson::Knob& knob : lesson.knobs) {
    const std::vector<std::string> values =
        knob.numeric ? std::vector<std::string>{knob_number(knob.min), knob_number(knob.max)} : knob.choices;
    const std::string where = fmt::format("{}:{}: knob {}", lesson.file.string(), knob.line, knob.flag);
    for (const std::string& value : values) {
      if (knob.flag == "--preset" && value != "none") {
        const std::vector<std::string> presets = list_presets();
        if (std::find(presets.begin(), presets.end(), value) == presets.end()) {
          problems.push_back(fmt::format("{}: choice '{}' is no preset (presets: {})", where, value,
                                         fmt::join(presets, ", ")));
          continue;
        }
      }
      try {
        const std::vector<std::string> args = lesson::scenario_args(lesson, {{knob.flag, value}});
        if (lesson::is_torch_scenario(args)) {
          lesson::parse_torch_scenario(args);  // the script's own parser sees the value when it runs
        } else {
          parse_scenario(args, /*dry_run=*/true);
        }
      } catch (const Error& e) {
        problems.push_back(fmt::format("{}: value '{}': {}", where, value, e.what()));
      }
      // The comparison runs that share the knob take the value too.
      for (const lesson::OtherScenario& other : lesson.scenarios) {
        if (std::find(other.knobs.begin(), other.knobs.end(), knob.flag) == other.knobs.end()) continue;
        try {
          parse_scenario(lesson::other_scenario_args(lesson, other, {{knob.flag, value}}), /*dry_run=*/true);
        } catch (const Error& e) {
          problems.push_back(
              fmt::format("{}: value '{}' in [[scenarios]] '{}': {}", where, value, other.name, e.what()));
        }
      }
    }
  }
  return problems;
}

struct LessonRun {
  fs::path trace;
  std::vector<std::string> args;
  // The same, as the handout shows them: `{scratch}` relative to the output directory, where the
  // handout is, so that its command works from there (an absolute scratch path would name the
  // machine that wrote it).
  std::vector<std::string> shown_args;
  trace::TraceData data;
  lesson::LessonReport report;
  double wall_seconds = 0.0;
  std::optional<std::string> failure;              // the run's error, when it stopped with one
  std::map<std::string, trace::TraceData> others;  // the [[scenarios]]' traces, by name
  std::vector<fs::path> other_traces;              // OUT/ID.NAME.trace.jsonl, in file order
  double other_wall_seconds = 0.0;                 // the time their runs took, all together

  lesson::ScenarioTraces other_pointers() const {
    lesson::ScenarioTraces pointers;
    for (const auto& [name, other] : others) pointers[name] = &other;
    return pointers;
  }
};

// Writes `dir` for every `{scratch}` in `args`; false when there was none.
bool replace_scratch(std::vector<std::string>& args, const std::string& dir) {
  bool replaced = false;
  for (std::string& arg : args)
    for (size_t at = arg.find("{scratch}"); at != std::string::npos;
         at = arg.find("{scratch}", at + dir.size())) {
      arg.replace(at, 9, dir);
      replaced = true;
    }
  return replaced;
}

// `cache`, when given, supplies the traces of runs made before with the same command line, and keeps
// the new ones (lesson_run_cache.hpp).
LessonRun run_lesson(const lesson::Lesson& lesson, const fs::path& out_dir,
                     const std::map<std::string, std::string>& knobs, bool quiet,
                     const LessonRunCache* cache = nullptr) {
  LessonRun run;
  run.args = lesson::scenario_args(lesson, knobs);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  // The reason too: `--out FILE` said only "cannot create the output directory FILE".
  const PathStatus out_status = path_status(out_dir);
  DPS_CHECK(out_status.kind == FileKind::kDirectory, ErrorKind::kIo,
            "cannot create the output directory {}: {}", out_dir.string(),
            out_status.kind == FileKind::kMissing || out_status.kind == FileKind::kUnreadable
                ? (ec ? ec.message() : why_not_regular(out_status))
                : fmt::format("it is {}, not a directory", describe_kind(out_status.kind)));
  run.trace = out_dir / (lesson.id + ".trace.jsonl");
  // The trace is neither the lesson file nor anything but a regular file (a FIFO, a directory).
  OutputGuard guard;
  guard.add_input("the lesson file", lesson.file);
  guard.add_output("the lesson's trace", run.trace);
  const fs::path torch_log = out_dir / (lesson.id + ".torch.log");
  if (lesson::is_torch_scenario(run.args)) guard.add_output("the PyTorch run's log", torch_log);
  guard.check();
  // `{scratch}` in the scenario (e.g. --checkpoint-dir {scratch}/ckpt) names a directory of the
  // lesson's own, emptied before every run so that a rerun starts like the first one.
  const fs::path scratch = out_dir / (lesson.id + ".scratch");
  // load_lesson checked the text; this checks the paths as they are now (the output directory may
  // be a link, its scratch directory too).
  if (std::string problem = lesson::scenario_sandbox_problem(run.args, scratch, /*on_disk=*/true);
      !problem.empty())
    throw Error(ErrorKind::kFormat, fmt::format("{}: [scenario] args: {}", lesson.file.string(), problem));
  run.shown_args = run.args;
  replace_scratch(run.shown_args, lesson.id + ".scratch");
  // A PyTorch scenario's script runs in the scratch directory, which it has whether it names it or not.
  const bool torch = lesson::is_torch_scenario(run.args);
  const std::vector<std::string> written_args = run.args;  // a PyTorch scenario is checked as written
  std::string python;  // a PyTorch scenario's, or the first comparison run's that is one
  const auto torch_python = [&python] {
    if (python.empty()) {
      const TorchPython found = find_torch_python();
      // Not the scenario's failure (expect_error does not apply): this machine lacks PyTorch.
      if (found.path.empty()) throw Error(ErrorKind::kProcess, no_torch_reason(found));
      python = found.path;
    }
    return python;
  };
  if (torch) torch_python();
  const bool writes_files = replace_scratch(run.args, scratch.string());
  // Reusable: a run that writes no files of its own and is not a PyTorch run (its clock decides
  // the rest, lesson_run_cache.hpp).
  const bool reusable = cache != nullptr && !writes_files && !torch;
  if (writes_files || torch) {
    fs::remove_all(scratch, ec);
    fs::create_directories(scratch, ec);
    DPS_CHECK(fs::is_directory(scratch, ec), ErrorKind::kIo,
              "cannot create the lesson's scratch directory {}", scratch.string());
  }
  const auto start = std::chrono::steady_clock::now();
  const bool restored = reusable && cache->restore(run.args, run.trace);
  try {
    if (restored) {
      if (!quiet) fmt::print("(the same run was made earlier: its trace is reused)\n");
    } else if (torch) {
      run_torch_scenario(python, written_args, scratch, run.trace, quiet, torch_log);
    } else {
      run_scenario(run.args, run.trace, quiet);
    }
  } catch (const Error& e) {
    // A lesson may watch a run that fails (a pitfall): [scenario] expect_error declares it, and the
    // trace the run left behind (ending in `error` events) is still the lesson's. Any other failure
    // stops here, as on the command line.
    run.failure = e.what();
    if (lesson.expect_error.empty()) throw Error(e.kind(), lesson::run_outcome_problem(lesson, run.failure));
  }
  run.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  DPS_CHECK(fs::is_regular_file(run.trace, ec), ErrorKind::kIo,
            "the scenario failed before it wrote a trace: {}", run.failure.value_or("no trace"));
  run.data = trace::read_trace(run.trace);
  if (reusable && !restored && !run.failure) cache->keep(run.args, run.trace, run.data.header.clock);
  // The lesson's other scenarios ([[scenarios]]): the same sandbox, each with a scratch directory
  // of its own; no knob applies to them.
  for (const lesson::OtherScenario& other : lesson.scenarios) {
    std::vector<std::string> args = lesson::other_scenario_args(lesson, other, knobs);
    const std::vector<std::string> as_written = args;
    for (std::string& arg : args) arg = lesson::replace_lesson_scratch(arg, scratch.string());
    const fs::path other_scratch = out_dir / fmt::format("{}.{}.scratch", lesson.id, other.name);
    if (std::string problem = lesson::scenario_sandbox_problem(args, other_scratch, /*on_disk=*/true);
        !problem.empty())
      throw Error(ErrorKind::kFormat,
                  fmt::format("{}: [[scenarios]] '{}' args: {}", lesson.file.string(), other.name, problem));
    const bool other_torch = lesson::is_torch_scenario(args);
    const std::vector<std::string> other_written = args;
    const bool own_scratch = replace_scratch(args, other_scratch.string());
    // Not reusable when it reads or writes files: its own scratch, or the main scenario's.
    const bool other_reusable = cache != nullptr && args == as_written && !other_torch;
    if (own_scratch || other_torch) {
      fs::remove_all(other_scratch, ec);
      fs::create_directories(other_scratch, ec);
    }
    const fs::path other_trace = lesson::other_trace_path(run.trace, lesson, other);
    const fs::path other_log = out_dir / fmt::format("{}.{}.torch.log", lesson.id, other.name);
    OutputGuard other_guard;
    other_guard.add_output("a scenario's trace", other_trace);
    if (other_torch) other_guard.add_output("a PyTorch run's log", other_log);
    other_guard.check();
    const auto other_start = std::chrono::steady_clock::now();
    const bool other_restored = other_reusable && cache->restore(args, other_trace);
    try {
      if (other_restored) {
        // Made earlier with the same command line: a knob this run does not take turned.
      } else if (other_torch) {
        run_torch_scenario(torch_python(), other_written, other_scratch, other_trace, /*quiet=*/true,
                           other_log);
      } else {
        run_scenario(args, other_trace, /*quiet=*/true);
      }
      run.other_wall_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - other_start).count();
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("the scenario '{}' failed: {}", other.name, e.what()));
    }
    run.others[other.name] = trace::read_trace(other_trace);
    if (other_reusable && !other_restored)
      cache->keep(args, other_trace, run.others[other.name].header.clock);
    run.other_traces.push_back(other_trace);
  }
  run.report = lesson::evaluate_lesson(lesson, run.data, run.other_pointers());
  if (std::string problem = lesson::run_outcome_problem(lesson, run.failure); !problem.empty())
    run.report.problems.insert(run.report.problems.begin(), fmt::format("{}: {}", lesson.id, problem));
  return run;
}

// The knobs of exercise `x` as `--knob` shows them ("--knob devices=8").
std::string exercise_knobs_text(const lesson::Exercise& x) {
  std::vector<std::string> turned;
  for (const auto& [flag, value] : x.knobs)
    turned.push_back(fmt::format("--knob {}={}", flag.substr(2), value));
  return fmt::format("{}", fmt::join(turned, " "));
}

// Runs every exercise of `lesson` (the scenario with its knobs turned, into OUT/ID.exercise-N) and
// evaluates its solution. `problems`, when given, receives each exercise's problem (a solution or a
// text that cannot be computed, a run that fails).
std::vector<lesson::ExerciseResult> run_exercises(const lesson::Lesson& lesson, const fs::path& out,
                                                  std::vector<std::string>* problems) {
  std::vector<lesson::ExerciseResult> results;
  for (size_t x = 0; x < lesson.exercises.size(); ++x) {
    const std::string with = exercise_knobs_text(lesson.exercises[x]);
    try {
      const LessonRun run = run_lesson(lesson, out / fmt::format("{}.exercise-{}", lesson.id, x + 1),
                                       lesson.exercises[x].knobs, /*quiet=*/true);
      results.push_back(lesson::evaluate_exercise(lesson, x, run.data, run.other_pointers()));
      // Only the exercise's own problems: a knob may change the story the chapters tell (lesson 13's
      // find_unused_parameters ends the run another way), which the exercise is about.
      if (problems != nullptr && !results.back().problem.empty())
        problems->push_back(fmt::format("{} (with {})", results.back().problem, with));
    } catch (const Error& e) {
      results.push_back(
          {.problem = fmt::format("{}: exercise {}: its run failed: {}", lesson.id, x + 1, e.what())});
      if (problems != nullptr) problems->push_back(results.back().problem);
    }
  }
  return results;
}

// Runs the lesson with each value a student can choose that the default run did not (each other
// choice; a numeric knob's min and max; each value the knob's `fails` names): a knob the panel
// offers must give a run, not an error (lesson 6 offered 16 GPUs that a node of its preset cannot
// hold), unless the lesson declares that error for the student to see (`fails`), and then it must
// be that error. A knob may change the story the chapters tell, so only how the run ends is
// checked. The comparison runs a knob does not change are made once (the cache). A PyTorch
// lesson's knobs are only parsed (knob_problems): each value would be a real PyTorch run.
std::vector<std::string> knob_run_problems(const lesson::Lesson& lesson, const fs::path& out) {
  std::vector<std::string> problems;
  if (lesson::is_torch_scenario(lesson.scenario)) return problems;
  const LessonRunCache cache(out / fmt::format("{}.knob-runs.reused", lesson.id));
  for (const lesson::Knob& knob : lesson.knobs) {
    std::vector<std::string> values = knob.choices;
    if (knob.numeric) values = {knob_number(knob.min), knob_number(knob.max)};
    for (const auto& [value, error] : knob.fails)
      if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
    const std::string where = fmt::format("{}:{}: knob {}", lesson.file.string(), knob.line, knob.flag);
    for (const std::string& value : values) {
      if (value == knob.default_value) continue;
      const auto declared = knob.fails.find(value);
      try {
        (void)run_lesson(lesson, out / fmt::format("{}.knob-runs", lesson.id), {{knob.flag, value}},
                         /*quiet=*/true, &cache);
        if (declared != knob.fails.end())
          problems.push_back(
              fmt::format("{}: value '{}': the run succeeds, but `fails` says it ends with an "
                          "error containing \"{}\"",
                          where, value, declared->second));
      } catch (const Error& e) {
        const std::string why = e.what();
        if (declared == knob.fails.end()) {
          problems.push_back(
              fmt::format("{}: value '{}' (one the panel offers): the run fails (declare it in "
                          "the knob's `fails` if the student is meant to see it): {}",
                          where, value, why));
        } else if (why.find(declared->second) == std::string::npos) {
          problems.push_back(fmt::format("{}: value '{}': the run fails, but not with \"{}\" (`fails`): {}",
                                         where, value, declared->second, why));
        }
      }
    }
  }
  return problems;
}

std::vector<std::string> exercise_problems(const lesson::Lesson& lesson, const fs::path& out) {
  std::vector<std::string> problems;
  (void)run_exercises(lesson, out, &problems);
  return problems;
}

// Runs every command the lesson quotes for the student to type (`dpscope train ...` in its text):
// a quoted command that fails is a problem. Each runs in-process with a trace in OUT/ID.quoted-N,
// within the same sandbox as the scenario (a lesson is data someone else may have written).
std::vector<std::string> quoted_command_problems(const lesson::Lesson& lesson,
                                                 const lesson::LessonReport& report, const fs::path& out) {
  std::vector<std::string> problems;
  const std::vector<std::string> commands = lesson::quoted_commands(lesson, report);
  for (size_t i = 0; i < commands.size(); ++i) {
    std::vector<std::string> args;
    std::istringstream words(commands[i].substr(std::string("dpscope ").size()));
    for (std::string word; words >> word;) args.push_back(word);
    const fs::path dir = out / fmt::format("{}.quoted-{}", lesson.id, i + 1);
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    const auto quoted = [&](const std::string& why) {
      return fmt::format("{}: the command it quotes, `{}`, {}", lesson.id, commands[i], why);
    };
    if (std::string p = lesson::scenario_sandbox_problem(args, dir, /*on_disk=*/true); !p.empty()) {
      problems.push_back(quoted(p));
      continue;
    }
    if (std::any_of(args.begin(), args.end(), [](const std::string& a) { return lesson::is_help_flag(a); })) {
      problems.push_back(quoted("asks for help instead of running"));
      continue;
    }
    try {
      const bool traced = std::any_of(args.begin(), args.end(),
                                      [](const std::string& a) { return a.starts_with("--trace"); });
      if (traced) {
        QuietStdout quiet(true);
        parse_scenario(args, /*dry_run=*/false);
      } else {
        run_scenario(args, dir / "quoted.trace.jsonl", /*quiet=*/true);
      }
    } catch (const Error& e) {
      problems.push_back(quoted(fmt::format("fails: {}", e.what())));
    }
  }
  return problems;
}

// Checks that `lesson`'s snippet compiles as Python. Returns "" when it does (or python3 is
// absent: `skipped` is set), else the problem line.
std::string check_snippet(const lesson::Lesson& lesson, const fs::path& dir, bool& skipped) {
  const std::string python = find_on_path("python3");
  skipped = python.empty();
  if (skipped) return "";
  const fs::path file = dir / (lesson.id + "_snippet.py");
  const fs::path log = dir / (lesson.id + "_snippet.log");
  OutputGuard guard;  // --out DIR is the user's: neither file may be a FIFO (the write would block)
  guard.add_output("the snippet", file);
  guard.add_output("the snippet's log", log);
  guard.check();
  AtomicFileWriter snippet(file);
  snippet.write(lesson.snippet);
  snippet.commit();
  // Bounded: a python3 that hangs held `lesson check` forever.
  constexpr double kPyCompileTimeoutS = 20.0;
  const int status = run_process({python, "-m", "py_compile", file.string()}, log, kPyCompileTimeoutS);
  if (status == 0) return "";
  // py_compile prints the SyntaxError last: keep its last non-empty line, unindented.
  std::string last = last_log_line(log);
  last.erase(0, last.find_first_not_of(" \t"));
  // Only a SyntaxError (IndentationError, TabError) is the snippet's fault; anything else is the
  // Python's (a python3 on PATH that exits 1, crashes or hangs), and the snippet was not checked.
  if (last.find("Error") == std::string::npos)
    return fmt::format(
        "{}: snippet not checked: {} -m py_compile {}, and printed {}", lesson.id, python,
        status < 0 ? fmt::format("did not finish within {:.0f} s (or died of a signal)", kPyCompileTimeoutS)
                   : fmt::format("exited with status {}", status),
        last.empty() ? std::string("nothing") : "no SyntaxError but: " + last);
  return fmt::format("{}: snippet does not compile as Python: {}", lesson.id, last);
}

// Whether a window can open here (an X11 or Wayland display is set).
bool has_display() {
  const char* x11 = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  return (x11 != nullptr && *x11 != '\0') || (wayland != nullptr && *wayland != '\0');
}

// Opens dpscope-viz in lesson mode on `trace` (the run just made, with `knobs` turned) when a
// display is present; says what it did.
void open_viewer(const lesson::Lesson& lesson, const fs::path& lessons_dir, const fs::path& trace,
                 const std::vector<std::string>& knobs) {
  const std::string viz = (executable_dir() / "dpscope-viz").string();
  std::vector<std::string> argv = {
      viz, "--lesson", lesson.file.string(), "--lessons-dir", lessons_dir.string(), trace.string()};
  for (const std::string& k : knobs) {
    argv.push_back("--knob");
    argv.push_back(k);
  }
  // Printed: the lesson's id and the trace's path are written out (base/terminal_text.hpp).
  const std::string watch =
      printable_line(fmt::format("dpscope-viz --lesson {} {}", lesson.id, trace.string()));
  if (!has_display()) {
    fmt::print("\nno display: watch it later with  {}\n", watch);
    return;
  }
  if (access(viz.c_str(), X_OK) != 0) {
    fmt::print("\ndpscope-viz is not built next to dpscope; watch the trace with  {}\n", watch);
    return;
  }
  fmt::print("\nopening {}\n", watch);
  std::fflush(stdout);
  DPS_CHECK(spawn_process(argv, {}) > 0, ErrorKind::kIo, "could not start {}", viz);
}

void list_command(const LessonArgs& args) {
  const fs::path dir = lessons_dir(args);
  const std::vector<lesson::Lesson> lessons = lesson::load_lessons(dir);
  for (const lesson::Lesson& l : lessons)
    fmt::print("{:<28} {:>3} min  {}\n", printable_line(l.id), l.minutes, printable_line(l.title));
  fmt::print("{} lessons in {}; run one with  dpscope lesson run ID\n", lessons.size(),
             printable_line(dir.string()));
}

void run_command(const LessonArgs& args) {
  const lesson::Lesson lesson = lesson::find_lesson(lessons_dir(args), args.id);
  const fs::path out = args.out.empty() ? fs::path("out") / "lessons" / lesson.id : fs::path(args.out);
  std::optional<LessonRunCache> cache;
  if (!args.reuse_runs.empty()) cache.emplace(args.reuse_runs);
  const LessonRun run =
      run_lesson(lesson, out, lesson::parse_knobs(args.knobs), /*quiet=*/false, cache ? &*cache : nullptr);
  fmt::print("\n{}", printable_text(lesson::format_report(lesson, run.report)));
  print_run_problems(lesson, run.report, lesson::parse_knobs(args.knobs));
  fmt::print("\ntrace: {}\n", printable_line(run.trace.string()));
  for (size_t i = 0; i < run.other_traces.size(); ++i)
    fmt::print("scenario {}: {}\n", printable_line(lesson.scenarios[i].name),
               printable_line(run.other_traces[i].string()));
  if (!args.no_viz) open_viewer(lesson, lessons_dir(args), run.trace, args.knobs);
}

void check_command(const LessonArgs& args) {
  const fs::path dir = lessons_dir(args);
  std::vector<fs::path> files;
  if (args.id.empty()) {
    files = lesson::lesson_files(dir);
  } else {
    files.push_back(lesson::find_lesson(dir, args.id).file);
  }
  const bool keep = !args.out.empty();
  std::optional<lesson::TempRunDir> temp;
  if (!keep) {
    temp.emplace("dpscope-lesson-check");
    temp->remove_on_signal();
  }
  const fs::path out = keep ? fs::path(args.out) : temp->path();
  std::vector<std::string> problems;
  size_t failed_lessons = 0;
  size_t skipped_lessons = 0;
  bool python_skipped = false;
  for (const fs::path& file : files) {
    std::vector<std::string> lesson_problems;
    std::string summary;
    try {
      const lesson::Lesson lesson = lesson::load_lesson(file);
      bool skipped_lesson = false;  // its problems are known without running it
      if (lesson::is_torch_scenario(lesson.scenario)) {
        // A real PyTorch run needs PyTorch: without it the lesson is skipped, visibly, and only its
        // text is checked.
        if (const TorchPython python = find_torch_python(); python.path.empty()) {
          lesson_problems = lesson::lint_lesson(lesson);
          for (std::string& p : knob_problems(lesson)) lesson_problems.push_back(std::move(p));
          if (lesson_problems.empty()) {
            fmt::print("{:<4} {:<28} skipped: {}\n", "skip", printable_line(file.stem().string()),
                       printable_line(no_torch_reason(python)));
            std::fflush(stdout);
            ++skipped_lessons;
            continue;
          }
          skipped_lesson = true;
        }
      }
      if (!skipped_lesson) {
        const LessonRun run = run_lesson(lesson, out, {}, /*quiet=*/true);
        lesson_problems = run.report.problems;
        lesson_problems.insert(lesson_problems.end(), run.report.picture_problems.begin(),
                               run.report.picture_problems.end());
        for (std::string& p : knob_problems(lesson)) lesson_problems.push_back(std::move(p));
        for (std::string& p : lesson::lint_lesson(lesson)) lesson_problems.push_back(std::move(p));
        for (std::string& p : exercise_problems(lesson, out)) lesson_problems.push_back(std::move(p));
        for (std::string& p : knob_run_problems(lesson, out)) lesson_problems.push_back(std::move(p));
        for (std::string& p : quoted_command_problems(lesson, run.report, out))
          lesson_problems.push_back(std::move(p));
        bool skipped = false;
        if (std::string p = check_snippet(lesson, out, skipped); !p.empty())
          lesson_problems.push_back(std::move(p));
        python_skipped = python_skipped || skipped;
        summary = fmt::format("{} chapters, {} questions, trace made in {:.2f} s", lesson.chapters.size(),
                              lesson.questions.size(), run.wall_seconds);
        if (!lesson.scenarios.empty())
          summary += fmt::format(" (+ {:.2f} s for {} scenario(s) to compare)", run.other_wall_seconds,
                                 lesson.scenarios.size());
      }
    } catch (const Error& e) {
      lesson_problems.push_back(fmt::format("{}: {}", file.stem().string(), e.what()));
    }
    fmt::print("{:<4} {:<28} {}\n", lesson_problems.empty() ? "ok" : "FAIL",
               printable_line(file.stem().string()),
               lesson_problems.empty() ? summary : fmt::format("{} problem(s)", lesson_problems.size()));
    std::fflush(stdout);
    for (const std::string& p : lesson_problems) print_problem(p);
    failed_lessons += lesson_problems.empty() ? 0 : 1;
    problems.insert(problems.end(), lesson_problems.begin(), lesson_problems.end());
  }
  if (python_skipped) fmt::print("snippets not checked: python3 is not on PATH\n");
  DPS_CHECK(problems.empty(), ErrorKind::kInternal,
            "lesson check: {} problem(s) in {} of {} lesson(s); the first: {}", problems.size(),
            failed_lessons, files.size(),
            problems.empty() ? "" : problems.front().substr(0, problems.front().find('\n')));
  fmt::print(
      "{} lesson(s) checked, all triggers fire and every answer is computed{}\n",
      files.size() - skipped_lessons,
      skipped_lessons == 0 ? "" : fmt::format("; {} skipped (PyTorch is not installed)", skipped_lessons));
}

// Draws every chapter of `lesson` as the viewer shows it at the chapter's moment: OUT/ID-chapter-N.png
// by dpscope-viz --screenshot (on the display, else under xvfb-run). Returns the file names, ""
// for a chapter without a picture; says in one line why there are none when they cannot be drawn.
std::vector<std::string> render_chapters(const lesson::Lesson& lesson, const lesson::LessonReport& report,
                                         const fs::path& trace, int64_t trace_begin_ns, const fs::path& out) {
  std::vector<std::string> images(lesson.chapters.size());
  const std::string viz = (executable_dir() / "dpscope-viz").string();
  if (access(viz.c_str(), X_OK) != 0) {
    fmt::print("no chapter pictures: dpscope-viz is not built next to dpscope\n");
    return images;
  }
  std::vector<std::string> prefix;
  if (!has_display()) {
    const std::string xvfb = find_on_path("xvfb-run");
    if (xvfb.empty()) {
      fmt::print("no chapter pictures: no display and no xvfb-run (apt install xvfb)\n");
      return images;
    }
    prefix = {xvfb, "-a", "-s", "-screen 0 1920x1080x24"};
  }
  size_t drawn = 0;
  for (size_t c = 0; c < lesson.chapters.size(); ++c) {
    if (!report.chapters[c].time_ns) continue;  // its trigger never fired (check reports it)
    const std::string name = fmt::format("{}-chapter-{}.png", lesson.id, c + 1);
    std::vector<std::string> argv = prefix;
    argv.push_back(viz);
    if (lesson.chapters[c].compare.empty()) {
      // The viewer seeks on the trace's own clock; a chapter's time counts from the trace's first
      // event (0 for dpscope's simulated clock, not for a measured one: a real PyTorch run).
      for (const std::string& a : {trace.string(), std::string("--seek"),
                                   fmt::format("t:{}ns", trace_begin_ns + *report.chapters[c].time_ns)})
        argv.push_back(a);
    } else {
      // A chapter that compares is drawn in lesson mode, which shows its runs side by side (each at
      // its own moment; their traces lie beside the lesson's).
      for (const std::string& a : {std::string("--lesson"), lesson.file.string(),
                                   std::string("--lessons-dir"), lesson.file.parent_path().string(),
                                   trace.string(), std::string("--seek"), fmt::format("chapter:{}", c + 1)})
        argv.push_back(a);
    }
    for (const std::string& a :
         {std::string("--screenshot"), (out / name).string(), std::string("--size"), std::string("1600x900")})
      argv.push_back(a);
    const fs::path log = out / fmt::format("{}-chapter-{}.log", lesson.id, c + 1);
    // Bounded like every wait: a viewer (or Xvfb) that hangs once held the handout forever.
    constexpr double kPictureTimeoutS = 300.0;
    const pid_t pid = spawn_process(argv, log, /*own_group=*/true);  // xvfb-run, Xvfb and the viewer
    const bool ok = pid > 0 && wait_process(pid, kPictureTimeoutS) == 0;
    std::error_code ec;
    if (ok && fs::is_regular_file(out / name, ec)) {
      images[c] = name;
      ++drawn;
      fs::remove(log, ec);
    } else {
      std::fprintf(stderr, "dpscope: chapter %zu's picture failed: see %s\n", c + 1,
                   printable_line(log.string()).c_str());
    }
  }
  fmt::print("chapter pictures: {} of {} in {}\n", drawn, lesson.chapters.size(),
             printable_line(out.string()));
  return images;
}

void handout_command(const LessonArgs& args) {
  const lesson::Lesson lesson = lesson::find_lesson(lessons_dir(args), args.id);
  const fs::path out = args.out;
  const fs::path page = out / (lesson.id + ".md");
  {  // before the run: the page is a file that can be replaced, and not the lesson file
    std::error_code ec;
    fs::create_directories(out, ec);  // made when missing; the guard says why when it cannot be
    OutputGuard guard;
    guard.add_input("the lesson file", lesson.file);
    guard.add_output("the handout", page);
    guard.check();
  }
  const LessonRun run = run_lesson(lesson, out, lesson::parse_knobs(args.knobs), /*quiet=*/true);
  print_run_problems(lesson, run.report, lesson::parse_knobs(args.knobs));
  std::vector<std::string> exercise_problems_found;
  const std::vector<lesson::ExerciseResult> exercises = run_exercises(lesson, out, &exercise_problems_found);
  for (const lesson::ExerciseResult& x : exercises)
    if (!x.problem.empty()) print_problem(x.problem);
  const std::vector<std::string> images =
      args.no_png ? std::vector<std::string>()
                  : render_chapters(lesson, run.report, run.trace, run.data.min_ts_ns, out);
  AtomicFileWriter file(page);  // a reader of the old page never sees half of the new one
  file.write(lesson::handout_markdown(lesson, run.shown_args, run.report, run.trace.filename().string(),
                                      images, exercises));
  file.commit();
  fmt::print("handout: {} (trace {})\n", printable_line(page.string()), printable_line(run.trace.string()));
}

}  // namespace

double ScenarioDeadline::seconds() {
  // DPSCOPE_LESSON_RUN_LIMIT_S lowers it (a classroom machine, a test); it never raises it.
  if (const char* text = std::getenv("DPSCOPE_LESSON_RUN_LIMIT_S")) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end != text && *end == '\0' && v > 0 && v < kSeconds) return v;
  }
  return kSeconds;
}

ScenarioDeadline::ScenarioDeadline() {
  scenario_deadline_ns.store(steady_now_ns() + static_cast<int64_t>(seconds() * 1e9));
}

ScenarioDeadline::~ScenarioDeadline() { scenario_deadline_ns.store(0); }

void check_scenario_deadline() {
  const int64_t deadline = scenario_deadline_ns.load();
  DPS_CHECK(deadline == 0 || steady_now_ns() <= deadline, ErrorKind::kFormat,
            "the lesson's scenario ran past {:g} s: a lesson's run is bounded (docs/lessons.md, \"Limits\"); "
            "make its run smaller (--steps, --epochs, the data, the model)",
            ScenarioDeadline::seconds());
}

void register_lesson(CLI::App& app) {
  auto args = std::make_shared<LessonArgs>();
  CLI::App* cmd =
      app.add_subcommand("lesson", "interactive lessons: list, run, check, handout (docs/lessons.md)");
  // One line naming the subcommands instead of CLI11's "A subcommand is required".
  cmd->require_subcommand(0, 1);
  cmd->callback([cmd] {
    DPS_CHECK(!cmd->get_subcommands().empty(), ErrorKind::kUsage,
              "lesson needs a subcommand: list, run ID, check [ID] or handout ID OUT");
  });
  auto add_dir = [&](CLI::App* sub) {
    sub->add_option("--lessons-dir", args->lessons_dir,
                    "where the lesson files are (default: next to the assets)");
  };

  CLI::App* list = cmd->add_subcommand("list", "list the lessons: id, minutes, title");
  add_dir(list);
  list->callback([args] { list_command(*args); });

  CLI::App* run =
      cmd->add_subcommand("run", "run a lesson's scenario, print its chapters and answers, open the viewer");
  run->add_option("id", args->id, "lesson id (04-ddp) or number (4)")->required();
  run->add_option("--out", args->out, "directory for the trace (default out/lessons/ID)");
  run->add_option("--knob", args->knobs, "turn a knob: FLAG=VALUE, e.g. --knob devices=8 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  run->add_flag("--no-viz", args->no_viz, "do not open dpscope-viz");
  run->add_option("--reuse-runs", args->reuse_runs,
                  "keep simulated runs' traces in this directory by command line, and reuse them when the "
                  "same run is asked for again (dpscope-viz's knobs use it)");
  add_dir(run);
  run->callback([args] { run_command(*args); });

  CLI::App* check = cmd->add_subcommand("check", "run every lesson (or one) headlessly; exit 1 on a problem");
  check->add_option("id", args->id, "only this lesson");
  check->add_option("--out", args->out, "keep the traces there (default: a temporary directory, removed)");
  add_dir(check);
  check->callback([args] { check_command(*args); });

  CLI::App* handout = cmd->add_subcommand(
      "handout", "write OUT/ID.md (narration, questions, answers, code) and a PNG of every chapter");
  handout->add_option("id", args->id, "lesson id or number")->required();
  handout->add_option("out", args->out, "output directory (made when missing)")->required();
  handout->add_flag("--no-png", args->no_png, "the Markdown page only (no dpscope-viz screenshots)");
  handout->add_option("--knob", args->knobs, "turn a knob for the class's variant: FLAG=VALUE (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_dir(handout);
  handout->callback([args] { handout_command(*args); });
}

}  // namespace dpscope::cli
