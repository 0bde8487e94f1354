// The registry's factory of `mpi` (comm/mpi_backend.hpp): MPI initialised, this process's rank
// checked against MPI's, the ranks [0, world_size) meet (with the timeout) and get their own
// communicator, and the rank's MpiBackend (its default algorithm from $DPSCOPE_ALGO) is wrapped in
// an AsyncBackend (its comm worker).
#include <mpi.h>

#include <array>
#include <thread>

#include "../api/builtin_backends.hpp"
#include "../async/async_backend.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/kernels/cpu_threads.hpp"
#include "launch_env.hpp"
#include "mpi_backend.hpp"
#include "mpi_singletons.hpp"

namespace dpscope::detail {
namespace {

using Clock = std::chrono::steady_clock;

// c10d's default for gloo (and SimWorldOptions::timeout's).
constexpr Milliseconds kDefaultTimeout{30 * 60 * 1000};

// Polls `requests` until all completed (true) or `deadline` passed (false: `done` says which did).
bool poll_until(std::vector<MPI_Request>& requests, Clock::time_point deadline, std::vector<bool>& done) {
  done.assign(requests.size(), false);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (done[i]) continue;
      int flag = 0;
      MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE);
      done[i] = flag != 0;
      all = all && done[i];
    }
    if (all) return true;
    if (Clock::now() >= deadline) {
      for (size_t i = 0; i < requests.size(); ++i) {
        if (done[i]) continue;
        MPI_Cancel(&requests[i]);
        MPI_Request_free(&requests[i]);
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// The ranks [0, world_size) of MPI_COMM_WORLD meet: each tells rank 0 the world size it joins,
// rank 0 answers once all have come (1: go; 0: world sizes differ). Nothing here waits past
// `timeout`, so the blocking MPI_Comm_create_group that follows only runs once everyone is there.
void arrive(int rank, int world_size, Milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<bool> done;
  if (rank == 0) {
    // sizes[r]: the world size rank r joins; the last entry is rank 0's answer. Heap buffers,
    // kept for good if a request is given up on.
    auto buffers = std::make_shared<std::vector<int>>(static_cast<size_t>(world_size + 1), world_size);
    std::vector<int>& sizes = *buffers;
    std::vector<MPI_Request> arrivals(static_cast<size_t>(world_size - 1), MPI_REQUEST_NULL);
    for (int r = 1; r < world_size; ++r)
      MPI_Irecv(&sizes[r], 1, MPI_INT, r, kArrivalTag, MPI_COMM_WORLD, &arrivals[r - 1]);
    if (!poll_until(arrivals, deadline, done)) {
      keep_forever(buffers);
      std::vector<int> missing;
      for (int r = 1; r < world_size; ++r)
        if (!done[r - 1]) missing.push_back(r);
      throw Error(
          ErrorKind::kTimeout,
          fmt::format("init_process_group(\"mpi\"): rank 0 waited {} ms for ranks that never arrived: "
                      "[{}] of a world of {}",
                      timeout.count(), fmt::join(missing, ", "), world_size));
    }
    int& go = sizes[static_cast<size_t>(world_size)];
    go = 1;
    for (int r = 1; r < world_size; ++r) go = go && sizes[r] == world_size;
    std::vector<MPI_Request> answers(static_cast<size_t>(world_size - 1), MPI_REQUEST_NULL);
    for (int r = 1; r < world_size; ++r)
      MPI_Isend(&go, 1, MPI_INT, r, kArrivalTag, MPI_COMM_WORLD, &answers[r - 1]);
    if (!poll_until(answers, deadline, done)) keep_forever(buffers);
    for (int r = 1; r < world_size; ++r)
      DPS_CHECK(sizes[r] == world_size, ErrorKind::kMismatch,
                "init_process_group(\"mpi\"): rank 0 joined a world of {}, but rank {} a world of {}",
                world_size, r, sizes[r]);
    return;
  }
  auto buffers = std::make_shared<std::array<int, 2>>(std::array<int, 2>{world_size, 0});  // mine, go
  const int& go = (*buffers)[1];
  std::vector<MPI_Request> requests(2, MPI_REQUEST_NULL);
  MPI_Isend(&(*buffers)[0], 1, MPI_INT, 0, kArrivalTag, MPI_COMM_WORLD, &requests[0]);
  MPI_Irecv(&(*buffers)[1], 1, MPI_INT, 0, kArrivalTag, MPI_COMM_WORLD, &requests[1]);
  const bool answered = poll_until(requests, deadline, done);
  if (!answered) keep_forever(buffers);
  DPS_CHECK(answered, ErrorKind::kTimeout,
            "init_process_group(\"mpi\"): rank {} waited {} ms for rank 0 to see all {} ranks arrive", rank,
            timeout.count(), world_size);
  DPS_CHECK(go == 1, ErrorKind::kMismatch,
            "init_process_group(\"mpi\"): rank {} joined a world of {}, but other ranks joined another size",
            rank, world_size);
}

// The communicator of MPI ranks [0, world_size).
MPI_Comm create_world(int world_size) {
  MPI_Group all = MPI_GROUP_NULL;
  MPI_Group members = MPI_GROUP_NULL;
  const std::string context = "init_process_group(\"mpi\")";
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &all), "MPI_Comm_group", context);
  int range[1][3] = {{0, world_size - 1, 1}};
  check_mpi(MPI_Group_range_incl(all, 1, range, &members), "MPI_Group_range_incl", context);
  MPI_Comm comm = MPI_COMM_NULL;
  const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, members, kCreateTag, &comm);
  MPI_Group_free(&members);
  MPI_Group_free(&all);
  check_mpi(rc, "MPI_Comm_create_group", context);
  return comm;
}

