// The `dpscope` command's subcommands. Each lives in its own file and registers its CLI11
// subcommand here; main.cpp wires them up and maps errors to exit codes (2 for usage errors).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

#include "dpscope/base/error.hpp"

namespace dpscope::cli {

// Each register_* adds a subcommand whose callback does the work (throwing dpscope::Error on failure).
// kParseOnly: the flags and their types are checked and nothing runs (a lesson's scenario when the
// lesson loads); the callback still owns what the options write into.
enum class Registration { kRun, kParseOnly };
void register_train(CLI::App& app, Registration registration = Registration::kRun);
void register_trace(CLI::App& app);
void register_bench(CLI::App& app, Registration registration = Registration::kRun);
void register_sampler(CLI::App& app);
void register_presets(CLI::App& app);
void register_lesson(CLI::App& app);
void register_launch(CLI::App& app);

// A lesson's scenario (a command line from a lesson file, run in-process by `lesson run` and
// `lesson check`) is bounded in time as a PyTorch scenario is: ScenarioDeadline holds the limit while
// it runs, and train and bench check it as each step or row ends, stopping with one line past it.
class ScenarioDeadline {
 public:
  static constexpr double kSeconds = 300.0;
  static double seconds();  // kSeconds, or DPSCOPE_LESSON_RUN_LIMIT_S when that is lower
  ScenarioDeadline();
  ~ScenarioDeadline();
  ScenarioDeadline(const ScenarioDeadline&) = delete;
  ScenarioDeadline& operator=(const ScenarioDeadline&) = delete;
};
// Throws Error(kFormat) when a scenario's deadline has passed; nothing outside a scenario.
void check_scenario_deadline();

// For a process that is one rank of a job (mpirun, dpscope launch): when the launcher stops it with
// SIGTERM because another rank failed, it says so in one "dpscope: error:" line, then ends by that
// signal as before; a rank that has told its peers of its own error prints that error instead
// (base/termination_notice.hpp).
void say_why_when_terminated(int rank);
// The process has its error in hand and prints it now: a SIGTERM no longer interrupts it (the line
// is printed once, and its exit status is its own).
void keep_quiet_when_terminated();

}  // namespace dpscope::cli
