// Every collective of the mpi backend against closed-form results (support/collective_cases.hpp,
// the cases the rank-thread suites check), on world sizes 1 .. mpirun's -np (mpi_world.hpp).
#include <gtest/gtest.h>

#include "mpi_world.hpp"
#include "support/collective_cases.hpp"

namespace dpscope {
namespace {

using test::join;
using test::mpi_rank;
using test::world_sizes;

using test::concatenated;
using test::expected;
using test::expecteds;
using test::input;
using test::inputs;
using test::kCounts;
using test::kLargeCount;
using test::kOps;

Tensor tensor_of(const std::vector<float>& values, const ProcessGroup& pg) {
  return Tensor::from_floats(values, {static_cast<int64_t>(values.size())}, pg.device());
}

class MpiCollectives : public ::testing::Test {
 protected:
  void SetUp() override { DPS_REQUIRE_MPIRUN(); }
};

TEST_F(MpiCollectives, AllReduceEveryOpAndSize) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    EXPECT_STREQ(pg->backend_name(), "mpi");
    EXPECT_EQ(pg->size(), n);
    EXPECT_EQ(pg->rank(), mpi_rank());
    for (ReduceOp op : kOps)
      for (int64_t count : kCounts) {
        Tensor t = tensor_of(inputs(op, pg->rank(), n, count), *pg);
        pg->all_reduce(t, {.op = op})->wait();
        EXPECT_EQ(t.to_vector(), expecteds(op, n, 0, count))
            << "n=" << n << " op=" << to_string(op) << " count=" << count;
      }
    Tensor large = tensor_of(inputs(ReduceOp::kSum, pg->rank(), n, kLargeCount), *pg);
    pg->all_reduce(large)->wait();
    EXPECT_EQ(large.to_vector(), expecteds(ReduceOp::kSum, n, 0, kLargeCount)) << "n=" << n;
  }
}

TEST_F(MpiCollectives, AllReducesOverlapLikeDdpBuckets) {
  // Issued back to back without waiting (DDP's buckets), completed in order on the comm worker.
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    std::vector<Tensor> buckets;
    std::vector<std::shared_ptr<Work>> works;
    for (int b = 0; b < 4; ++b) {
      buckets.push_back(tensor_of(inputs(ReduceOp::kAvg, pg->rank(), n, 1000 + b), *pg));
      works.push_back(pg->all_reduce(buckets.back(), {.op = ReduceOp::kAvg}));
    }
    for (int b = 0; b < 4; ++b) {
      works[static_cast<size_t>(b)]->wait();
      EXPECT_TRUE(works[static_cast<size_t>(b)]->is_success());
      EXPECT_EQ(works[static_cast<size_t>(b)]->sequence_number(), b);
      EXPECT_LE(works[static_cast<size_t>(b)]->start_ns(), works[static_cast<size_t>(b)]->end_ns());
      EXPECT_EQ(buckets[static_cast<size_t>(b)].to_vector(), expecteds(ReduceOp::kAvg, n, 0, 1000 + b));
    }
  }
}

TEST_F(MpiCollectives, AllReduceInt64) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    std::vector<int64_t> values = {int64_t{1} << 40, pg->rank(), -pg->rank()};
    Tensor t = Tensor::from_ints(values, {3}, pg->device());
    pg->all_reduce(t, {.op = ReduceOp::kSum})->wait();
    const int64_t s = int64_t{n} * (n - 1) / 2;
    EXPECT_EQ(t.i64()[0], n * (int64_t{1} << 40));
    EXPECT_EQ(t.i64()[1], s);
    EXPECT_EQ(t.i64()[2], -s);
  }
}

TEST_F(MpiCollectives, BroadcastFromEveryRoot) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    for (int root = 0; root < n; ++root)
      for (int64_t count : kCounts) {
        Tensor t = tensor_of(inputs(ReduceOp::kSum, pg->rank(), n, count), *pg);
        pg->broadcast(t, {.root = root})->wait();
        EXPECT_EQ(t.to_vector(), inputs(ReduceOp::kSum, root, n, count)) << "n=" << n << " root=" << root;
      }
  }
}

