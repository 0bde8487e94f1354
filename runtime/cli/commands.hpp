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

// For a process that is one rank of a job (mpirun, dpscope launch): when the launcher stops it with
// SIGTERM because another rank failed, it says so in one "dpscope: error:" line, then ends by that
// signal as before; a rank that has told its peers of its own error prints that error instead
// (base/termination_notice.hpp).
void say_why_when_terminated(int rank);
// The process has its error in hand and prints it now: a SIGTERM no longer interrupts it (the line
// is printed once, and its exit status is its own).
void keep_quiet_when_terminated();

}  // namespace dpscope::cli
