// AnalyticCollectives and the analytic backend: one node equals the sim backend's simulated
// schedules; across nodes the alpha-beta closed forms, checked against numbers worked out here;
// the worlds it refuses, each with its one line.
#include "dpscope/comm/analytic_collectives.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "comm_test_util.hpp"
#include "dpscope/comm/spawn.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using ::testing::HasSubstr;

void expect_error(const std::function<void()>& f, ErrorKind kind, const std::string& message) {
  const testing::Outcome got = testing::error_of(f);
  EXPECT_EQ(got.kind, kind) << got.message;
  EXPECT_EQ(got.message, message);
}

// The round preset (alpha 1 us, 1 GB/s links, reductions of b bytes take b ns) as a cluster of
// 4-GPU nodes whose NICs move 0.5 GB/s after 2 us.
HardwarePreset round_cluster() {
  HardwarePreset p = test::round_preset();
  p.cluster.gpus_per_node = 4;
  p.cluster.nic = {"nic", 0.5e9, 2000.0};
  return p;
}

// How long one timing-only collective takes on the sim backend: from the common start to the
// last rank's end (a broadcast's root, or a ring rank with an empty chunk, finishes earlier).
int64_t sim_duration(int n, const HardwarePreset& preset, OpType op, Algorithm algo, int64_t count,
                     ReduceOp reduce = ReduceOp::kSum) {
  SimWorldOptions options = test::round_options();
  options.hardware = preset;
  std::atomic<int64_t> duration{0};
  spawn(
      n,
      [&](ProcessGroup& pg) {
        Tensor t = Tensor::meta({count}, pg.device());
        std::shared_ptr<Work> w = op == OpType::kAllReduce
                                      ? pg.all_reduce(t, {.op = reduce, .algorithm = algo})
                                      : pg.broadcast(t, {.root = 0, .algorithm = algo});
        w->wait();
        EXPECT_EQ(w->start_ns(), 0);
        int64_t seen = duration.load();
        while (w->end_ns() > seen && !duration.compare_exchange_weak(seen, w->end_ns())) {
        }
      },
      options);
  return duration;
}

TEST(AnalyticCollectives, OneNodeTakesExactlyTheSimBackendsTime) {
  const HardwarePreset preset = test::round_preset();
  for (int n : {2, 3, 4, 8}) {
    const AnalyticCollectives model(preset, n);
    EXPECT_EQ(model.nodes(), 1);
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kNaive, Algorithm::kAuto}) {
      for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{1} << 18}) {
        const CollectiveEstimate e =
            model.estimate({.op = OpType::kAllReduce, .algorithm = algo, .count = count});
        EXPECT_EQ(e.duration_ns, sim_duration(n, preset, OpType::kAllReduce, algo, count))
            << n << " GPUs, " << to_string(algo) << ", " << count << " floats";
      }
    }
    const CollectiveEstimate avg = model.estimate(
        {.op = OpType::kAllReduce, .algorithm = Algorithm::kRing, .count = 4096, .average = true});
    EXPECT_EQ(avg.duration_ns,
              sim_duration(n, preset, OpType::kAllReduce, Algorithm::kRing, 4096, ReduceOp::kAvg));
    EXPECT_EQ(model.estimate({.op = OpType::kBroadcast, .count = 4096}).duration_ns,
              sim_duration(n, preset, OpType::kBroadcast, Algorithm::kAuto, 4096));
  }
}

TEST(AnalyticCollectives, AFlatRingAcrossNodesRunsAtTheNicsPace) {
  const AnalyticCollectives model(round_cluster(), 16);  // 4 nodes of 4
  EXPECT_EQ(model.nodes(), 4);
  // 16,000 floats: chunks of 1,000 floats = 4,000 bytes. A step: 2 us + 4,000 B / 0.5 GB/s = 10 us
  // on the NIC (slower than 1 us + 4 us inside a node); 30 steps, 15 of them reduce 4,000 bytes (4 us).
  const CollectiveEstimate e =
      model.estimate({.op = OpType::kAllReduce, .algorithm = Algorithm::kRing, .count = 16000});
  EXPECT_EQ(e.algorithm, "ring");
  EXPECT_EQ(e.steps, 30);
  EXPECT_EQ(e.duration_ns, 30 * 10'000 + 15 * 4'000);
}

