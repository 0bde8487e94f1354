// Child processes and the executable's directory (base/process.hpp).
#include "dpscope/base/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

extern char** environ;

namespace dpscope {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// The children not reaped yet (track_child): process-wide by nature, as a process's children are,
// and never destroyed (a signal's watcher thread may stop them while main returns).
struct Children {
  std::mutex mutex;
  std::vector<pid_t> pids;
};

Children& children() {
  static Children* const state = new Children();
  return *state;
}

std::atomic<bool> g_stopping{false};  // stop_children() was called: the process is ending

// SIGKILL, then at most this long for the kernel to end the child (one in uninterruptible sleep,
// on a hung network mount, is not waited for forever).
constexpr auto kAfterKill = std::chrono::seconds(5);

// The child and everything it started when it leads a process group (spawn_process's own_group).
void signal_child(pid_t pid, int sig) { ::kill(::getpgid(pid) == pid ? -pid : pid, sig); }

// Whether child `pid` is gone: reaped now, or already by another thread (ECHILD).
bool reaped(pid_t pid) {
  int status = 0;
  const pid_t done = ::waitpid(pid, &status, WNOHANG);
  return done == pid || (done < 0 && errno == ECHILD);
}

// Waits until every child in `pids` is gone or `until`; returns those still running.
std::vector<pid_t> reap_until(std::vector<pid_t> pids, Clock::time_point until) {
  for (;;) {
    pids.erase(std::remove_if(pids.begin(), pids.end(), reaped), pids.end());
    if (pids.empty() || Clock::now() >= until) return pids;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

fs::path executable_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path(ec) : self.parent_path();
}

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

pid_t spawn_process(const std::vector<std::string>& argv, const fs::path& log, bool own_group) {
  if (argv.empty()) return -1;
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (own_group) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);  // a group of its own, led by the child
  }
  pid_t pid = -1;
  int rc = 0;
  {
    // Started and remembered under one lock: stop_children() never misses a child just started,
    // and once it has run (the process is ending) nothing more is started.
    std::lock_guard<std::mutex> lock(children().mutex);
    rc = g_stopping.load() ? ECANCELED
                           : posix_spawn(&pid, c_argv[0], &actions, &attributes, c_argv.data(), environ);
    if (rc == 0) children().pids.push_back(pid);
  }
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

void track_child(pid_t pid) {
  std::lock_guard<std::mutex> lock(children().mutex);
  children().pids.push_back(pid);
}

void forget_child(pid_t pid) {
  {
    std::lock_guard<std::mutex> lock(children().mutex);
    std::vector<pid_t>& pids = children().pids;
    pids.erase(std::remove(pids.begin(), pids.end(), pid), pids.end());
  }
  const auto until = Clock::now() + std::chrono::minutes(1);
  while (g_stopping.load() && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

void stop_children(double grace_s) {
  g_stopping.store(true);
  std::vector<pid_t> pids;
  {
    std::lock_guard<std::mutex> lock(children().mutex);
    pids = children().pids;
  }
  for (const pid_t pid : pids) {
    signal_child(pid, SIGTERM);
    signal_child(pid, SIGCONT);  // one stopped (SIGSTOP, ^Z) acts on SIGTERM only when continued
  }
  pids = reap_until(std::move(pids), Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(grace_s)));
  for (const pid_t pid : pids) signal_child(pid, SIGKILL);
  reap_until(std::move(pids), Clock::now() + kAfterKill);
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

namespace {

// wait_process() without forgetting the child.
int wait_for(pid_t pid, double timeout_s) {
  int status = 0;
  if (timeout_s <= 0.0) {
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (done < 0) return -1;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  signal_child(pid, SIGKILL);  // with all it started when it leads its own group
  waitpid(pid, &status, 0);
  return -1;
}

}  // namespace

int wait_process(pid_t pid, double timeout_s) {
  const int status = wait_for(pid, timeout_s);
  forget_child(pid);
  return status;
}

int run_process(const std::vector<std::string>& argv, const fs::path& log, double timeout_s) {
  const pid_t pid = spawn_process(argv, log, /*own_group=*/timeout_s > 0.0);
  if (pid < 0) return -1;
  return wait_process(pid, timeout_s);
}

std::string last_log_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  return last;
}

}  // namespace dpscope
