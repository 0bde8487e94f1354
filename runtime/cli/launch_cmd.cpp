// dpscope launch: torchrun's launcher for this machine's share of a job.
//
//   dpscope launch --nproc N [--nnodes M --node-rank K --master-addr A --master-port P (0: draw one)]
//                  [--grace-s S] -- PROGRAM ARGS...
//
// Starts N copies of PROGRAM, each with the environment torch.distributed's env:// rendezvous reads:
// RANK (K * N + local rank), LOCAL_RANK, WORLD_SIZE (M * N), LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT (and GROUP_RANK, the node rank). Every line a rank prints comes out whole, prefixed
// "[rank R] " (stderr to stderr, stdout to stdout; a line past 1 MiB in marked pieces, in linear
// time). SIGINT and SIGTERM are passed on to every rank. When one rank fails (a non-zero exit or a
// signal), the others get SIGTERM (and SIGCONT), then SIGKILL after --grace-s seconds, and the
// command fails naming the first rank that failed, how, and the error line it printed (a usage
// error, status 2, stays one), and the ranks it stopped that printed no error line of their own.
// Exit 0 only when every rank exited 0 and every line they printed was passed on: a
// stdout or stderr that cannot be written (a full disk, closed) fails the job once its ranks end,
// naming the stream.
//
// Also here: say_why_when_terminated(), the one line a rank of a job prints when its launcher
// stops it (commands.hpp).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/free_port.hpp"
#include "dpscope/base/process.hpp"
#include "dpscope/base/standard_descriptors.hpp"
#include "dpscope/base/termination_notice.hpp"

extern char** environ;