TEST_F(MpiCollectives, ReduceReachesTheRootOnly) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    for (int root : {0, n - 1})
      for (ReduceOp op : kOps) {
        const std::vector<float> mine = inputs(op, pg->rank(), n, 13);
        Tensor t = tensor_of(mine, *pg);
        pg->reduce(t, {.root = root, .op = op})->wait();
        if (pg->rank() == root) {
          EXPECT_EQ(t.to_vector(), expecteds(op, n, 0, 13)) << "n=" << n << " op=" << to_string(op);
        } else {
          EXPECT_EQ(t.to_vector(), mine) << "non-roots keep their tensor";
        }
      }
  }
}

TEST_F(MpiCollectives, AllGatherListAndFlat) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    for (int64_t count : kCounts) {
      const Tensor in = tensor_of(inputs(ReduceOp::kSum, pg->rank(), n, count), *pg);
      std::vector<Tensor> outs;
      for (int r = 0; r < n; ++r) outs.push_back(Tensor::zeros({count}, pg->device()));
      pg->all_gather(outs, in)->wait();
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(outs[static_cast<size_t>(r)].to_vector(), inputs(ReduceOp::kSum, r, n, count));
      Tensor flat = Tensor::zeros({count * n}, pg->device());
      pg->all_gather_into_tensor(flat, in)->wait();
      EXPECT_EQ(flat.to_vector(), concatenated(n, count)) << "n=" << n << " count=" << count;
    }
  }
}

// MPI_Ialltoall: output block i of rank r is rank i's input block r (inputs 1000 r + i).
TEST_F(MpiCollectives, AllToAllSingleSendsBlockJToRankJ) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    for (int64_t block : {int64_t{0}, int64_t{1}, int64_t{13}}) {
      const int64_t count = block * n;
      std::vector<float> mine(static_cast<size_t>(count)), want;
      for (int64_t i = 0; i < count; ++i)
        mine[static_cast<size_t>(i)] = static_cast<float>(1000 * pg->rank() + i);
      for (int i = 0; i < n; ++i)
        for (int64_t e = 0; e < block; ++e)
          want.push_back(static_cast<float>(1000 * i + pg->rank() * block + e));
      const Tensor in = tensor_of(mine, *pg);
      Tensor out = Tensor::zeros({count}, pg->device());
      pg->all_to_all_single(out, in)->wait();
      EXPECT_EQ(out.to_vector(), want) << "n=" << n << " block=" << block;
      Tensor same = tensor_of(mine, *pg);
      pg->all_to_all_single(same, same)->wait();
      EXPECT_EQ(same.to_vector(), want) << "in place, n=" << n << " block=" << block;
    }
  }
}

TEST_F(MpiCollectives, ReduceScatterListAndFlat) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    for (ReduceOp op : kOps)
      for (int64_t block : {int64_t{0}, int64_t{1}, int64_t{7}}) {
        // Rank r's full input is inputs(op, r, n, n * block); block k goes to rank k.
        const std::vector<float> full = inputs(op, pg->rank(), n, n * block);
        std::vector<Tensor> list;
        for (int k = 0; k < n; ++k)
          list.push_back(
              tensor_of(std::vector<float>(full.begin() + k * block, full.begin() + (k + 1) * block), *pg));
        Tensor out = Tensor::zeros({block}, pg->device());
        pg->reduce_scatter(out, list, {.op = op})->wait();
        const std::vector<float> mine = expecteds(op, n, pg->rank() * block, block);
        EXPECT_EQ(out.to_vector(), mine) << "list n=" << n << " op=" << to_string(op) << " block=" << block;
        Tensor flat_out = Tensor::zeros({block}, pg->device());
        pg->reduce_scatter_tensor(flat_out, tensor_of(full, *pg), {.op = op})->wait();
        EXPECT_EQ(flat_out.to_vector(), mine) << "flat n=" << n << " op=" << to_string(op);
      }
  }
}

