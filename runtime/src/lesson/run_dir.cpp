// Temporary run directories (lesson/run_dir.hpp): made with mkdtemp, removed on every way out.
//
// Signals: a handler may only do async-signal-safe work, and removing a tree is not, so the handler
// writes the signal's number into a pipe; a watcher thread reads it, ends the process's children
// (base/process.hpp stop_children), parks the process's other threads, removes every registered
// directory, restores the signal's previous action and raises it again. The list and the pipe are
// process-wide by nature (a signal disposition is), so they live in one never-destroyed object.
//
// Why park: the rest of the process would run on until the signal is raised, and a lesson starting
// meanwhile makes its scratch directory, and with it the removed run directory, again
// (create_directories makes every missing parent); a CI run once found such a directory. Each other
// thread gets a signal whose handler waits until the process ends. A parked thread may hold any
// lock (malloc's, a mutex), so from then on the watcher allocates and locks nothing: the directories
// go with openat, getdents64 and unlinkat on buffers of its own stack.
#include "dpscope/lesson/run_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "dpscope/base/error.hpp"
#include "dpscope/base/process.hpp"

namespace dpscope::lesson {

namespace fs = std::filesystem;

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};
// How long a child has to end on SIGTERM before SIGKILL (a scenario's launcher passes SIGTERM on to
// its ranks, which end at once).
constexpr double kChildrenGraceS = 2.0;

struct SignalCleanup {
  std::mutex mutex;
  std::vector<fs::path> dirs;  // removed when a signal comes
  bool installed = false;
  struct sigaction previous[2] = {};
};

SignalCleanup& cleanup() {
  static SignalCleanup* const state = new SignalCleanup();  // never destroyed: the watcher outlives main
  return *state;
}

// Read by the handler, which may run on any thread: a lock-free atomic is async-signal-safe.
std::atomic<int> g_pipe_write{-1};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (const int fd = g_pipe_write.load(); fd >= 0) {
    const ssize_t n = ::write(fd, &byte, 1);
    (void)n;  // nothing to do about a full pipe: a signal is already on its way
  }
  errno = saved;
}

