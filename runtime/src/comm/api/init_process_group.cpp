// init_process_group: argument checks, the backend from the registry, and the rendezvous through
// the store that every rank passes before its backend is created.
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/comm/process_group.hpp"

namespace dpscope {
namespace {

constexpr const char* kPrefix = "dpscope/init/";

// What every rank must agree on; a rank whose description differs joined another run.
std::string description(const InitOptions& options) {
  return fmt::format("backend '{}' and world size {}", options.backend, options.world_size);
}

// Each rank announces itself under this round's keys, then waits for every other rank's key.
// Rounds are counted per rank, so threads that init again on the same store meet under fresh keys
// instead of finding the previous round's.
void rendezvous(const InitOptions& options) {
  Store& store = *options.store;
  const Milliseconds timeout = options.timeout.count() > 0 ? options.timeout : store.timeout();
  const int64_t round = store.add(fmt::format("{}rank{}/rounds", kPrefix, options.rank), 1);
  auto key_of = [&](int rank) { return fmt::format("{}round{}/rank{}", kPrefix, round, rank); };
  const std::string mine = description(options);
  store.set(key_of(options.rank), mine);

  std::vector<std::string> keys;
  for (int r = 0; r < options.world_size; ++r) keys.push_back(key_of(r));
  try {
    store.wait(keys, timeout);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kTimeout) throw;
    std::vector<int> missing;
    for (int r = 0; r < options.world_size; ++r)
      if (!store.check({key_of(r)})) missing.push_back(r);
    throw Error(ErrorKind::kTimeout,
                fmt::format("init_process_group: rank {} waited {} ms in the rendezvous ({}) for ranks "
                            "that never arrived: [{}] of a world of {}",
                            options.rank, timeout.count(), store.name(), fmt::join(missing, ", "),
                            options.world_size));
  }
  for (int r = 0; r < options.world_size; ++r) {
    if (r == options.rank) continue;
    const std::string theirs = store.get_string(key_of(r), timeout);
    DPS_CHECK(theirs == mine, ErrorKind::kMismatch,
              "init_process_group: rank {} joined with {}, but rank {} with {}", options.rank, mine, r,
              theirs);
  }
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  DPS_CHECK(options.world_size >= 1, ErrorKind::kInvalidArgument,
            "init_process_group: world size must be at least 1, got {}", options.world_size);
  DPS_CHECK(options.rank >= 0 && options.rank < options.world_size, ErrorKind::kInvalidArgument,
            "init_process_group: rank {} out of range for a world of {}", options.rank, options.world_size);
  DPS_CHECK(options.timeout.count() >= 0, ErrorKind::kInvalidArgument,
            "init_process_group: timeout must not be negative, got {} ms", options.timeout.count());
  const BackendFactory factory = find_backend(options.backend);
  if (options.store) rendezvous(options);
  return std::make_shared<ProcessGroup>(factory(options));
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, int rank, int world_size,
                                                 InitOptions options) {
  options.backend = backend;
  options.rank = rank;
  options.world_size = world_size;
  return init_process_group(options);
}

}  // namespace dpscope
