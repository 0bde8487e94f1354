// Every collective on every process-group backend built (backend_cases.hpp), against closed-form
// results: world sizes 1, 2, 3, 4, 5, 8; counts 0, 1, odd and large; every ReduceOp.
//
// Inputs: rank r, element i holds r * n + i (n ranks), so with S = n(n-1)/2 the results are
//   sum n*S + n*i,  avg S + i,  min i,  max (n-1)*n + i
// (integers below 2^24: exact in float32 whatever the order of additions, so compared bit for bit).
// For products rank r holds 2 at elements where i % n == r and -1 elsewhere: the product is
// 2 * (-1)^(n-1) everywhere, and a rank missing or counted twice changes it.
#include <gtest/gtest.h>

#include <atomic>

#include "backend_cases.hpp"
#include "comm_test_util.hpp"
#include "support/collective_cases.hpp"

namespace dpscope {
namespace {

using test::BackendSuite;
using test::round_options;
using test::size_skip_reason;

constexpr int kRanks[] = {1, 2, 3, 4, 5, 8};
using test::concatenated;
using test::expected;
using test::expecteds;
using test::input;
using test::inputs;
using test::kCounts;
using test::kLargeCount;
using test::kOps;

using Slots = std::vector<std::vector<float>>;

class Collectives : public BackendSuite {
 protected:
  // Runs fn on n ranks of this backend and returns what each rank stored in its slot.
  Slots run_ranks(int n, const std::function<void(ProcessGroup&, std::vector<float>&)>& fn) {
    Slots slots(static_cast<size_t>(n));
    spawn_ranks(test::init_options(GetParam(), n, round_options()),
                [&](ProcessGroup& pg) { fn(pg, slots[static_cast<size_t>(pg.rank())]); });
    return slots;
  }
};

TEST_P(Collectives, AllReduceEveryOpAndSize) {
  for (int n : kRanks) {
    if (!fits(n)) continue;
    for (ReduceOp op : kOps) {
      for (int64_t count : kCounts) {
        SCOPED_TRACE(fmt::format("n={} op={} count={}", n, to_string(op), count));
        const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
          Tensor t = Tensor::from_floats(inputs(op, pg.rank(), n, count), {count}, pg.device());
          pg.all_reduce(t, {.op = op, .slices = 2})->wait();
          out = t.to_vector();
        });
        for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], expecteds(op, n, 0, count)) << "rank " << r;
      }
    }
  }
}

TEST_P(Collectives, AllReduceLargeTensors) {
  for (int n : {2, 5, 8}) {
    if (!fits(n)) continue;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      SCOPED_TRACE(fmt::format("n={} op={}", n, to_string(op)));
      const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
        Tensor t = Tensor::from_floats(inputs(op, pg.rank(), n, kLargeCount), {kLargeCount}, pg.device());
        pg.all_reduce(t, {.op = op})->wait();
        out = t.to_vector();
      });
      const std::vector<float> want = expecteds(op, n, 0, kLargeCount);
      for (int r = 0; r < n; ++r) EXPECT_TRUE(got[r] == want) << "rank " << r;
    }
  }
}

TEST_P(Collectives, AllReduceOnInt64Tensors) {
  if (!fits(3)) GTEST_SKIP() << size_skip_reason(GetParam(), 3);
  const Slots got = run_ranks(3, [](ProcessGroup& pg, std::vector<float>& out) {
    const std::vector<int64_t> values = {pg.rank() * 1000000000000LL, 1, -pg.rank()};
    Tensor t = Tensor::from_ints(values, {3}, pg.device());
    pg.all_reduce(t, {.op = ReduceOp::kSum})->wait();
    // 3e12 does not fit a float exactly: report whether it is exact instead.
    for (int64_t v : t.to_ints()) out.push_back(static_cast<float>(v == 3000000000000LL ? 1 : v));
  });
  for (const auto& v : got) EXPECT_EQ(v, (std::vector<float>{1.0f, 3.0f, -3.0f}));
}

TEST_P(Collectives, BroadcastCopiesTheRootEverywhere) {
  for (int n : kRanks) {
    if (!fits(n)) continue;
    for (int64_t count : kCounts) {
      for (int root = 0; root < n; root += 2) {
        SCOPED_TRACE(fmt::format("n={} count={} root={}", n, count, root));
        const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
          Tensor t = Tensor::from_floats(inputs(ReduceOp::kSum, pg.rank(), n, count), {count}, pg.device());
          pg.broadcast(t, {.root = root, .slices = 3})->wait();
          out = t.to_vector();
        });
        for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], inputs(ReduceOp::kSum, root, n, count)) << "rank " << r;
      }
    }
  }
}

