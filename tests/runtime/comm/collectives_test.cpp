// What the sim backend adds to the backend suite (backend_suite_test.cpp, where every collective's
// results are checked on every backend): simulated clocks of send/recv and barrier, ranks bound to
// sim:rank, and init_process_group's short form with an explicit world and no store.
#include <gtest/gtest.h>

#include <thread>

#include "comm_test_util.hpp"
#include "dpscope/kernels/cpu_threads.hpp"
#include "support/thread_budget.hpp"

namespace dpscope {
namespace {

using test::round_options;

using Slots = std::vector<std::vector<float>>;
Slots run_ranks(int n, const std::function<void(ProcessGroup&, std::vector<float>&)>& fn) {
  Slots slots(n);
  spawn(
      n, [&](ProcessGroup& pg) { fn(pg, slots[pg.rank()]); }, round_options());
  return slots;
}

TEST(SendRecv, MovesATensorBetweenTwoRanksAndBothClocksAgree) {
  std::vector<int64_t> ends(2);
  const Slots got = run_ranks(2, [&](ProcessGroup& pg, std::vector<float>& out) {
    Tensor t = Tensor::full({250}, pg.rank() == 0 ? 3.5f : 0.0f, pg.device());
    std::shared_ptr<Work> w = pg.rank() == 0 ? pg.send(t, 1) : pg.recv(t, 0);
    w->wait();
    ends[pg.rank()] = pg.device().clock_ns(StreamKind::kCompute);
    out = {t.to_vector().front(), t.to_vector().back()};
  });
  EXPECT_EQ(got[1], (std::vector<float>{3.5f, 3.5f}));
  EXPECT_EQ(ends[0], 1000 + 1000);  // alpha + 1000 bytes at 1 byte/ns
  EXPECT_EQ(ends[1], ends[0]);
}

TEST(Barrier, AlignsEveryComputeStreamAtTheBarriersEnd) {
  std::vector<int64_t> clocks(4);
  run_ranks(4, [&](ProcessGroup& pg, std::vector<float>&) {
    pg.device().advance(StreamKind::kCompute, 1000 * pg.rank());
    pg.barrier()->wait();
    clocks[pg.rank()] = pg.device().clock_ns(StreamKind::kCompute);
  });
  // The latest rank arrives at 3000 ns; two rounds of signals follow. Ranks that hear from the
  // late rank only in the last round still end when it does.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(clocks[r], 3000 + 2 * 1000) << "rank " << r;
}

TEST(SpawnedRanks, AreBoundToSimDeviceOfTheirRank) {
  std::vector<std::string> names(3);
  spawn(
      3,
      [&](ProcessGroup& pg) {
        names[pg.rank()] = pg.device().name();
        EXPECT_EQ(pg.device().rank(), pg.rank());
        EXPECT_STREQ(pg.backend_name(), "sim");
      },
      round_options());
  EXPECT_EQ(names, (std::vector<std::string>{"sim:0", "sim:1", "sim:2"}));
}

TEST(SpawnedRanks, ShareTheCpusMatrixProductThreads) {
  // Rank threads multiply at once: each gets its share of the budget (kernels/cpu_threads.hpp).
  const testing::ThreadBudget budget(8);
  if (!budget.took_effect()) GTEST_SKIP() << "this OpenBLAS runs on one thread only (a serial build)";
  std::vector<int> seen(4);
  spawn(
      4, [&](ProcessGroup& pg) { seen[pg.rank()] = kernels::get_num_threads(); }, round_options());
  EXPECT_EQ(seen, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(kernels::get_num_threads(), 8);
}

TEST(InitProcessGroup, ThreadsOfOneProcessMeetThroughAnExplicitWorld) {
  auto world = SimWorld::create(2, round_options());
  std::vector<float> results(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      std::shared_ptr<ProcessGroup> pg = init_process_group("sim", rank, 2, {.world = world});
      Tensor t = Tensor::full({1}, rank + 1.0f, pg->device());
      pg->all_reduce(t)->wait();
      results[rank] = t.item();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results, (std::vector<float>{3.0f, 3.0f}));
}

}  // namespace
}  // namespace dpscope