TEST(AnalyticCollectives, HierarchicalIsTheNodesRingsAroundARingOfNodes) {
  const HardwarePreset preset = round_cluster();
  const AnalyticCollectives model(preset, 16);
  const CollectiveEstimate e = model.estimate({.op = OpType::kAllReduce, .count = 16000});
  EXPECT_EQ(e.algorithm, "hierarchical");
  // Inside a node (4 GPUs): reduce-scatter of 16,000 floats leaves 4,000 per GPU; all-gather back.
  const int64_t inside =
      AnalyticCollectives(preset, 4)
          .estimate({.op = OpType::kAllReduce, .algorithm = Algorithm::kRing, .count = 16000})
          .duration_ns;
  // Across the 4 nodes, on every rail at once: a ring all-reduce of 4,000 floats, chunks of 1,000
  // floats (4,000 bytes): 6 steps of 10 us, 3 reductions of 4 us.
  const int64_t across = 6 * 10'000 + 3 * 4'000;
  EXPECT_EQ(e.duration_ns, inside + across);
  EXPECT_EQ(e.steps, 6 + 6);  // 3 + 3 inside, 6 across
  // Fewer, bigger steps than the flat ring: at 1,024 GPUs the ring's 2,046 latencies dominate.
  const AnalyticCollectives big(find_preset("h100-sxm"), 1024);
  const int64_t bucket = 25 << 18;  // 25 MiB of floats
  EXPECT_LT(
      big.estimate({.op = OpType::kAllReduce, .count = bucket}).duration_ns,
      big.estimate({.op = OpType::kAllReduce, .algorithm = Algorithm::kRing, .count = bucket}).duration_ns /
          2);
}

TEST(AnalyticCollectives, BusBandwidthAcrossNodesApproachesTheNics) {
  // nccl-tests' busbw of a large all-reduce, 2 (n-1)/n S / t: across many H100 nodes the
  // hierarchical algorithm is bound by the 50 GB/s NIC per GPU (x 0.8 usable), times g, since each
  // GPU's NIC carries only 1/g of the data: busbw tends to min(NVLink, g x NIC) in the limit.
  const AnalyticCollectives model(find_preset("h100-sxm"), 64);
  const int64_t count = int64_t{1} << 28;  // 1 GiB of floats
  const double seconds = model.estimate({.op = OpType::kAllReduce, .count = count}).duration_ns / 1e9;
  const double busbw = 2.0 * 63 / 64 * static_cast<double>(count * 4) / seconds;
  EXPECT_GT(busbw, 100e9);
  EXPECT_LT(busbw, 360e9);  // never faster than NVLink inside the node
}

TEST(AnalyticCollectives, RefusesWorldsItCannotDescribe) {
  expect_error([&] { (void)AnalyticCollectives(round_cluster(), 0); }, ErrorKind::kUsage,
               "analytic collectives: the world needs at least 1 GPU, got 0");
  expect_error([&] { (void)AnalyticCollectives(round_cluster(), 10); }, ErrorKind::kUsage,
               "10 GPUs are not a whole number of 4-GPU nodes (preset round); use a multiple of 4");
  expect_error([&] { (void)AnalyticCollectives(test::round_preset(), 16); }, ErrorKind::kUsage,
               "preset round describes one machine of at most 8 GPUs (it has no [cluster] table), so 16 "
               "GPUs cannot be simulated; use a preset with nodes to join (a100-sxm, h100-sxm, h200)");
  const AnalyticCollectives model(round_cluster(), 8);
  expect_error(
      [&] { (void)model.estimate({.op = OpType::kAllReduce, .algorithm = Algorithm::kTree, .count = 8}); },
      ErrorKind::kUnsupported,
      "all_reduce with the tree algorithm is not modelled across nodes (2 nodes of 4 GPUs): use ring, "
      "or auto for the hierarchical algorithm");
  expect_error([&] { (void)model.estimate({.op = OpType::kGather, .count = 8}); }, ErrorKind::kUnsupported,
               "gather is not modelled across nodes (2 nodes of 4 GPUs)");
}