// Parking: a thread that takes this signal waits in its handler until the process ends.
int park_signal() { return SIGRTMIN + 4; }  // glibc keeps the ones below SIGRTMIN; +4 leaves room
std::atomic<int> g_parked{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_park(int) {
  g_parked.fetch_add(1);
  for (;;) ::pause();
}

// One record of getdents64: the kernel's linux_dirent64, its name running past the struct.
struct DirEntry {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

// Calls fn(name) for each entry of directory fd `dir` but "." and ".."; no allocation. False when
// the directory cannot be read.
template <typename Fn>
bool for_each_entry(int dir, Fn&& fn) {
  alignas(8) char buffer[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    for (long at = 0; at < n;) {
      const auto* e = reinterpret_cast<const DirEntry*>(buffer + at);
      at += e->reclen;
      if (std::strcmp(e->name, ".") != 0 && std::strcmp(e->name, "..") != 0) fn(e->name);
    }
  }
}

// Signals every other thread of the process once, and waits (at most a second: a thread that blocks
// the signal is not waited for) until they are parked. Threads started meanwhile are found by the
// next scan. No allocation, no lock.
void park_other_threads() {
  struct sigaction action {};
  action.sa_handler = on_park;
  sigfillset(&action.sa_mask);
  ::sigaction(park_signal(), &action, nullptr);
  const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
  static pid_t signalled[4096];  // the watcher's alone: one signal is handled once
  size_t count = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (bool found = true; found && std::chrono::steady_clock::now() < deadline;) {
    found = false;
    const int tasks = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (tasks < 0) return;
    for_each_entry(tasks, [&](const char* name) {
      pid_t tid = 0;
      std::from_chars(name, name + std::strlen(name), tid);
      if (tid <= 0 || tid == self || std::find(signalled, signalled + count, tid) != signalled + count ||
          count == std::size(signalled))
        return;
      if (::syscall(SYS_tgkill, ::getpid(), tid, park_signal()) == 0) {
        signalled[count++] = tid;
        found = true;
      }
    });
    ::close(tasks);
    while (g_parked.load() < static_cast<int>(count) && std::chrono::steady_clock::now() < deadline) {
      const struct timespec pause_ms { 0, 1'000'000 };
      ::nanosleep(&pause_ms, nullptr);
    }
  }
}

// Removes `name` in directory fd `at` and everything under it, links not followed; no allocation.
bool remove_tree(int at, const char* name, int depth = 0) {
  if (::unlinkat(at, name, 0) == 0 || errno == ENOENT) return true;
  if ((errno != EISDIR && errno != EPERM) || depth > 64) return false;
  const int dir = ::openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return false;
  // What could not go makes the last step fail (the directory is not empty).
  for_each_entry(dir, [&](const char* entry) { remove_tree(dir, entry, depth + 1); });
  ::close(dir);
  return ::unlinkat(at, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

void watch(int pipe_read) {
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = ::read(pipe_read, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    const int sig = byte;
    // First the children (a py_compile, a scenario's launcher, the viewer's `dpscope lesson run`):
    // one still running would write into the directory once it is gone, and make it again.
    stop_children(kChildrenGraceS);
    SignalCleanup& state = cleanup();
    state.mutex.lock();  // no other thread is inside it once they are parked
    size_t index = 0;
    while (index + 1 < std::size(kSignals) && kSignals[index] != sig) ++index;
    // A parked thread never resumes: only when the signal's previous action ends the process.
    if (state.previous[index].sa_handler == SIG_DFL) park_other_threads();
    // Unparked (a thread that blocks the parking signal, a caller's handler that lets the process
    // go on), a thread may still write into a directory being removed; the removal is then tried
    // again.
    for (const fs::path& dir : state.dirs)
      for (int attempt = 0; attempt < 100; ++attempt)
        if (remove_tree(AT_FDCWD, dir.c_str())) break;
    ::sigaction(sig, &state.previous[index], nullptr);
    ::raise(sig);  // the previous action: by default, the process ends with this signal
    state.mutex.unlock();
  }
}

// Installs the handlers and the watcher once. False when it cannot (no pipe or thread): then the
// directory is left to the next start's sweep.
bool install_handlers(SignalCleanup& state) {
  if (state.installed) return true;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  try {
    std::thread(watch, fds[0]).detach();
  } catch (const std::exception&) {
    ::close(fds[0]);
    ::close(fds[1]);
    return false;
  }
  g_pipe_write.store(fds[1]);
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction current {};
    ::sigaction(kSignals[i], nullptr, &current);
    state.previous[i] = current;
    if (current.sa_handler == SIG_IGN) continue;  // nohup: stays ignored
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(kSignals[i], &action, nullptr);
  }
  state.installed = true;
  return true;
}

// The PID in PREFIX-<pid>-XXXXXX or PREFIX-<pid>; nullopt for any other name.
std::optional<pid_t> owner_pid(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix) || name.size() <= prefix.size() + 1 || name[prefix.size()] != '-')
    return std::nullopt;
  std::string_view rest = name.substr(prefix.size() + 1);
  const size_t dash = rest.find('-');
  const std::string_view digits = rest.substr(0, dash);
  if (dash != std::string_view::npos && rest.size() - dash - 1 != 6) return std::nullopt;
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) return std::nullopt;
  return pid;
}

}  // namespace

std::vector<fs::path> remove_stale_run_dirs(const fs::path& parent, std::string_view prefix) {
  std::vector<fs::path> removed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::optional<pid_t> pid = owner_pid(entry.path().filename().string(), prefix);
    if (!pid || *pid == ::getpid() || process_exists(*pid)) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    std::error_code remove_ec;
    fs::remove_all(entry.path(), remove_ec);
    if (!remove_ec) removed.push_back(entry.path());
  }
  return removed;
}

TempRunDir::TempRunDir(std::string_view prefix, const fs::path& parent) {
  remove_stale_run_dirs(parent, prefix);
  std::string pattern = (parent / fmt::format("{}-{}-XXXXXX", prefix, ::getpid())).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    const int err = errno;
    throw Error(ErrorKind::kIo, fmt::format("cannot make a temporary directory in {}: {}", parent.string(),
                                            std::strerror(err)));
  }
  path_ = pattern;
}

TempRunDir::~TempRunDir() {
  if (on_signal_) {
    SignalCleanup& state = cleanup();
    std::lock_guard<std::mutex> lock(state.mutex);
    state.dirs.erase(std::remove(state.dirs.begin(), state.dirs.end(), path_), state.dirs.end());
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void TempRunDir::remove_on_signal() {
  if (on_signal_) return;
  SignalCleanup& state = cleanup();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!install_handlers(state)) return;
  state.dirs.push_back(path_);
  on_signal_ = true;
}

}  // namespace dpscope::lesson
