// MPI itself, once per process (comm/mpi_backend.hpp): initialisation with MPI_THREAD_MULTIPLE,
// finalisation at exit when we initialised it, and the launcher's environment.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "launch_env.hpp"
#include "mpi_channel.hpp"
#include "mpi_singletons.hpp"

namespace dpscope::mpi {
namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

// The comm worker and the rank's thread both call MPI (mpi/mpi_channel.hpp).
void require_thread_multiple(int provided, const char* who) {
  DPS_CHECK(
      provided >= MPI_THREAD_MULTIPLE, ErrorKind::kInternal,
      "mpi: the backend needs MPI_THREAD_MULTIPLE, but {} gave {} (rebuild OpenMPI with thread support, or "
      "initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...))",
      who, thread_level_name(provided));
}

// OpenMPI's MPI_Finalize waits for every process of the job. After a failure a peer may never get
// there (stopped by SIGSTOP, hung in a computation, waiting out its own timeout), so it is bounded:
// past kFinalizeGrace the process ends with the exit code its error line set (2 for a usage error,
// 1 otherwise), and its launcher stops the rest. Without a failure it is not bounded: peers that
// finish later are normal.
constexpr std::chrono::seconds kFinalizeGrace{5};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (const std::optional<ErrorKind> failed = ::dpscope::detail::first_failure_in_process()) {
    // Singletons joined by dpscope launch (no mpirun): MPI_Finalize talks to peers that, having
    // failed too, may have exited already, and OpenMPI prints its "writev failed: Broken pipe" for
    // each. Nobody waits for this process's MPI_Finalize there: it ends without it.
    if (!launch_from_environment()) return;
    const int code = Error(*failed, "").is_usage_error() ? 2 : 1;
    std::thread([code] {
      std::this_thread::sleep_for(kFinalizeGrace);
      std::fflush(nullptr);
      std::_Exit(code);
    }).detach();
  }
  MPI_Finalize();
}

}  // namespace

namespace detail {

void init_thread_multiple(const char* who) {
  // OpenMPI's help boxes ("An MPI communication peer process has unexpectedly disconnected ...",
  // 16 lines when a peer is killed) are not a dpscope rank's output: its failures are one
  // "dpscope: error:" line each. A user who sets OMPI_MCA_orte_execute_quiet=0 sees them again.
  ::setenv("OMPI_MCA_orte_execute_quiet", "1", 0);
  int provided = MPI_THREAD_SINGLE;
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  DPS_CHECK(rc == MPI_SUCCESS, ErrorKind::kInternal, "mpi: {} failed with error code {}", who, rc);
  std::atexit(finalize_at_exit);
  require_thread_multiple(provided, who);
}

}  // namespace detail

bool built() { return true; }

std::optional<Launch> launch_from_environment() { return dpscope::detail::launch_from_env(); }

Launch initialize() {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    DPS_CHECK(!finalized, ErrorKind::kInvalidArgument,
              "mpi: MPI was already finalised in this process and cannot start again");
    DPS_CHECK(launch_from_environment().has_value(), ErrorKind::kInvalidArgument,
              "init_process_group(\"mpi\"): this process was not started by mpirun (OMPI_COMM_WORLD_RANK is "
              "not set): run it as `mpirun -np N PROGRAM` (as root add --allow-run-as-root, with more ranks "
              "than cores --oversubscribe)");
    detail::init_thread_multiple("MPI_Init_thread");
  } else {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    require_thread_multiple(provided, "the program's MPI_Init");
  }
  Launch launch;
  MPI_Comm_rank(MPI_COMM_WORLD, &launch.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &launch.size);
  return launch;
}

}  // namespace dpscope::mpi
