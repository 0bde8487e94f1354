// Running a lesson's PyTorch scenario (lesson/torch_scenario.hpp; lesson 14): finds a Python that
// imports torch, starts the script under `dpscope launch` with dpscope_torch attached, waits with a
// time limit, and merges the ranks' traces into the lesson's trace. `dpscope lesson run|check|handout`
// (lesson_cmd.cpp) call it; `check` skips the lesson, saying so, where no Python has PyTorch.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dpscope::cli {

// How long a PyTorch scenario may run before it is stopped (SIGTERM to the launcher, which passes it
// on to the ranks, then SIGKILL): the shipped one takes seconds; a hung collective must not hang a
// `lesson check` in CI.
inline constexpr double kTorchScenarioTimeoutS = 300.0;

struct TorchPython {
  std::string path;      // "" when none was found
  std::string searched;  // what was tried, for the message: "$DPSCOPE_PYTHON (/x/python3)" or ...
};

// The first of $DPSCOPE_PYTHON (when set: only it), `python3` on PATH, /usr/bin/python3 that
// imports torch. Debian's python3-torch is /usr/bin/python3's; a virtual environment's python3
// comes first on PATH. Probed once per process.
TorchPython find_torch_python();

// The sentence for "no PyTorch here" (lesson run fails with it, lesson check skips with it).
std::string no_torch_reason(const TorchPython& python);

// Runs the PyTorch scenario `args` (knobs applied, `{scratch}` as written: checked, then replaced by
// `scratch`) with `python` (find_torch_python()) in `scratch` (the working
// directory of the script; the ranks write scratch/trace/rank-K.jsonl) and writes the merged trace
// to `trace`. Quiet: the ranks' output goes to `log` instead of the terminal. Throws Error(kProcess)
// when the run fails or runs past kTorchScenarioTimeoutS (the message names the rank's error line).
void run_torch_scenario(const std::string& python, const std::vector<std::string>& args,
                        const std::filesystem::path& scratch, const std::filesystem::path& trace, bool quiet,
                        const std::filesystem::path& log);

}  // namespace dpscope::cli
