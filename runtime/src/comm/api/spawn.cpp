// spawn(): one thread per rank, failures abort the rank's backend and come back naming the rank.
#include "dpscope/comm/spawn.hpp"

#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/kernels/cpu_threads.hpp"

namespace dpscope {

void spawn_ranks(InitOptions options, const RankFunction& fn) {
  DPS_CHECK(options.world_size >= 1, ErrorKind::kInvalidArgument,
            "spawn: world size must be at least 1, got {}", options.world_size);
  if (!options.store) {
    options.store = options.timeout.count() > 0 ? std::make_shared<InMemoryStore>(options.timeout)
                                                : std::make_shared<InMemoryStore>();
  }
  // The first failure is the root cause: a rank records it before aborting its backend, and its
  // peers only fail (with "aborted because rank r failed") after that.
  std::mutex mutex;
  std::optional<RankFailure> first;
  // The rank threads multiply at once: each gets its share of the CPU's matrix-product threads.
  const kernels::ConcurrentCompute concurrent(options.world_size);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(options.world_size));
  for (int rank = 0; rank < options.world_size; ++rank) {
    threads.emplace_back([&options, &fn, &mutex, &first, rank] {
      std::shared_ptr<ProcessGroup> group;
      auto fail = [&](ErrorKind kind, const std::string& message) {
        {
          std::lock_guard lock(mutex);
          if (!first) first = RankFailure{rank, kind, message};
        }
        if (group) group->backend().abort(kind, message);
      };
      try {
        InitOptions mine = options;
        mine.rank = rank;
        group = init_process_group(mine);
        fn(*group);
        group->backend().rank_finished();
      } catch (const Error& e) {
        fail(e.kind(), e.what());
      } catch (const std::exception& e) {
        fail(ErrorKind::kInternal, e.what());
      } catch (...) {
        fail(ErrorKind::kInternal, "unknown exception");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first) throw Error(first->kind, fmt::format("rank {} failed: {}", first->rank, first->message));
}

void spawn(const std::shared_ptr<SimWorld>& world, const RankFunction& fn, const std::string& backend) {
  DPS_CHECK(world != nullptr, ErrorKind::kInvalidArgument, "spawn: the world is null");
  try {
    spawn_ranks({.backend = backend,
                 .store = std::make_shared<InMemoryStore>(world->timeout()),
                 .world_size = world->size(),
                 .world = world},
                fn);
  } catch (const Error&) {
    // The world knows the root cause even when it was aborted from outside the rank threads.
    if (std::optional<RankFailure> failure = world->first_failure())
      throw Error(failure->kind, fmt::format("rank {} failed: {}", failure->rank, failure->message));
    throw;
  }
}

void spawn(int world_size, const RankFunction& fn, SimWorldOptions options) {
  spawn(SimWorld::create(world_size, std::move(options)), fn);
}

}  // namespace dpscope
