// Running a lesson's PyTorch scenario (lesson_torch.hpp).
#include "lesson_torch.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpscope/base/asset_dir.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/process.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/lesson/sandbox.hpp"
#include "dpscope/lesson/torch_scenario.hpp"
#include "dpscope/trace/merge.hpp"
#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::cli {
namespace {

namespace fs = std::filesystem;

// Bounded: a Python that hangs on start (a broken site-packages, a stuck network mount) held every
// `lesson` command forever. Debian's torch imports in a few seconds.
constexpr double kImportTorchTimeoutS = 60.0;

bool imports_torch(const std::string& python) {
  if (python.empty() || access(python.c_str(), X_OK) != 0) return false;
  return run_process({python, "-c", "import torch"}, "/dev/null", kImportTorchTimeoutS) == 0;
}

// Starts `argv` in `dir` with `pythonpath` in front of $PYTHONPATH; its output to `log` unless that
// is empty. The child dies with this process (PR_SET_PDEATHSIG): a `lesson check` killed outright
// leaves no launcher behind, and the launcher's ranks die with it.
pid_t start_in(const std::vector<std::string>& argv, const fs::path& dir, const std::string& pythonpath,
               const fs::path& log) {
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid > 0) track_child(pid);  // ended first when a signal ends this process (base/process.hpp)
  if (pid != 0) return pid;
  // The child: only async-signal-safe calls until exec, then _exit on any failure.
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(127);
  if (chdir(dir.c_str()) != 0) _exit(127);
  if (!log.empty()) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) _exit(127);
    close(fd);
  }
  if (!pythonpath.empty()) setenv("PYTHONPATH", pythonpath.c_str(), 1);
  execv(c_argv[0], c_argv.data());
  _exit(127);
}

// Waits for `pid` at most `timeout_s`; then SIGTERM (the launcher passes it on and kills the ranks
// after its grace), and SIGKILL 10 s later. The exit status, or -1 when it had to be stopped.
int wait_or_stop(pid_t pid, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0) return -2;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGTERM);
  const auto kill_at = Clock::now() + std::chrono::seconds(10);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= kill_at) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

// wait_or_stop(), then the child is forgotten (base/process.hpp forget_child).
int wait_with_timeout(pid_t pid, double timeout_s) {
  const int status = wait_or_stop(pid, timeout_s);
  forget_child(pid);
  return status;
}

// `relative` as shipped with dpscope: beside the assets or one level up (the source tree keeps
// examples/ and python/ beside assets/, as lessons/: lesson/catalog.hpp find_lessons_dir). The
// first that exists, else the first.
fs::path shipped(const fs::path& relative) {
  const fs::path assets = asset_dir();
  std::error_code ec;
  for (const fs::path& path : {assets / relative, assets / ".." / relative})
    if (fs::exists(path, ec)) return path.lexically_normal();
  return assets / relative;
}

// "rank R: MESSAGE" of the earliest `error` event of `data`, "" when it has none.
std::string first_error(const trace::TraceData& data) {
  const trace::Event* first = nullptr;
  for (const trace::Event& e : data.events)
    if (e.type == trace::EventType::kInstant && e.known == trace::EventName::kError &&
        (first == nullptr || e.ts_ns < first->ts_ns))
      first = &e;
  if (first == nullptr) return "";
  const auto error = data.run_error(*first);
  return fmt::format("rank {}: {}", first->rank, error ? std::string(error->message) : "an error");
}

}  // namespace

namespace {

TorchPython probe_torch_python() {
  TorchPython found;
  if (const char* env = std::getenv("DPSCOPE_PYTHON"); env != nullptr && *env != '\0') {
    found.searched = fmt::format("$DPSCOPE_PYTHON ({})", env);
    if (imports_torch(env)) found.path = env;
    return found;
  }
  const std::string on_path = find_on_path("python3");
  found.searched = on_path.empty() ? "python3 on PATH (none)" : fmt::format("python3 on PATH ({})", on_path);
  if (imports_torch(on_path)) {
    found.path = on_path;
    return found;
  }
  found.searched += ", /usr/bin/python3";
  if (on_path != "/usr/bin/python3" && imports_torch("/usr/bin/python3")) found.path = "/usr/bin/python3";
  return found;
}

}  // namespace

TorchPython find_torch_python() {
  // Each probe starts Python and imports torch (a second or two): `lesson check` asks before it
  // decides to skip and again to run, and neither the environment nor the Pythons change meanwhile.
  static const TorchPython found = probe_torch_python();
  return found;
}