// all_to_all across nodes without an [nccl] table: the pairwise exchange's n-1 rounds, each the
// slowest hop of one block (here 1,000 floats, the same 10 us step as the ring above). With data,
// every rank of the symmetric world holds this rank's input, so each output block is block 0.
TEST(AnalyticBackend, AllToAllTakesNMinusOneRoundsAndEveryBlockIsRankZerosOwn) {
  const auto model = std::make_shared<const AnalyticCollectives>(round_cluster(), 16);
  const CollectiveEstimate e = model->estimate({.op = OpType::kAllToAll, .count = 16000});
  EXPECT_EQ(e.algorithm, "pairwise");
  EXPECT_EQ(e.steps, 15);
  EXPECT_EQ(e.duration_ns, 15 * 10'000);
  const Device dev = Device::sim(0, round_cluster());
  ProcessGroup group(make_analytic_backend(dev, model));
  std::vector<float> mine(32);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(i);
  Tensor in = Tensor::from_floats(mine, {32}, dev), out = Tensor::zeros({32}, dev);
  group.all_to_all_single(out, in)->wait();
  const std::vector<float> got = out.to_vector();
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(got[2 * r], 0.0f) << r;
    EXPECT_EQ(got[2 * r + 1], 1.0f) << r;
  }
  group.all_to_all_single(in, in)->wait();  // in place
  EXPECT_EQ(in.to_vector(), got);
}

TEST(AnalyticBackend, ChargesRankZerosCommStreamAndTracesTheWholeWorld) {
  const auto model = std::make_shared<const AnalyticCollectives>(round_cluster(), 16);
  const Device dev = Device::sim(0, round_cluster());
  ProcessGroup group(make_analytic_backend(dev, model));
  EXPECT_EQ(group.size(), 16);
  EXPECT_EQ(group.rank(), 0);
  EXPECT_STREQ(group.backend_name(), "analytic");
  Tensor t = Tensor::meta({16000}, dev);
  const std::shared_ptr<Work> w = group.all_reduce(t, {.algorithm = Algorithm::kRing});
  EXPECT_EQ(w->end_ns() - w->start_ns(), 30 * 10'000 + 15 * 4'000);
  EXPECT_EQ(dev.clock_ns(StreamKind::kComm), w->end_ns());
  EXPECT_LT(dev.clock_ns(StreamKind::kCompute), w->end_ns());  // overlappable until wait()
  w->wait();
  EXPECT_EQ(dev.clock_ns(StreamKind::kCompute), w->end_ns());
  // Small tensors with data: what a world of 16 identical ranks computes.
  Tensor counts = Tensor::from_floats(std::vector<float>{3.0f, 5.0f}, {2}, dev);
  group.all_reduce(counts)->wait();
  EXPECT_EQ(counts.to_vector(), (std::vector<float>{48.0f, 80.0f}));
  group.all_reduce(counts, {.op = ReduceOp::kAvg})->wait();
  EXPECT_EQ(counts.to_vector(), (std::vector<float>{48.0f, 80.0f}));
  Tensor gathered = Tensor::zeros({32}, dev);
  group.all_gather_into_tensor(gathered, counts)->wait();
  const std::vector<float> all = gathered.to_vector();
  for (int r = 0; r < 16; ++r) EXPECT_EQ(all[2 * r + 1], 80.0f) << r;
  Tensor ints = Tensor::zeros({2}, dev, MemoryCategory::kBuffers, DType::kI64);
  expect_error([&] { group.all_reduce(ints); }, ErrorKind::kUnsupported,
               "the analytic backend's all_reduce computes float32 values only, got int64");
}

}  // namespace
}  // namespace dpscope