namespace dpscope::cli {

namespace {

volatile sig_atomic_t g_signal = 0;  // the SIGINT or SIGTERM to pass on, once received

extern "C" void remember_signal(int sig) { g_signal = sig; }

struct LaunchArgs {
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double grace_s = 5.0;
  std::vector<std::string> command;
};

// One rank's process and the two pipes its output comes through.
struct Rank {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;                        // its stdout
  int err_fd = -1;                        // its stderr
  std::string out_partial, err_partial;   // an unfinished line of each, at most kMaxLineBytes
  bool out_cut = false, err_cut = false;  // the unfinished line is the rest of a line cut at the cap
  std::string last_error;                 // the last "dpscope: error: " line it wrote to stderr
  bool running = true;
  int status = 0;  // waitpid's
};

// One line's longest piece: a rank that writes more without a newline has it passed on in pieces
// of this size, each after the first marked as the rest of the line (the launcher's memory stays
// bounded, and so does the time: every byte is scanned once).
constexpr size_t kMaxLineBytes = 1 << 20;
constexpr std::string_view kErrorPrefix = "dpscope: error: ";
// How long the launcher still reads the pipes once every rank has exited (what a process a rank
// started writes after it).
constexpr auto kDrainAfterExit = std::chrono::seconds(1);

// Where the ranks' lines go: the launcher's own stdout or stderr, and whether it still takes them.
struct Sink {
  int fd;                // STDOUT_FILENO or STDERR_FILENO
  const char* name;      // "standard output", as the error names it
  int failed_errno = 0;  // the first failed write's errno (0: none); every line since was dropped
};

// One output stream of a rank: its fd, its unfinished line, and where lines go.
struct Stream {
  int& fd;
  std::string& partial;
  bool& cut;
  int rank;
  Sink& to;
  std::string* last_error;  // stderr: remembers the rank's last error line; null for stdout
};

Stream stream_of(Rank& r, bool err, Sink& out, Sink& errs) {
  return err ? Stream{r.err_fd, r.err_partial, r.err_cut, r.rank, errs, &r.last_error}
             : Stream{r.out_fd, r.out_partial, r.out_cut, r.rank, out, nullptr};
}

// "rank 1", "ranks 0 and 3", "ranks 0, 1 and 3"; past eight, "ranks 0, 1, ..., 7 and 56 others".
std::string name_ranks(const std::vector<int>& ranks) {
  constexpr size_t kNamed = 8;
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  if (ranks.size() > kNamed)
    return fmt::format("ranks {} and {} others", fmt::join(ranks.begin(), ranks.begin() + kNamed, ", "),
                       ranks.size() - kNamed);
  return fmt::format("ranks {} and {}", fmt::join(ranks.begin(), ranks.end() - 1, ", "), ranks.back());
}

// Writes `text` to the sink, unless an earlier write to it failed. A failed write (a full disk, a
// closed stdout) is remembered: the job then fails with the reason once its ranks end (run_launch).
void write_all(Sink& sink, const std::string& text) {
  size_t done = 0;
  while (sink.failed_errno == 0 && done < text.size()) {
    const ssize_t n = ::write(sink.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      sink.failed_errno = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
}

// Appends `line` (without its newline) to `out`, prefixed with the rank, or as the rest of a line
// that was cut at kMaxLineBytes.
void emit_line(std::string& out, const Stream& s, std::string_view line) {
  out += s.cut ? fmt::format("[rank {}] (the rest of a line longer than {} bytes) ", s.rank, kMaxLineBytes)
               : fmt::format("[rank {}] ", s.rank);
  out += line;
  out += '\n';
  if (s.last_error != nullptr && !s.cut && line.substr(0, kErrorPrefix.size()) == kErrorPrefix)
    *s.last_error = std::string(line.substr(kErrorPrefix.size(), 1000));
}

// Reads what the stream has and writes every complete line, prefixed; a line that grows past
// kMaxLineBytes is written in pieces. Only the bytes just read are searched for newlines, so a long
// line costs linear time. Returns false at end of file.
bool pump(Stream s) {
  static thread_local std::vector<char> buffer(1 << 16);
  const ssize_t n = ::read(s.fd, buffer.data(), buffer.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!s.partial.empty()) {
      std::string out;
      emit_line(out, s, s.partial);
      write_all(s.to, out);
    }
    s.partial.clear();
    s.cut = false;
    return false;
  }
  std::string out;
  std::string_view fresh(buffer.data(), static_cast<size_t>(n));
  while (!fresh.empty()) {
    const size_t nl = fresh.find('\n');
    const size_t room = kMaxLineBytes - s.partial.size();
    if (nl != std::string_view::npos && nl <= room) {
      s.partial.append(fresh.substr(0, nl));
      emit_line(out, s, s.partial);
      s.partial.clear();
      s.cut = false;
      fresh.remove_prefix(nl + 1);
    } else if (fresh.size() >= room) {  // the line reaches the cap: pass this piece on
      s.partial.append(fresh.substr(0, room));
      emit_line(out, s, s.partial);
      s.partial.clear();
      s.cut = true;
      fresh.remove_prefix(room);
    } else {
      s.partial.append(fresh);
      fresh = {};
    }
  }
  if (!out.empty()) write_all(s.to, out);
  return true;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

bool failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

void check_args(const LaunchArgs& a) {
  DPS_CHECK(!a.command.empty(), ErrorKind::kUsage,
            "launch: no program to start (dpscope launch --nproc N -- PROGRAM ARGS...)");
  DPS_CHECK(!a.command.front().empty(), ErrorKind::kUsage,
            "launch: the program to start is an empty word (dpscope launch --nproc N -- PROGRAM ARGS...)");
  DPS_CHECK(a.nproc >= 1 && a.nproc <= 1024, ErrorKind::kUsage,
            "launch: --nproc must be from 1 to 1024, got {}", a.nproc);
  DPS_CHECK(a.nnodes >= 1 && a.nnodes <= 4096, ErrorKind::kUsage,
            "launch: --nnodes must be from 1 to 4096, got {}", a.nnodes);
  DPS_CHECK(a.node_rank >= 0 && a.node_rank < a.nnodes, ErrorKind::kUsage,
            "launch: --node-rank must be from 0 to --nnodes - 1 = {}, got {}", a.nnodes - 1, a.node_rank);
  DPS_CHECK(a.master_port >= 0 && a.master_port <= 65535, ErrorKind::kUsage,
            "launch: --master-port must be from 1 to 65535 (or 0: draw a free one), got {}", a.master_port);
  DPS_CHECK(a.master_port != 0 || a.nnodes == 1, ErrorKind::kUsage,
            "launch: --master-port 0 draws a port on this machine only; with --nnodes {} every node must be "
            "given the same port",
            a.nnodes);
  DPS_CHECK(!a.master_addr.empty(), ErrorKind::kUsage, "launch: --master-addr is empty");
  DPS_CHECK(a.grace_s >= 0 && a.grace_s <= 3600, ErrorKind::kUsage,
            "launch: --grace-s must be from 0 to 3600, got {}", a.grace_s);
}

// Starts rank `local` with its environment and its output on two pipes.
Rank start_rank(const LaunchArgs& a, int local) {
  Rank r;
  r.rank = a.node_rank * a.nproc + local;
  int out[2];
  int err[2];
  DPS_CHECK(::pipe(out) == 0 && ::pipe(err) == 0, ErrorKind::kIo, "launch: cannot make a pipe: {}",
            std::strerror(errno));
  std::vector<std::string> env;
  const char* ours[] = {"RANK=",        "LOCAL_RANK=",  "WORLD_SIZE=", "LOCAL_WORLD_SIZE=",
                        "MASTER_ADDR=", "MASTER_PORT=", "GROUP_RANK="};
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const char* prefix : ours) replaced = replaced || std::strncmp(*e, prefix, std::strlen(prefix)) == 0;
    if (!replaced) env.emplace_back(*e);
  }
  env.push_back(fmt::format("RANK={}", r.rank));
  env.push_back(fmt::format("LOCAL_RANK={}", local));
  env.push_back(fmt::format("WORLD_SIZE={}", a.nnodes * a.nproc));
  env.push_back(fmt::format("LOCAL_WORLD_SIZE={}", a.nproc));
  env.push_back(fmt::format("MASTER_ADDR={}", a.master_addr));
  env.push_back(fmt::format("MASTER_PORT={}", a.master_port));
  env.push_back(fmt::format("GROUP_RANK={}", a.node_rank));
  std::vector<char*> c_env;
  for (std::string& e : env) c_env.push_back(e.data());
  c_env.push_back(nullptr);
  std::vector<std::string> argv = a.command;
  std::vector<char*> c_argv;
  for (std::string& s : argv) c_argv.push_back(s.data());
  c_argv.push_back(nullptr);
  // The program's path, found on PATH now: between fork and exec the child may only make system
  // calls (the launcher has threads of its own by then), and execvp's search allocates.
  std::string program = a.command.front();
  if (program.find('/') == std::string::npos) {
    const std::string found = find_on_path(program);
    if (!found.empty()) program = found;
  }
  // exec's failure comes back on a pipe that exec closes: nothing read means the program started.
  int exec_error[2];
  DPS_CHECK(::pipe2(exec_error, O_CLOEXEC) == 0, ErrorKind::kIo, "launch: cannot make a pipe: {}",
            std::strerror(errno));
  const pid_t launcher = ::getpid();
  r.pid = ::fork();
  if (r.pid == 0) {
    // A rank never outlives its launcher: killed outright (SIGKILL, which it cannot pass on), the
    // launcher would leave its ranks waiting in a collective for their peers forever.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(127);  // it died before prctl took effect
    // Each rank leads a process group of its own, so that stopping it stops what it started too.
    ::setpgid(0, 0);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    // Nothing else of ours leaks into the rank (another rank's pipes, whatever started us), but the
    // pipe that reports a failed exec (close-on-exec: gone once the program runs).
    for (int fd = 3; fd < exec_error[1]; ++fd) ::close(fd);
    if (::syscall(SYS_close_range, exec_error[1] + 1, ~0U, 0) != 0)
      for (int fd = exec_error[1] + 1; fd < 65536; ++fd) ::close(fd);  // a kernel before 5.9
    ::execve(program.c_str(), c_argv.data(), c_env.data());
    const int why = errno;
    [[maybe_unused]] const ssize_t written = ::write(exec_error[1], &why, sizeof why);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(exec_error[1]);
  ::close(out[1]);
  ::close(err[1]);
  int rc = r.pid < 0 ? fork_errno : 0;
  if (r.pid > 0) {
    int why = 0;
    ssize_t n = 0;
    do {
      n = ::read(exec_error[0], &why, sizeof why);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof why)) {
      rc = why;
      ::waitpid(r.pid, nullptr, 0);
    }
  }
  ::close(exec_error[0]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw Error(ErrorKind::kUsage,
                fmt::format("launch: cannot start '{}': {}", a.command.front(), std::strerror(rc)));
  }
  r.out_fd = out[0];
  r.err_fd = err[0];
  return r;
}

// Signals every rank still running, with the processes it started (its process group).
void signal_all(std::vector<Rank>& ranks, int sig) {
  for (Rank& r : ranks) {
    if (!r.running) continue;
    ::kill(-r.pid, sig);
    // A rank stopped by SIGSTOP would act on SIGTERM only when continued (mpirun does the same).
    if (sig == SIGTERM) ::kill(-r.pid, SIGCONT);
  }
}

void run_launch(LaunchArgs a) {
  check_args(a);
  // One machine: a port nobody listens on, as torchrun --standalone picks one (base/free_port.hpp).
  if (a.master_port == 0) a.master_port = free_loopback_port();
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  std::vector<Rank> ranks;
  try {
    for (int local = 0; local < a.nproc; ++local) ranks.push_back(start_rank(a, local));
  } catch (...) {
    signal_all(ranks, SIGKILL);
    for (Rank& r : ranks) ::waitpid(r.pid, nullptr, 0);
    throw;
  }

  // When a line cannot be written (stdout on a full disk, or closed), the ranks run on to their end
  // and their lines are dropped: what a job makes that matters (checkpoints, traces, --save) the ranks
  // write to files of their own, and an hour of training is not thrown away for its log. Their pipes
  // are still read, so no rank blocks on a full one. The job then fails (exit 1) naming the stream,
  // never reported as a success; stderr, while it works, says so at once.
  Sink out_sink{STDOUT_FILENO, "standard output"};
  Sink err_sink{STDERR_FILENO, "standard error"};
  bool warned = false;
  std::optional<std::chrono::steady_clock::time_point> exited_at;  // when the last rank exited
  const Rank* first_failure = nullptr;
  int passed_on = 0;  // the signal passed on to the ranks, 0 if none
  std::chrono::steady_clock::time_point kill_at{};
  bool killed = false;
  auto stop_others = [&] {
    signal_all(ranks, SIGTERM);
    kill_at = std::chrono::steady_clock::now() +
              std::chrono::milliseconds(static_cast<int64_t>(a.grace_s * 1000.0));
  };
  for (;;) {
    // Output first, so that lines printed just before an exit are not lost.
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, bool>> owners;  // (rank, is stderr)
    for (Rank& r : ranks) {
      if (r.out_fd >= 0) {
        fds.push_back({r.out_fd, POLLIN, 0});
        owners.emplace_back(&r, false);
      }
      if (r.err_fd >= 0) {
        fds.push_back({r.err_fd, POLLIN, 0});
        owners.emplace_back(&r, true);
      }
    }
    if (!fds.empty()) {
      const int n = ::poll(fds.data(), fds.size(), 100);
      for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const Stream stream = stream_of(*owners[i].first, owners[i].second, out_sink, err_sink);
        if (!pump(stream)) {
          ::close(stream.fd);
          stream.fd = -1;
        }
      }
    } else {
      ::usleep(20'000);
    }
    if (out_sink.failed_errno != 0 && !warned) {
      warned = true;
      write_all(err_sink, fmt::format("dpscope: warning: launch: cannot write standard output: {}; the ranks "
                                      "run on, and the lines they print there are lost\n",
                                      std::strerror(out_sink.failed_errno)));
    }
    if (g_signal != 0 && passed_on == 0) {
      passed_on = g_signal;
      signal_all(ranks, passed_on);
      kill_at = std::chrono::steady_clock::now() +
                std::chrono::milliseconds(static_cast<int64_t>(a.grace_s * 1000.0));
    }
    for (Rank& r : ranks) {
      if (!r.running) continue;
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
      r.running = false;
      r.status = status;
      if (failed(status) && first_failure == nullptr && passed_on == 0) {
        first_failure = &r;
        stop_others();
      }
    }
    const bool any_running = std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.running; });
    const bool any_output =
        std::any_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.out_fd >= 0 || r.err_fd >= 0; });
    if (!any_running && !any_output) break;
    if (any_running && !killed && (first_failure != nullptr || passed_on != 0) &&
        std::chrono::steady_clock::now() >= kill_at) {
      signal_all(ranks, SIGKILL);
      killed = true;
    }
    if (!any_running && any_output) {
      // Exited, but a grandchild may hold the pipes open: read what is there, then let go. One that
      // writes faster than the launcher reads (a rank's background writer) always has something
      // there: it held the launcher forever, SIGTERM or not, so what arrives after kDrainAfterExit
      // is no longer waited for.
      const auto now = std::chrono::steady_clock::now();
      if (!exited_at) exited_at = now;
      const bool drained = now >= *exited_at + kDrainAfterExit;
      for (Rank& r : ranks)
        for (const bool err : {false, true}) {
          const Stream stream = stream_of(r, err, out_sink, err_sink);
          if (stream.fd < 0) continue;
          pollfd p{stream.fd, POLLIN, 0};
          if (drained || ::poll(&p, 1, 0) <= 0 || !pump(stream)) {
            if (!stream.partial.empty()) {  // the unfinished line it wrote last, as at end of file
              std::string out;
              emit_line(out, stream, stream.partial);
              write_all(stream.to, out);
              stream.partial.clear();
              stream.cut = false;
            }
            ::close(stream.fd);
            stream.fd = -1;
          }
        }
    }
  }
  // What a stopped rank started may outlive it: its process group goes with it.
  if (first_failure != nullptr || passed_on != 0)
    for (Rank& r : ranks) ::kill(-r.pid, SIGKILL);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (passed_on != 0) {
    g_signal = 0;
    throw Error(ErrorKind::kProcess,
                fmt::format("launch: {} received: passed it on to all {} ranks, which stopped",
                            strsignal(passed_on), ranks.size()));
  }
  if (first_failure != nullptr) {
    // Every rank is accounted for: one that this launcher stopped before it could say so itself
    // (still starting, before it armed its line; a program that prints nothing on SIGTERM) is named
    // in the launcher's line.
    std::vector<int> silent;
    for (const Rank& r : ranks)
      if (&r != first_failure && r.last_error.empty() && WIFSIGNALED(r.status)) silent.push_back(r.rank);
    // The rank's own error line says why; a usage error (exit status 2: flags, configurations that
    // differ) stays one, so the launcher's exit code is the rank's.
    const Rank& f = *first_failure;
    const bool usage = WIFEXITED(f.status) && WEXITSTATUS(f.status) == 2 && !f.last_error.empty();
    throw Error(
        usage ? ErrorKind::kUsage : ErrorKind::kProcess,
        fmt::format("launch: rank {} (pid {}) {}{}; stopped the other {} rank{}{}", f.rank, f.pid,
                    describe_status(f.status),
                    f.last_error.empty() ? "" : fmt::format(" (its error: {})", f.last_error),
                    ranks.size() - 1, ranks.size() == 2 ? "" : "s",
                    silent.empty() ? "" : fmt::format(" ({} printed no error line)", name_ranks(silent))));
  }
  for (const Sink* sink : {&out_sink, &err_sink})
    if (sink->failed_errno != 0)
      throw output_lost(sink->name, sink->failed_errno,
                        "every rank exited 0, but what they printed there is incomplete");
}

}  // namespace