TEST_F(MpiCollectives, ScatterAndGather) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    for (int root : {0, n - 1})
      for (int64_t count : kCounts) {
        std::vector<Tensor> parts;
        if (pg->rank() == root)
          for (int r = 0; r < n; ++r) parts.push_back(tensor_of(inputs(ReduceOp::kSum, r, n, count), *pg));
        Tensor mine = Tensor::zeros({count}, pg->device());
        pg->scatter(mine, parts, {.root = root})->wait();
        EXPECT_EQ(mine.to_vector(), inputs(ReduceOp::kSum, pg->rank(), n, count)) << "scatter n=" << n;

        std::vector<Tensor> gathered;
        if (pg->rank() == root)
          for (int r = 0; r < n; ++r) gathered.push_back(Tensor::zeros({count}, pg->device()));
        pg->gather(mine, gathered, {.root = root})->wait();
        if (pg->rank() == root) {
          for (int r = 0; r < n; ++r)
            EXPECT_EQ(gathered[static_cast<size_t>(r)].to_vector(), inputs(ReduceOp::kSum, r, n, count));
        }
      }
  }
}

TEST_F(MpiCollectives, BarrierAndSendRecvAroundTheRing) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg || n < 2) continue;
    pg->barrier()->wait();
    // Each rank sends to the right and receives from the left, twice, with two tags.
    const int right = (pg->rank() + 1) % n;
    const int left = (pg->rank() + n - 1) % n;
    for (int round = 0; round < 2; ++round) {
      const Tensor out = tensor_of(inputs(ReduceOp::kSum, pg->rank(), n, 100 + round), *pg);
      const auto sent = pg->send(out, right, {.tag = round});
      Tensor in = Tensor::zeros({100 + round}, pg->device());
      pg->recv(in, left, {.tag = round})->wait();
      sent->wait();
      EXPECT_TRUE(sent->is_completed());
      EXPECT_EQ(sent->sequence_number(), round);
      EXPECT_EQ(in.to_vector(), inputs(ReduceOp::kSum, left, n, 100 + round));
    }
    pg->barrier()->wait();
  }
}

TEST_F(MpiCollectives, NewGroupOfTheEvenRanks) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    std::vector<int> evens;
    for (int r = 0; r < n; r += 2) evens.push_back(r);
    const auto sub = pg->new_group(evens);
    ASSERT_EQ(sub != nullptr, pg->rank() % 2 == 0);
    if (sub) {
      const int m = static_cast<int>(evens.size());
      EXPECT_EQ(sub->size(), m);
      EXPECT_EQ(sub->rank(), pg->rank() / 2);
      Tensor t = tensor_of(inputs(ReduceOp::kSum, sub->rank(), m, 5), *sub);
      sub->all_reduce(t)->wait();
      EXPECT_EQ(t.to_vector(), expecteds(ReduceOp::kSum, m, 0, 5));
    }
    // The parent group goes on working after the split.
    Tensor t = tensor_of(inputs(ReduceOp::kMax, pg->rank(), n, 3), *pg);
    pg->all_reduce(t, {.op = ReduceOp::kMax})->wait();
    EXPECT_EQ(t.to_vector(), expecteds(ReduceOp::kMax, n, 0, 3));
  }
}

TEST_F(MpiCollectives, AlgorithmsAnOpDoesNotOfferAreRefused) {
  // Our schedules run where the sim backend has them (tests/mpi/mpi_schedules_test.cpp): all-gather
  // and reduce-scatter are rings only.
  const auto pg = join(1);
  if (!pg) return;
  Tensor input = Tensor::zeros({4}, pg->device());
  Tensor output = Tensor::zeros({4}, pg->device());
  try {
    pg->all_gather_into_tensor(output, input, {.algorithm = Algorithm::kTree})->wait();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(e.what(),
                 "all_gather: algorithm 'tree' is not available on backend 'mpi' (available: ring, auto)");
  }
  try {
    pg->reduce_scatter_tensor(output, input, {.algorithm = Algorithm::kNaive})->wait();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(
        e.what(),
        "reduce_scatter: algorithm 'naive' is not available on backend 'mpi' (available: ring, auto)");
  }
}

TEST_F(MpiCollectives, RankMustBeMpisAndWorldAtMostMpisSize) {
  const int me = mpi_rank();
  const int size = test::mpi_size();
  try {
    init_process_group({.backend = "mpi", .rank = (me + 1) % (size + 1), .world_size = size + 1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fmt::format("is more than the {} processes mpirun started", size)),
              std::string::npos)
        << e.what();
  }
  if (size < 2) return;
  try {
    init_process_group({.backend = "mpi", .rank = (me + 1) % size, .world_size = size});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(fmt::format("but this process is MPI rank {} of {}", me, size)),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dpscope
