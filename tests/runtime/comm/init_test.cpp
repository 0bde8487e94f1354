// The backend registry (comm/backend_registry.hpp) and init_process_group's rendezvous through
// the Store: names, duplicates, backends not built, ranks that never arrive, ranks that disagree.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "comm_test_util.hpp"
#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/core/cuda.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using test::round_options;

using testing::error_of;
using testing::Outcome;

std::string registered_list() { return fmt::format("{}", fmt::join(registered_backends(), ", ")); }

// Registers `name` as another name of the sim backend, counting the backends it creates.
void register_sim_alias(const std::string& name, std::atomic<int>* created = nullptr) {
  if (is_backend_registered(name)) return;
  register_backend(name, [sim = find_backend("sim"), created](const InitOptions& options) {
    if (created != nullptr) ++*created;
    return sim(options);
  });
}

TEST(BackendRegistry, SimIsRegisteredFromTheStart) {
  EXPECT_TRUE(is_backend_registered("sim"));
  const std::vector<std::string> names = registered_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "sim"), names.end());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  // The GPU backends exactly when the build has CUDA (gpu_backends_test.cpp says more).
  EXPECT_EQ(is_backend_registered("nccl"), cuda::built());
  EXPECT_EQ(is_backend_registered("cuda"), cuda::built());
  EXPECT_EQ(is_backend_registered("mpi"), mpi::built());
}

TEST(BackendRegistry, UnknownNamesListTheRegisteredOnes) {
  const Outcome e = error_of([] { init_process_group("carrier-pigeon", 0, 1, {}); });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message, "init_process_group: unknown backend 'carrier-pigeon' (registered backends: " +
                           registered_list() + ")");
}

TEST(BackendRegistry, KnownBackendsThisBuildLacksAreUnsupported) {
  std::vector<const char*> not_built = {"gloo"};
  if (!mpi::built()) not_built.push_back("mpi");
  if (!cuda::built()) not_built.insert(not_built.end(), {"cuda", "nccl"});
  for (const char* name : not_built) {
    const Outcome e = error_of([&] { init_process_group(name, 0, 1, {}); });
    EXPECT_EQ(e.kind, ErrorKind::kUnsupported) << name;
    EXPECT_EQ(e.message, fmt::format("init_process_group: backend '{}' is not built in this version of "
                                     "dpscope (registered backends: {})",
                                     name, registered_list()));
  }
}

TEST(BackendRegistry, ANameCanBeRegisteredOnlyOnce) {
  register_sim_alias("test-registry-once");
  const Outcome twice = error_of([] { register_backend("test-registry-once", find_backend("sim")); });
  EXPECT_EQ(twice.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(twice.message, "register_backend: backend 'test-registry-once' is already registered");
  EXPECT_EQ(error_of([] { register_backend("sim", find_backend("sim")); }).message,
            "register_backend: backend 'sim' is already registered");
  EXPECT_EQ(error_of([] { register_backend("", find_backend("sim")); }).message,
            "register_backend: the backend name is empty");
  EXPECT_EQ(error_of([] { register_backend("test-registry-null", nullptr); }).message,
            "register_backend: backend 'test-registry-null' has no factory");
  EXPECT_FALSE(is_backend_registered("test-registry-null"));
}

TEST(BackendRegistry, InitProcessGroupCreatesEachRanksBackendThroughTheFactory) {
  std::atomic<int> created{0};
  register_sim_alias("test-registry-counting", &created);
  std::vector<float> results(3);
  spawn_ranks(
      {.backend = "test-registry-counting", .world_size = 3, .world = SimWorld::create(3, round_options())},
      [&](ProcessGroup& pg) {
        Tensor t = Tensor::full({1}, pg.rank() + 1.0f, pg.device());
        pg.all_reduce(t)->wait();
        results[pg.rank()] = t.item();
      });
  EXPECT_EQ(created.load(), 3);
  EXPECT_EQ(results, (std::vector<float>{6.0f, 6.0f, 6.0f}));
}

TEST(BackendRegistry, ConcurrentRegistrationsAndLookupsAreSafe) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      register_backend(fmt::format("test-registry-thread-{}", t), find_backend("sim"));
      for (int i = 0; i < 100; ++i) EXPECT_TRUE(is_backend_registered("sim"));
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 8; ++t) EXPECT_TRUE(is_backend_registered(fmt::format("test-registry-thread-{}", t)));
}

TEST(InitThroughTheStore, EveryRankAnnouncesItselfInTheStore) {
  auto store = std::make_shared<InMemoryStore>();
  spawn_ranks(
      {.backend = "sim", .store = store, .world_size = 3, .world = SimWorld::create(3, round_options())},
      [](ProcessGroup&) {});
  EXPECT_TRUE(
      store->check({"dpscope/init/round1/rank0", "dpscope/init/round1/rank1", "dpscope/init/round1/rank2"}));
  EXPECT_EQ(store->get_string("dpscope/init/round1/rank2"), "backend 'sim' and world size 3");
  // A second init on the same store meets under fresh keys (round 2), not the old ones.
  spawn_ranks(
      {.backend = "sim", .store = store, .world_size = 3, .world = SimWorld::create(3, round_options())},
      [](ProcessGroup&) {});
  EXPECT_EQ(store->get_string("dpscope/init/rank1/rounds"), "2");
  EXPECT_TRUE(store->check({"dpscope/init/round2/rank0"}));
}

