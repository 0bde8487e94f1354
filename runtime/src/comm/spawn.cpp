// spawn(): one thread per rank, failures abort the world and come back naming the rank.
#include "dpscope/comm/spawn.hpp"

#include <exception>
#include <thread>
#include <vector>

#include "dpscope/base/error.hpp"

namespace dpscope {

void spawn(const std::shared_ptr<SimWorld>& world, const RankFunction& fn) {
  DPS_CHECK(world != nullptr, ErrorKind::kInvalidArgument, "spawn: the world is null");
  const int n = world->size();
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&world, &fn, rank, n] {
      try {
        std::shared_ptr<ProcessGroup> group = init_process_group("sim", rank, n, {.world = world});
        fn(*group);
        world->rank_finished(rank);
      } catch (const Error& e) {
        world->abort(rank, e.kind(), e.what());
      } catch (const std::exception& e) {
        world->abort(rank, ErrorKind::kInternal, e.what());
      } catch (...) {
        world->abort(rank, ErrorKind::kInternal, "unknown exception");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (std::optional<RankFailure> failure = world->first_failure()) {
    throw Error(failure->kind, fmt::format("rank {} failed: {}", failure->rank, failure->message));
  }
}

void spawn(int world_size, const RankFunction& fn, SimWorldOptions options) {
  spawn(SimWorld::create(world_size, std::move(options)), fn);
}

}  // namespace dpscope