TEST_P(Collectives, ReduceLeavesTheResultOnTheRootAndOthersUnchanged) {
  for (int n : kRanks) {
    if (!fits(n)) continue;
    for (ReduceOp op : kOps) {
      for (int64_t count : {int64_t{1}, int64_t{13}}) {
        const int root = n - 1;
        SCOPED_TRACE(fmt::format("n={} op={} count={}", n, to_string(op), count));
        const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
          Tensor t = Tensor::from_floats(inputs(op, pg.rank(), n, count), {count}, pg.device());
          pg.reduce(t, {.root = root, .op = op, .slices = 2})->wait();
          out = t.to_vector();
        });
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(got[r], r == root ? expecteds(op, n, 0, count) : inputs(op, r, n, count)) << "rank " << r;
      }
    }
  }
}

TEST_P(Collectives, AllGatherListAndFlatFormsCollectEveryRank) {
  for (int n : kRanks) {
    if (!fits(n)) continue;
    for (int64_t count : kCounts) {
      SCOPED_TRACE(fmt::format("n={} count={}", n, count));
      const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
        Tensor input = Tensor::from_floats(inputs(ReduceOp::kSum, pg.rank(), n, count), {count}, pg.device());
        std::vector<Tensor> outputs;
        for (int r = 0; r < n; ++r) outputs.push_back(Tensor::full({count}, -99.0f, pg.device()));
        pg.all_gather(outputs, input, {.slices = 2})->wait();
        Tensor flat = Tensor::zeros({count * n}, pg.device());
        pg.all_gather_into_tensor(flat, input)->wait();
        for (const Tensor& t : outputs)
          for (float v : t.to_vector()) out.push_back(v);
        EXPECT_EQ(flat.to_vector(), out);
      });
      for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], concatenated(n, count)) << "rank " << r;
    }
  }
}

TEST_P(Collectives, ReduceScatterListAndFlatFormsLeaveEachRankItsBlock) {
  for (int n : kRanks) {
    if (!fits(n)) continue;
    for (ReduceOp op : kOps) {
      for (int64_t block : {int64_t{0}, int64_t{1}, int64_t{13}}) {
        SCOPED_TRACE(fmt::format("n={} op={} block={}", n, to_string(op), block));
        const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
          const std::vector<float> all = inputs(op, pg.rank(), n, block * n);
          Tensor flat = Tensor::from_floats(all, {block * n}, pg.device());
          std::vector<Tensor> pieces;
          for (int r = 0; r < n; ++r) pieces.push_back(flat.rows(r * block, block).clone());
          Tensor a = Tensor::zeros({block}, pg.device()), b = Tensor::zeros({block}, pg.device());
          pg.reduce_scatter(a, pieces, {.op = op, .slices = 3})->wait();
          pg.reduce_scatter_tensor(b, flat, {.op = op})->wait();
          EXPECT_EQ(a.to_vector(), b.to_vector());
          EXPECT_EQ(flat.to_vector(), all) << "inputs must stay unchanged";
          out = a.to_vector();
        });
        for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], expecteds(op, n, r * block, block)) << "rank " << r;
      }
    }
  }
}