// The world of an mpirun job: ranks [0, world_size) of MPI_COMM_WORLD, after they met.
MPI_Comm mpirun_world(const InitOptions& options, Milliseconds timeout) {
  const mpi::Launch launch = mpi::initialize();
  DPS_CHECK(options.world_size <= launch.size, ErrorKind::kInvalidArgument,
            "init_process_group(\"mpi\"): world size {} is more than the {} processes mpirun started (mpirun "
            "-np {})",
            options.world_size, launch.size, options.world_size);
  DPS_CHECK(options.rank == launch.rank, ErrorKind::kInvalidArgument,
            "init_process_group(\"mpi\"): rank {} was asked for, but this process is MPI rank {} of {}: pass "
            "the MPI rank (mpi::initialize().rank)",
            options.rank, launch.rank, launch.size);
  arrive(options.rank, options.world_size, timeout);
  return create_world(options.world_size);
}

// This process is one of the job's processes on this machine, all computing at once: like rank
// threads in one process, each gets its share of the CPU's matrix-product threads for the rest of
// its life (kernels/cpu_threads.hpp). The machine is not oversubscribed, and a process multiplies
// with as many threads as the sim backend's rank thread would: OpenBLAS's results depend on that
// count, and `--algo ring` promises the simulated run's weights bit for bit.
void share_cpu_with_local_processes() {
  static const std::unique_ptr<kernels::ConcurrentCompute> share = [] {
    const std::optional<int> local = local_process_count();
    return local ? std::make_unique<kernels::ConcurrentCompute>(*local) : nullptr;
  }();
}

BackendFactory mpi_backend_factory() {
  return [](const InitOptions& options) -> std::unique_ptr<Backend> {
    const Milliseconds timeout = options.timeout.count() > 0 ? options.timeout : kDefaultTimeout;
    // The group's default, read at init as SimWorld::create reads it (a bad value fails init
    // naming the variable); kAuto (MPI's own) when unset. Before meeting: every rank reads the same.
    const Algorithm algorithm = algorithm_from_env();
    // Processes mpirun started share MPI_COMM_WORLD; processes of `dpscope launch` (env://, a
    // store) are singletons that join through the store (mpi_singletons.hpp).
    const bool singletons = !mpi::launch_from_environment().has_value() && options.store != nullptr;
    MPI_Comm world =
        singletons ? mpi::detail::join_singletons(*options.store, options.rank, options.world_size, timeout)
                   : mpirun_world(options, timeout);
    share_cpu_with_local_processes();
    auto channel = std::make_unique<MpiChannel>(world, std::make_shared<MpiRankState>());
    Device device = Device::new_cpu();
    device.set_rank(options.rank);
    auto backend = std::make_unique<MpiBackend>(std::move(channel), std::move(device), timeout, 0, algorithm);
    return std::make_unique<AsyncBackend>(std::move(backend), std::make_shared<CommWorker>());
  };
}

}  // namespace

void add_mpi_backends(const AddBackend& add) { add("mpi", mpi_backend_factory()); }

}  // namespace dpscope::detail
