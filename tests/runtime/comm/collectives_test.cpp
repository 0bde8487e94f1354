// Every collective, every algorithm, against a naive reference: n in {1, 2, 3, 4, 5, 8}, counts
// that do not divide by n, count 0 and 1, every reduce op. Inputs are small integers (or +-1, +-2
// for products) so every order of operations gives the exact reference; results are compared
// bit for bit.
#include <gtest/gtest.h>

#include <thread>

#include "comm_test_util.hpp"

namespace dpscope {
namespace {

using test::pattern;
using test::pattern_values;
using test::reference_reduce;
using test::round_options;

constexpr int kRanks[] = {1, 2, 3, 4, 5, 8};
constexpr int64_t kCounts[] = {0, 1, 13, 1000};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct, ReduceOp::kMin,
                             ReduceOp::kMax};

// Runs fn on n ranks and returns what each rank stored in its slot.
using Slots = std::vector<std::vector<float>>;
Slots run_ranks(int n, const std::function<void(ProcessGroup&, std::vector<float>&)>& fn) {
  Slots slots(n);
  spawn(
      n, [&](ProcessGroup& pg) { fn(pg, slots[pg.rank()]); }, round_options());
  return slots;
}

TEST(AllReduce, EveryAlgorithmAndOpMatchesTheReference) {
  for (int n : kRanks) {
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kNaive, Algorithm::kAuto}) {
      for (ReduceOp op : kOps) {
        for (int64_t count : kCounts) {
          SCOPED_TRACE(fmt::format("n={} algo={} op={} count={}", n, to_string(algo), to_string(op), count));
          const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
            Tensor t = Tensor::from_floats(pattern_values(pg.rank(), count, op), {count}, pg.device());
            pg.all_reduce(t, {.op = op, .algorithm = algo, .slices = 2})->wait();
            out = t.to_vector();
          });
          const std::vector<float> expected = reference_reduce(n, count, op);
          for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], expected) << "rank " << r;
        }
      }
    }
  }
}

TEST(AllReduce, WorksOnInt64Tensors) {
  const Slots got = run_ranks(3, [](ProcessGroup& pg, std::vector<float>& out) {
    const std::vector<int64_t> values = {pg.rank() * 1000000000000LL, 1, -pg.rank()};
    Tensor t = Tensor::from_ints(values, {3}, pg.device());
    pg.all_reduce(t, {.op = ReduceOp::kSum})->wait();
    for (int64_t v : t.to_ints()) out.push_back(static_cast<float>(v == 3000000000000LL ? 1 : v));
  });
  for (const auto& v : got) EXPECT_EQ(v, (std::vector<float>{1.0f, 3.0f, -3.0f}));
}

TEST(Broadcast, EveryAlgorithmCopiesTheRootEverywhere) {
  for (int n : kRanks) {
    for (Algorithm algo : {Algorithm::kTree, Algorithm::kRing, Algorithm::kNaive}) {
      for (int64_t count : kCounts) {
        for (int root = 0; root < n; root += 2) {
          SCOPED_TRACE(fmt::format("n={} algo={} count={} root={}", n, to_string(algo), count, root));
          const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
            Tensor t =
                Tensor::from_floats(pattern_values(pg.rank(), count, ReduceOp::kSum), {count}, pg.device());
            pg.broadcast(t, {.root = root, .algorithm = algo, .slices = 3})->wait();
            out = t.to_vector();
          });
          for (int r = 0; r < n; ++r)
            EXPECT_EQ(got[r], pattern_values(root, count, ReduceOp::kSum)) << "rank " << r;
        }
      }
    }
  }
}

TEST(Reduce, TheRootGetsTheReductionAndOthersKeepTheirInput) {
  for (int n : kRanks) {
    for (Algorithm algo : {Algorithm::kTree, Algorithm::kRing, Algorithm::kNaive}) {
      for (ReduceOp op : kOps) {
        for (int64_t count : {int64_t{1}, int64_t{13}}) {
          const int root = n - 1;
          SCOPED_TRACE(fmt::format("n={} algo={} op={} count={}", n, to_string(algo), to_string(op), count));
          const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
            Tensor t = Tensor::from_floats(pattern_values(pg.rank(), count, op), {count}, pg.device());
            pg.reduce(t, {.root = root, .op = op, .algorithm = algo, .slices = 2})->wait();
            out = t.to_vector();
          });
          for (int r = 0; r < n; ++r)
            EXPECT_EQ(got[r], r == root ? reference_reduce(n, count, op) : pattern_values(r, count, op)) << r;
        }
      }
    }
  }
}

TEST(AllGather, ListAndFlatFormsCollectEveryRanksInput) {
  for (int n : kRanks) {
    for (int64_t count : kCounts) {
      SCOPED_TRACE(fmt::format("n={} count={}", n, count));
      const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
        Tensor input =
            Tensor::from_floats(pattern_values(pg.rank(), count, ReduceOp::kSum), {count}, pg.device());
        std::vector<Tensor> outputs;
        for (int r = 0; r < n; ++r) outputs.push_back(Tensor::full({count}, -99.0f, pg.device()));
        pg.all_gather(outputs, input, {.slices = 2})->wait();
        Tensor flat = Tensor::zeros({count * n}, pg.device());
        pg.all_gather_into_tensor(flat, input)->wait();
        for (const Tensor& t : outputs)
          for (float v : t.to_vector()) out.push_back(v);
        EXPECT_EQ(flat.to_vector(), out);
      });
      std::vector<float> expected;
      for (int r = 0; r < n; ++r)
        for (float v : pattern_values(r, count, ReduceOp::kSum)) expected.push_back(v);
      for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], expected) << "rank " << r;
    }
  }
}

