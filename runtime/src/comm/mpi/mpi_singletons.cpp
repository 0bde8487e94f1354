// join_singletons() (mpi_singletons.hpp): singleton MPI processes joined through the env:// store.
#include "mpi_singletons.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "dpscope/base/error.hpp"
#include "dpscope/base/termination_notice.hpp"

namespace dpscope::mpi::detail {
namespace {

constexpr const char* kServerUriKey = "dpscope/mpi/ompi-server";
constexpr const char* kPortKey = "dpscope/mpi/port";
constexpr const char* kContext = "init_process_group(\"mpi\")";
constexpr const char* kServerFailed = "failed: ";  // the URI key's value when ompi-server did not start

// $DPSCOPE_OMPI_SERVER, else ompi-server on PATH, else Debian's; "" when there is none.
std::string find_ompi_server() {
  if (const char* chosen = std::getenv("DPSCOPE_OMPI_SERVER"); chosen != nullptr && *chosen != '\0') {
    DPS_CHECK(::access(chosen, X_OK) == 0, ErrorKind::kUsage,
              "{}: DPSCOPE_OMPI_SERVER={} is not an executable", kContext, chosen);
    return chosen;
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string dirs = path;
    size_t begin = 0;
    while (begin <= dirs.size()) {
      const size_t end = std::min(dirs.find(':', begin), dirs.size());
      const std::filesystem::path candidate =
          std::filesystem::path(dirs.substr(begin, end - begin)) / "ompi-server";
      if (end > begin && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
      begin = end + 1;
    }
  }
  return ::access("/usr/bin/ompi-server", X_OK) == 0 ? "/usr/bin/ompi-server" : "";
}

// The ompi-server child of rank 0: stopped at exit (after MPI_Finalize, which atexit runs first
// because MPI is initialised later), and by the kernel if this process dies first.
pid_t g_server = -1;
std::filesystem::path g_server_stderr;  // where its stderr goes (its notices are not the run's output)
void stop_server_at_exit() {
  if (g_server > 0) {
    ::kill(g_server, SIGTERM);
    ::waitpid(g_server, nullptr, 0);
    g_server = -1;
  }
  std::error_code ignored;
  if (!g_server_stderr.empty()) std::filesystem::remove(g_server_stderr, ignored);
}

// "exited with status 1" / "was killed by signal 9 (Killed)", and the last line it wrote to stderr.
std::string describe_server_end(int status) {
  std::string how = WIFEXITED(status)     ? fmt::format("it exited with status {}", WEXITSTATUS(status))
                    : WIFSIGNALED(status) ? fmt::format("it was killed by signal {} ({})", WTERMSIG(status),
                                                        strsignal(WTERMSIG(status)))
                                          : std::string("it stopped");
  std::ifstream in(g_server_stderr);
  std::string last;
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r-") != std::string::npos) last = line;
  if (last.size() > 300) last = last.substr(0, 300) + "...";
  return last.empty() ? how + " and wrote nothing to stderr" : fmt::format("{}; its stderr: {}", how, last);
}

// Starts `ompi-server --no-daemonize -r FILE` and returns the URI it writes there (a pipe would
// hold it in ompi-server's stdio buffer until it exits).
std::string start_ompi_server(Milliseconds timeout) {
  const std::string server = find_ompi_server();
  DPS_CHECK(!server.empty(), ErrorKind::kUnsupported,
            "{}: processes not started by mpirun join through OpenMPI's ompi-server, which is not on PATH "
            "(install openmpi-bin), or start them with mpirun -np N",
            kContext);
  const std::filesystem::path uri_file =
      std::filesystem::temp_directory_path() / fmt::format("dpscope-ompi-server-{}.uri", ::getpid());
  std::filesystem::remove(uri_file);
  g_server_stderr =
      std::filesystem::temp_directory_path() / fmt::format("dpscope-ompi-server-{}.stderr", ::getpid());
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  DPS_CHECK(child >= 0, ErrorKind::kIo, "{}: cannot start ompi-server: {}", kContext, std::strerror(errno));
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // rank 0 died before prctl took effect
    const int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDOUT_FILENO);
    }
    // Its notices are not the run's output, but they say why it could not start.
    const int err = ::open(g_server_stderr.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(err >= 0 ? err : devnull, STDERR_FILENO);
    ::execl(server.c_str(), "ompi-server", "--no-daemonize", "-r", uri_file.c_str(),
            static_cast<char*>(nullptr));
    const char* failed = "cannot execute it\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, failed, std::strlen(failed));
    ::_exit(127);
  }
  g_server = child;
  std::atexit(stop_server_at_exit);

  // The URI is complete once the file reads the same twice in a row.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string uri;
  std::string previous;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      g_server = -1;
      throw Error(
          ErrorKind::kProcess,
          fmt::format("{}: OpenMPI's ompi-server ({}) could not start: {}, before it reported its URI",
                      kContext, server, describe_server_end(status)));
    }
    std::ifstream in(uri_file);
    std::string text;
    std::getline(in, text);
    if (!text.empty() && text == previous) {
      uri = text;
      break;
    }
    previous = text;
  }
  std::filesystem::remove(uri_file);
  DPS_CHECK(!uri.empty(), ErrorKind::kTimeout, "{}: {} reported no URI within {} ms", kContext, server,
            timeout.count());
  return uri;
}