TEST(InitThroughTheStore, ARankThatNeverArrivesFailsTheRendezvousWithinTheTimeoutNamingIt) {
  auto store = std::make_shared<InMemoryStore>();
  auto world = SimWorld::create(4, round_options());
  std::vector<Outcome> outcomes(4);
  std::vector<int64_t> waited_ms(4);
  std::vector<std::thread> threads;
  for (int rank : {0, 1, 3}) {  // rank 2 never calls init_process_group
    threads.emplace_back([&, rank] {
      const auto begun = std::chrono::steady_clock::now();
      outcomes[rank] = error_of([&] {
        init_process_group({.backend = "sim",
                            .store = store,
                            .rank = rank,
                            .world_size = 4,
                            .timeout = Milliseconds(200),
                            .world = world});
      });
      waited_ms[rank] =
          std::chrono::duration_cast<Milliseconds>(std::chrono::steady_clock::now() - begun).count();
    });
  }
  for (auto& t : threads) t.join();
  for (int rank : {0, 1, 3}) {
    EXPECT_EQ(outcomes[rank].kind, ErrorKind::kTimeout);
    EXPECT_EQ(
        outcomes[rank].message,
        fmt::format("init_process_group: rank {} waited 200 ms in the rendezvous (InMemoryStore) for ranks "
                    "that never arrived: [2] of a world of 4",
                    rank));
    EXPECT_GE(waited_ms[rank], 200);
    EXPECT_LT(waited_ms[rank], 1500) << "the rendezvous must end at its timeout";
  }
}

TEST(InitThroughTheStore, WithoutATimeoutTheRendezvousWaitsTheStoresOwn) {
  auto store = std::make_shared<InMemoryStore>(Milliseconds(60));
  const Outcome e = error_of([&] {
    init_process_group({.backend = "sim",
                        .store = store,
                        .rank = 1,
                        .world_size = 2,
                        .world = SimWorld::create(2, round_options())});
  });
  EXPECT_EQ(e.kind, ErrorKind::kTimeout);
  EXPECT_EQ(e.message,
            "init_process_group: rank 1 waited 60 ms in the rendezvous (InMemoryStore) for ranks that never "
            "arrived: [0] of a world of 2");
}

TEST(InitThroughTheStore, WithoutAStoreASimRankInitsAloneAndMeetsAtItsFirstCollective) {
  auto world = SimWorld::create(2, round_options());
  std::shared_ptr<ProcessGroup> pg = init_process_group("sim", 0, 2, {.world = world});
  EXPECT_EQ(pg->size(), 2);
  EXPECT_EQ(pg->device().name(), "sim:0");
}

TEST(InitThroughTheStore, RanksThatDisagreeOnTheBackendFailNamingBoth) {
  register_sim_alias("test-init-alias");
  auto store = std::make_shared<InMemoryStore>();
  auto world = SimWorld::create(2, round_options());
  std::vector<Outcome> outcomes(2);
  std::vector<std::thread> threads;
  for (int rank : {0, 1}) {
    threads.emplace_back([&, rank] {
      outcomes[rank] = error_of([&] {
        init_process_group({.backend = rank == 0 ? "sim" : "test-init-alias",
                            .store = store,
                            .rank = rank,
                            .world_size = 2,
                            .timeout = Milliseconds(5000),
                            .world = world});
      });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(outcomes[0].kind, ErrorKind::kMismatch);
  EXPECT_EQ(outcomes[0].message,
            "init_process_group: rank 0 joined with backend 'sim' and world size 2, but rank 1 with backend "
            "'test-init-alias' and world size 2");
  EXPECT_EQ(
      outcomes[1].message,
      "init_process_group: rank 1 joined with backend 'test-init-alias' and world size 2, but rank 0 with "
      "backend 'sim' and world size 2");
}

TEST(SpawnRanks, AThrowingRankAbortsItsBackendSoPeersFailFastAndIsReportedByName) {
  std::vector<std::string> peer_errors(3);
  const auto begun = std::chrono::steady_clock::now();
  const Outcome e = error_of([&] {
    // A 20 s collective timeout: the peers must fail because of the abort, long before it.
    SimWorldOptions machine = round_options(Milliseconds(20000));
    spawn_ranks({.backend = "sim", .world_size = 3, .world = SimWorld::create(3, machine)},
                [&](ProcessGroup& pg) {
                  if (pg.rank() == 1) throw Error(ErrorKind::kFormat, "boom");
                  Tensor t = Tensor::zeros({4}, pg.device());
                  try {
                    pg.all_reduce(t)->wait();
                  } catch (const Error& err) {
                    peer_errors[pg.rank()] = err.what();
                    throw;
                  }
                });
  });
  const auto waited = std::chrono::duration_cast<Milliseconds>(std::chrono::steady_clock::now() - begun);
  EXPECT_EQ(e.kind, ErrorKind::kFormat);
  EXPECT_EQ(e.message, "rank 1 failed: boom");
  EXPECT_LT(waited.count(), 5000);
  for (int r : {0, 2})
    EXPECT_EQ(peer_errors[r],
              fmt::format("[Rank {}] ALLREDUCE (SequenceNumber=0) aborted because rank 1 failed: boom", r));
}

TEST(InitThroughTheStore, SpawnReportsTheRendezvousFailureOfTheFirstRank) {
  // spawn_ranks with a world the sim backend refuses: every rank meets, then fails in the factory.
  const Outcome e = error_of([] {
    spawn_ranks({.backend = "sim", .world_size = 2, .world = SimWorld::create(3, round_options())},
                [](ProcessGroup&) {});
  });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_TRUE(e.message == "rank 0 failed: init_process_group: world_size 2 but the SimWorld has 3 ranks" ||
              e.message == "rank 1 failed: init_process_group: world_size 2 but the SimWorld has 3 ranks")
      << e.message;
  EXPECT_EQ(error_of([] { spawn_ranks({.world_size = 0}, [](ProcessGroup&) {}); }).message,
            "spawn: world size must be at least 1, got 0");
}

}  // namespace
}  // namespace dpscope