// all_to_all_single with equal splits: rank r, element i holds 1000 r + i, so output block i of
// rank r (from rank i) must hold 1000 i + r * block + e. Also in place (output = input), where the
// schedule must not read a block it already overwrote, and on a 2-D tensor split by rows.
TEST_P(Collectives, AllToAllSingleSendsBlockJToRankJ) {
  for (int n : kRanks) {
    if (!fits(n)) continue;
    for (int64_t block : {int64_t{0}, int64_t{1}, int64_t{13}}) {
      SCOPED_TRACE(fmt::format("n={} block={}", n, block));
      const int64_t count = block * n;
      const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
        std::vector<float> mine(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) mine[i] = static_cast<float>(1000 * pg.rank() + i);
        Tensor input = Tensor::from_floats(mine, {count}, pg.device());
        Tensor output = Tensor::full({count}, -99.0f, pg.device());
        pg.all_to_all_single(output, input)->wait();
        EXPECT_EQ(input.to_vector(), mine) << "the input must stay unchanged";
        Tensor in_place = Tensor::from_floats(mine, {count}, pg.device());
        pg.all_to_all_single(in_place, in_place)->wait();
        EXPECT_EQ(in_place.to_vector(), output.to_vector()) << "in place";
        Tensor rows = Tensor::from_floats(mine, {n, block}, pg.device());
        Tensor rows_out = Tensor::zeros({n, block}, pg.device());
        pg.all_to_all_single(rows_out, rows)->wait();
        EXPECT_EQ(rows_out.to_vector(), output.to_vector()) << "2-D, split by rows";
        out = output.to_vector();
      });
      for (int r = 0; r < n; ++r) {
        std::vector<float> want;
        for (int i = 0; i < n; ++i)
          for (int64_t e = 0; e < block; ++e) want.push_back(static_cast<float>(1000 * i + r * block + e));
        EXPECT_EQ(got[r], want) << "rank " << r;
      }
    }
  }
}

TEST_P(Collectives, ScatterThenGatherRoundTripsThroughTheRoot) {
  for (int n : kRanks) {
    if (!fits(n)) continue;
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}}) {
      const int root = n / 2;
      SCOPED_TRACE(fmt::format("n={} count={} root={}", n, count, root));
      const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
        std::vector<Tensor> pieces;
        if (pg.rank() == root)
          for (int r = 0; r < n; ++r)
            pieces.push_back(Tensor::from_floats(inputs(ReduceOp::kSum, r, n, count), {count}, pg.device()));
        Tensor mine = Tensor::zeros({count}, pg.device());
        pg.scatter(mine, pieces, {.root = root})->wait();
        out = mine.to_vector();
        std::vector<Tensor> gathered;
        if (pg.rank() == root)
          for (int r = 0; r < n; ++r) gathered.push_back(Tensor::zeros({count}, pg.device()));
        pg.gather(mine, gathered, {.root = root})->wait();
        std::vector<float> all;
        for (const Tensor& t : gathered)
          for (float v : t.to_vector()) all.push_back(v);
        if (pg.rank() == root) {
          EXPECT_EQ(all, concatenated(n, count));
        }
      });
      for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], inputs(ReduceOp::kSum, r, n, count)) << "rank " << r;
    }
  }
}

TEST_P(Collectives, BarrierReturnsOnlyOnceEveryRankArrived) {
  for (int n : kRanks) {
    if (!fits(n)) continue;
    std::atomic<int> arrived{0};
    const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
      ++arrived;
      pg.barrier()->wait();
      out = {static_cast<float>(arrived.load())};
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], std::vector<float>{static_cast<float>(n)}) << "n=" << n;
  }
}

TEST_P(Collectives, SendRecvPassesEveryRanksTensorAroundARing) {
  for (int n : {2, 3, 5}) {
    if (!fits(n)) continue;
    for (int64_t count : kCounts) {
      SCOPED_TRACE(fmt::format("n={} count={}", n, count));
      const Slots got = run_ranks(n, [&](ProcessGroup& pg, std::vector<float>& out) {
        const int next = (pg.rank() + 1) % n, prev = (pg.rank() + n - 1) % n;
        Tensor mine = Tensor::from_floats(inputs(ReduceOp::kSum, pg.rank(), n, count), {count}, pg.device());
        Tensor theirs = Tensor::zeros({count}, pg.device());
        std::shared_ptr<Work> sent = pg.send(mine, next);  // returns at once; completes on receipt
        pg.recv(theirs, prev)->wait();
        sent->wait();
        out = theirs.to_vector();
      });
      for (int r = 0; r < n; ++r) EXPECT_EQ(got[r], inputs(ReduceOp::kSum, (r + n - 1) % n, n, count)) << r;
    }
  }
}

TEST_P(Collectives, MessagesWithTheSameTagArriveInOrder) {
  if (!fits(2)) GTEST_SKIP() << size_skip_reason(GetParam(), 2);
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

TEST_P(Collectives, SubGroupsReduceAmongTheirMembersAndOthersGetNull) {
  if (!fits(5)) GTEST_SKIP() << size_skip_reason(GetParam(), 5);
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

INSTANTIATE_TEST_SUITE_P(Backends, Collectives, ::testing::ValuesIn(test::backend_cases()), test::case_name);

}  // namespace
}  // namespace dpscope