// Ends the process with one line when the join has not finished within the timeout: the MPI
// calls it waits in cannot be interrupted.
class JoinWatchdog {
 public:
  JoinWatchdog(int rank, Milliseconds timeout, const std::atomic<int>& round)
      : thread_([this, rank, timeout, &round] {
          std::unique_lock lock(mutex_);
          if (done_cv_.wait_for(lock, timeout, [this] { return done_; })) return;
          std::fprintf(stderr,
                       "dpscope: error: %s: rank %d waited %lld ms to join the MPI world in round %d (a rank "
                       "that never connected, or died while joining); exiting\n",
                       kContext, rank, static_cast<long long>(timeout.count()), round.load());
          std::fflush(stderr);
          std::_Exit(3);
        }) {}
  ~JoinWatchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }
  JoinWatchdog(const JoinWatchdog&) = delete;
  JoinWatchdog& operator=(const JoinWatchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(ErrorKind::kInternal,
              fmt::format("{}: {} failed: {}", kContext, call, std::string(text, length)));
}

std::string turn_key(int round) { return fmt::format("dpscope/mpi/turn/{}", round); }

// The rounds of the file comment's step 3; returns the world communicator.
MPI_Comm join(Store& store, int rank, int world_size, Milliseconds timeout) {
  std::atomic<int> round{0};
  JoinWatchdog watchdog(rank, timeout, round);
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_SELF, &comm), "MPI_Comm_dup");
  std::string port;
  if (rank == 0) {
    char name[MPI_MAX_PORT_NAME] = {};
    check_mpi(MPI_Open_port(MPI_INFO_NULL, name), "MPI_Open_port");
    port = name;
    store.set(kPortKey, port);
  } else {
    port = store.get_string(kPortKey, timeout);
  }
  for (int k = 1; k < world_size; ++k) {
    round = k;
    if (rank > k) continue;
    MPI_Comm inter = MPI_COMM_NULL;
    if (rank < k) {
      if (rank == 0) store.set(turn_key(k), "open");
      check_mpi(MPI_Comm_accept(port.c_str(), MPI_INFO_NULL, 0, comm, &inter), "MPI_Comm_accept");
    } else {
      store.wait({turn_key(k)}, timeout);
      check_mpi(MPI_Comm_connect(port.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter), "MPI_Comm_connect");
    }
    MPI_Comm merged = MPI_COMM_NULL;
    check_mpi(MPI_Intercomm_merge(inter, rank == k ? 1 : 0, &merged), "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    MPI_Comm_free(&comm);
    comm = merged;
  }
  if (rank == 0) MPI_Close_port(port.c_str());
  int got_rank = -1;
  int got_size = -1;
  MPI_Comm_rank(comm, &got_rank);
  MPI_Comm_size(comm, &got_size);
  DPS_CHECK(got_rank == rank && got_size == world_size, ErrorKind::kInternal,
            "{}: joined as rank {} of {}, expected rank {} of {}", kContext, got_rank, got_size, rank,
            world_size);
  return comm;
}

std::mutex g_mutex;
MPI_Comm g_world = MPI_COMM_NULL;  // the first join's world, duplicated by later calls

}  // namespace

MPI_Comm join_singletons(Store& store, int rank, int world_size, Milliseconds timeout) {
  std::lock_guard lock(g_mutex);
  if (g_world == MPI_COMM_NULL) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    DPS_CHECK(
        !initialized, ErrorKind::kInvalidArgument,
        "{}: MPI is already initialised in this process, but not by mpirun: processes of dpscope launch "
        "must leave MPI_Init to the backend",
        kContext);
    if (world_size == 1) {  // a world of one joins nobody
      init_thread_multiple("MPI_Init_thread (a singleton)");
      DPS_CHECK(MPI_Comm_dup(MPI_COMM_SELF, &g_world) == MPI_SUCCESS, ErrorKind::kInternal,
                "{}: MPI_Comm_dup failed", kContext);
    } else {
      std::string uri;
      if (rank == 0) {
        try {
          uri = start_ompi_server(timeout);
        } catch (const Error& e) {
          // The others wait for the URI: they learn at once why none comes. This process's own line
          // is this error, even if its launcher stops it because one of them failed first.
          own_error_on_termination(e.what());
          store.set(kServerUriKey, kServerFailed + std::string(e.what()));
          throw;
        }
        store.set(kServerUriKey, uri);
      } else {
        uri = store.get_string(kServerUriKey, timeout);
        DPS_CHECK(uri.rfind(kServerFailed, 0) != 0, ErrorKind::kProcess, "rank 0 failed: {}",
                  uri.substr(std::strlen(kServerFailed)));
      }
      ::setenv("OMPI_MCA_pmix_server_uri", uri.c_str(), 1);
      // When a peer's process ends first (it failed, its ompi-server went with rank 0), MPI's
      // connections to it are broken: a write to one must be an error MPI reports, not a SIGPIPE
      // that kills this process after it printed its own error (the launcher then named the signal).
      ::signal(SIGPIPE, SIG_IGN);
      init_thread_multiple("MPI_Init_thread (a singleton started by dpscope launch)");
      g_world = join(store, rank, world_size, timeout);
    }
  }
  int size = 0;
  MPI_Comm_size(g_world, &size);
  DPS_CHECK(size == world_size, ErrorKind::kInvalidArgument,
            "{}: this process joined a world of {} processes, not {}", kContext, size, world_size);
  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(g_world, &dup), "MPI_Comm_dup");
  return dup;
}

}  // namespace dpscope::mpi::detail
