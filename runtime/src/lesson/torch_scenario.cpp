// The shape of a PyTorch scenario and its sandbox (lesson/torch_scenario.hpp).
#include "dpscope/lesson/torch_scenario.hpp"

#include <fmt/format.h>

#include <charconv>

#include "dpscope/base/error.hpp"
#include "dpscope/lesson/sandbox.hpp"

namespace dpscope::lesson {
namespace {

// What a script argument may hold outside `{scratch}`: options, numbers, words, `RANK:MS`,
// `784-512-10`. No '/', so no path leads anywhere but the working directory (the scratch
// directory); no '~', '$' or quotes, which would mean something to a shell reading a handout.
bool plain(std::string_view text) {
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == ':' || c == ',' || c == '=' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return text.find("..") == std::string_view::npos;
}

// Whether `value` is `{scratch}` or a path below it without "..".
bool inside_scratch(std::string_view value) {
  constexpr std::string_view kScratch = "{scratch}";
  if (!value.starts_with(kScratch)) return false;
  const std::string_view rest = value.substr(kScratch.size());
  if (rest.empty()) return true;
  if (rest.front() != '/') return false;
  for (size_t from = 1; from <= rest.size();) {
    const size_t slash = rest.find('/', from);
    const std::string_view part =
        rest.substr(from, slash == std::string_view::npos ? std::string_view::npos : slash - from);
    if (part == ".." || !plain(part)) return false;
    if (slash == std::string_view::npos) break;
    from = slash + 1;
  }
  return true;
}

std::string script_arg_problem(const std::string& arg) {
  if (is_help_flag(arg))
    return fmt::format("the script's argument {} prints help instead of running the scenario", arg);
  if (arg == "--trace-dir" || arg.starts_with("--trace-dir="))
    return "the script's arguments must not give --trace-dir: the lesson chooses where the trace goes";
  // "--dump={scratch}/d" is "--dump" and a path.
  const size_t eq = arg.starts_with("--") ? arg.find('=') : std::string::npos;
  const std::string_view value =
      eq == std::string::npos ? std::string_view(arg) : std::string_view(arg).substr(eq + 1);
  if (eq != std::string::npos && !plain(std::string_view(arg).substr(0, eq)))
    return fmt::format("the script's argument '{}' is no option", arg);
  if (inside_scratch(value) || plain(value)) return "";
  return fmt::format(
      "the script's argument '{}' may be an option, a plain word (letters, digits, '_.:,=+-') or a path "
      "inside {{scratch}} (\"{{scratch}}/out\"): a scenario writes only inside its scratch directory",
      arg);
}

}  // namespace

bool is_torch_scenario(const std::vector<std::string>& args) { return !args.empty() && args[0] == "launch"; }

std::string torch_scenario_problem(const std::vector<std::string>& args) {
  const std::string shape = fmt::format(
      "a PyTorch scenario is \"launch\", \"--nproc\", N, \"--\", \"{}\", \"-m\", \"{}\", "
      "\"{}/SCRIPT.py\", and the script's arguments",
      kTorchScenarioPython, kTorchScenarioModule, kTorchScenarioScriptDir);
  if (args.size() < 8 || args[0] != "launch" || args[1] != "--nproc" || args[3] != "--" ||
      args[4] != kTorchScenarioPython || args[5] != "-m" || args[6] != kTorchScenarioModule)
    return shape;
  int nproc = 0;
  const std::string& n = args[2];
  const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), nproc);
  if (ec != std::errc() || end != n.data() + n.size() || nproc < 1 || nproc > kMaxTorchScenarioRanks)
    return fmt::format("--nproc '{}' must be a whole number from 1 to {}", n, kMaxTorchScenarioRanks);
  const std::string& script = args[7];
  const std::string dir = fmt::format("{}/", kTorchScenarioScriptDir);
  const std::string_view name =
      script.starts_with(dir) && script.ends_with(".py")
          ? std::string_view(script).substr(dir.size(), script.size() - dir.size() - 3)
          : std::string_view();
  if (name.empty() ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string_view::npos)
    return fmt::format(
        "the script '{}' must be one of dpscope's examples, {}NAME.py (NAME: lower-case letters, digits, "
        "'_')",
        script, dir);
  for (size_t i = 8; i < args.size(); ++i)
    if (std::string problem = script_arg_problem(args[i]); !problem.empty()) return problem;
  return "";
}

TorchScenario parse_torch_scenario(const std::vector<std::string>& args) {
  if (std::string problem = torch_scenario_problem(args); !problem.empty())
    throw Error(ErrorKind::kFormat, problem);
  TorchScenario scenario;
  scenario.nproc = std::stoi(args[2]);
  scenario.script = args[7];
  scenario.script_args.assign(args.begin() + 8, args.end());
  return scenario;
}

}  // namespace dpscope::lesson