std::string no_torch_reason(const TorchPython& python) {
  return fmt::format(
      "PyTorch is not installed: no Python here imports torch (tried {}); install it (Debian: apt install "
      "python3-torch) or name a Python that has it in DPSCOPE_PYTHON",
      python.searched);
}

void run_torch_scenario(const std::string& python, const std::vector<std::string>& args,
                        const fs::path& scratch_dir, const fs::path& trace, bool quiet,
                        const fs::path& log_file) {
  // Absolute: the script runs in the scratch directory, where a relative name means another file.
  const fs::path scratch = fs::absolute(scratch_dir);
  const fs::path log = fs::absolute(log_file);
  const lesson::TorchScenario scenario = lesson::parse_torch_scenario(args);
  const fs::path script = shipped(scenario.script);
  std::error_code ec;
  DPS_CHECK(fs::is_regular_file(script, ec), ErrorKind::kIo, "the scenario's script {} is not there",
            script.string());
  const fs::path dpscope = executable_dir() / "dpscope";
  const fs::path rank_dir = scratch / "trace";
  // --master-port 0: launch draws a free port (not its default 29500, where two lessons checked at
  // once would meet); a port another process binds first fails the run naming it.
  std::vector<std::string> argv = {dpscope.string(),
                                   "launch",
                                   "--nproc",
                                   std::to_string(scenario.nproc),
                                   "--master-port",
                                   "0",
                                   "--grace-s",
                                   "2",
                                   "--",
                                   python,
                                   "-m",
                                   std::string(lesson::kTorchScenarioModule),
                                   "--trace-dir",
                                   rank_dir.string(),
                                   script.string()};
  for (const std::string& arg : scenario.script_args)
    argv.push_back(lesson::replace_scratch(arg, scratch.string()));
  // dpscope_torch as shipped beside the lessons, unless it is installed (pip install ./python).
  std::string pythonpath;
  if (const fs::path package = shipped("python/dpscope_torch"); fs::is_directory(package, ec)) {
    pythonpath = package.parent_path().string();
    if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0')
      pythonpath += std::string(":") + old;
  }
  if (!quiet)
    fmt::print(
        "recording the PyTorch run into {0}; watch it live from another terminal:\n  dpscope-viz --follow "
        "{0}\n",
        printable_line(rank_dir.string()));
  std::fflush(stdout);
  const pid_t pid = start_in(argv, scratch, pythonpath, quiet ? log : fs::path());
  DPS_CHECK(pid > 0, ErrorKind::kProcess, "cannot start {}", dpscope.string());
  const int status = wait_with_timeout(pid, kTorchScenarioTimeoutS);
  std::string why = quiet ? last_log_line(log) : std::string("its output above says why");
  if (status == 127 && why.empty())
    why = fmt::format("{} could not be started in {}", dpscope.string(), scratch.string());
  if (status == -1)
    throw Error(ErrorKind::kProcess,
                fmt::format("the PyTorch run did not finish in {:.0f} s and was stopped ({})",
                            kTorchScenarioTimeoutS, why));
  if (status != 0) {
    // What the ranks wrote up to their `error` event is still a trace: a lesson that declares the
    // failure (expect_error) watches it, and its first `error` says why better than the launcher's
    // line (a Python traceback is no "dpscope: error:" line). A merge that fails adds nothing.
    try {
      if (fs::is_directory(rank_dir, ec)) {
        trace::merge_rank_traces(rank_dir, trace);
        if (const std::string raised = first_error(trace::read_trace(trace)); !raised.empty()) why = raised;
      }
    } catch (const Error&) {
    }
    throw Error(ErrorKind::kProcess, fmt::format("the PyTorch run failed (exit {}): {}", status, why));
  }
  // A Python that exits 0 without running the recorder (not PyTorch's, a wrapper that swallows the
  // module) leaves no rank directory: say so, not "'.../trace' is not a directory" as a usage error.
  DPS_CHECK(fs::is_directory(rank_dir, ec), ErrorKind::kProcess,
            "the PyTorch run ended (exit 0) but wrote no trace into {}: {} did not run {} ({})",
            rank_dir.string(), python, lesson::kTorchScenarioModule,
            quiet ? "its log: " + log.string() : "its output is above");
  trace::merge_rank_traces(rank_dir, trace);
}

}  // namespace dpscope::cli