void say_why_when_terminated(int rank) {
  arm_termination_notice(fmt::format(
      "dpscope: error: rank {} was stopped by SIGTERM: its launcher (mpirun or dpscope launch) stops every "
      "rank when one fails (that rank's error says why) or when it is stopped itself\n",
      rank));
}

void keep_quiet_when_terminated() { hold_termination(); }

void register_launch(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "start N processes of a program with torchrun's environment (RANK, WORLD_SIZE, ...)");
  cmd->add_option("--nproc", args->nproc, "processes on this machine (--nproc_per_node in torchrun)")
      ->required();
  cmd->add_option("--nnodes", args->nnodes, "machines in the job")->capture_default_str();
  cmd->add_option("--node-rank", args->node_rank, "this machine's index, 0 .. nnodes-1")
      ->capture_default_str();
  cmd->add_option("--master-addr", args->master_addr, "where rank 0's store listens")->capture_default_str();
  cmd->add_option("--master-port", args->master_port, "its port (0: draw a free one, one node only)")
      ->capture_default_str();
  cmd->add_option("--grace-s", args->grace_s, "seconds between SIGTERM and SIGKILL when a rank fails")
      ->capture_default_str();
  cmd->add_option("command", args->command, "-- PROGRAM ARGS...")->expected(-1);
  cmd->callback([args] { run_launch(*args); });
}

}  // namespace dpscope::cli