TEST(ReduceScatter, ListAndFlatFormsLeaveEachRankItsReducedBlock) {
  for (int n : kRanks) {
    for (ReduceOp op : kOps) {
      for (int64_t block : {int64_t{0}, int64_t{1}, int64_t{13}}) {
        SCOPED_TRACE(fmt::format("n={} op={} block={}", n, to_string(op), block));
        const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
          const std::vector<float> all = pattern_values(pg.rank(), block * n, op);
          Tensor flat = Tensor::from_floats(all, {block * n}, pg.device());
          std::vector<Tensor> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(flat.rows(r * block, block).clone());
          Tensor a = Tensor::zeros({block}, pg.device()), b = Tensor::zeros({block}, pg.device());
          pg.reduce_scatter(a, inputs, {.op = op, .slices = 3})->wait();
          pg.reduce_scatter_tensor(b, flat, {.op = op})->wait();
          EXPECT_EQ(a.to_vector(), b.to_vector());
          EXPECT_EQ(flat.to_vector(), all) << "inputs must stay unchanged";
          out = a.to_vector();
        });
        const std::vector<float> full = reference_reduce(n, block * n, op);
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(got[r], std::vector<float>(full.begin() + r * block, full.begin() + (r + 1) * block))
              << r;
      }
    }
  }
}

TEST(ScatterGather, RoundTripThroughTheRoot) {
  for (int n : kRanks) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}}) {
      const int root = n / 2;
      SCOPED_TRACE(fmt::format("n={} count={} root={}", n, count, root));
      const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
        std::vector<Tensor> pieces;
        if (pg.rank() == root)
          for (int r = 0; r < n; ++r)
            pieces.push_back(
                Tensor::from_floats(pattern_values(r, count, ReduceOp::kSum), {count}, pg.device()));
        Tensor mine = Tensor::zeros({count}, pg.device());
        pg.scatter(mine, pieces, {.root = root})->wait();
        out = mine.to_vector();
        std::vector<Tensor> gathered;
        if (pg.rank() == root)
          for (int r = 0; r < n; ++r) gathered.push_back(Tensor::zeros({count}, pg.device()));
        pg.gather(mine, gathered, {.root = root})->wait();
        for (int r = 0; r < static_cast<int>(gathered.size()); ++r)
          EXPECT_EQ(gathered[r].to_vector(), pattern_values(r, count, ReduceOp::kSum));
      });
      for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], pattern_values(r, count, ReduceOp::kSum)) << "rank " << r;
    }
  }
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

TEST(SendRecv, MessagesWithTheSameTagArriveInOrder) {
  const Slots got = run_ranks(2, [](ProcessGroup& pg, std::vector<float>& out) {
    if (pg.rank() == 0) {
      std::vector<std::shared_ptr<Work>> works;
      for (int i = 0; i < 3; ++i)
        works.push_back(pg.send(Tensor::full({1}, static_cast<float>(i), pg.device()), 1));
      for (auto& w : works) w->wait();
    } else {
      for (int i = 0; i < 3; ++i) {
        Tensor t = Tensor::zeros({1}, pg.device());
        pg.recv(t, 0)->wait();
        out.push_back(t.item());
      }
    }
  });
  EXPECT_EQ(got[1], (std::vector<float>{0.0f, 1.0f, 2.0f}));
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

TEST(SubGroups, MembersReduceAmongThemselvesAndOthersGetNull) {
  const Slots got = run_ranks(5, [](ProcessGroup& pg, std::vector<float>& out) {
    std::shared_ptr<ProcessGroup> odd = pg.new_group({3, 1});
    std::shared_ptr<ProcessGroup> even = pg.new_group({0, 2, 4});
    Tensor t = Tensor::full({4}, static_cast<float>(pg.rank()), pg.device());
    if (pg.rank() % 2 == 1) {
      ASSERT_NE(odd, nullptr);
      EXPECT_EQ(even, nullptr);
      EXPECT_EQ(odd->size(), 2);
      EXPECT_EQ(odd->rank(), pg.rank() / 2);  // sorted: world rank 1 -> 0, 3 -> 1
      odd->all_reduce(t)->wait();
    } else {
      ASSERT_NE(even, nullptr);
      EXPECT_EQ(odd, nullptr);
      EXPECT_EQ(even->size(), 3);
      even->all_reduce(t)->wait();
      even->broadcast(t, {.root = 2})->wait();  // group rank 2 = world rank 4
    }
    pg.all_reduce(t, {.op = ReduceOp::kMax})->wait();  // the world group still works afterwards
    out = t.to_vector();
  });
  for (int r = 0; r < 5; ++r) EXPECT_EQ(got[r], std::vector<float>(4, 6.0f)) << "rank " << r;
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
