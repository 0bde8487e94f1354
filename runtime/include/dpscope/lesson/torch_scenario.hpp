// A lesson scenario that runs a real PyTorch script (lesson 14, "Your own PyTorch script";
// docs/lessons.md, "A PyTorch scenario"): the command a student types to record their own DDP job,
//
//   launch --nproc 2 -- python3 -m dpscope_torch.run examples/pytorch/ddp_tutorial.py ARGS...
//
// `dpscope lesson` starts it through `dpscope launch` with `--trace-dir` inserted after
// `dpscope_torch.run`, in the scenario's scratch directory, then merges the ranks' traces into the
// lesson's trace. A lesson file is data someone else may have written, so the shape is fixed and
// checked here when the lesson loads: only the scripts shipped in examples/pytorch/, arguments that
// are options, plain words or paths inside `{scratch}` (the script runs with the scratch directory
// as its working directory, so a plain word names a file there), and nothing that asks for help.
// What runs it (finding a Python with PyTorch, the process, its timeout) is the CLI's
// (runtime/cli/lesson_torch.cpp); this file holds only values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dpscope::lesson {

// The fixed part of a PyTorch scenario, after `launch --nproc N --`.
inline constexpr std::string_view kTorchScenarioPython = "python3";
inline constexpr std::string_view kTorchScenarioModule = "dpscope_torch.run";
// Where its script must be, relative to dpscope's assets (base/asset_dir.hpp asset_dir()).
inline constexpr std::string_view kTorchScenarioScriptDir = "examples/pytorch";
inline constexpr int kMaxTorchScenarioRanks = 8;

struct TorchScenario {
  int nproc = 0;
  std::string script;                    // "examples/pytorch/ddp_tutorial.py", as written
  std::vector<std::string> script_args;  // after the script, `{scratch}` not yet replaced
};

// Whether `args` is a PyTorch scenario (it starts with "launch") rather than a `train` or `bench`
// command line.
bool is_torch_scenario(const std::vector<std::string>& args);

// Why `args` is not a well-formed PyTorch scenario ("" when it is): the shape above, a script in
// kTorchScenarioScriptDir named with lower-case letters, digits and '_', and arguments that stay
// in the sandbox (no '/' outside a `{scratch}/...` path, no "..", no --trace-dir, no help).
std::string torch_scenario_problem(const std::vector<std::string>& args);

// The parts of a well-formed PyTorch scenario. Throws Error(kFormat) with torch_scenario_problem().
TorchScenario parse_torch_scenario(const std::vector<std::string>& args);

}  // namespace dpscope::lesson
