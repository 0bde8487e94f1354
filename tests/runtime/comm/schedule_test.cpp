// Schedules and the network timing model, without threads: the algorithms' structure, the
// data-step invariants that make results deterministic, routes and link sharing per topology,
// and closed-form times (ring: 2(n-1)a + 2(n-1)/n S/B + (n-1)/n S g, exactly, in whole ns).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>

#include "comm_test_util.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/comm/schedule.hpp"

namespace dpscope {
namespace {

using test::round_preset;
using test::schedule_violation;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<int> identity(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

ScheduleTiming time_on(const Schedule& s, const NetworkModel& net, int n, uint64_t elem_bytes = 1) {
  std::vector<int> gpus = identity(n);
  std::vector<int64_t> starts(n, 0);
  return simulate_schedule(s, net, gpus, starts, elem_bytes);
}

int64_t makespan(const ScheduleTiming& t) {
  return *std::max_element(t.rank_end_ns.begin(), t.rank_end_ns.end());
}

TEST(SplitSegment, PartsCoverTheRangeAndDifferByAtMostOne) {
  int64_t next = 0;
  for (int i = 0; i < 4; ++i) {
    const Segment s = split_segment(10, 4, i);
    EXPECT_EQ(s.offset_elems, next);
    EXPECT_TRUE(s.count_elems == 2 || s.count_elems == 3);
    next += s.count_elems;
  }
  EXPECT_EQ(next, 10);
  EXPECT_EQ(split_segment(1, 4, 0).count_elems, 0);
  EXPECT_EQ(split_segment(1, 4, 3).count_elems, 1);
}

TEST(Schedules, EveryAlgorithmKeepsTheDataStepRules) {
  for (int n = 1; n <= 9; ++n) {
    const std::vector<int> ring = identity(n);
    for (int64_t count : {0, 1, 7, 64}) {
      const std::vector<int64_t> single(n, count), blocks(n, count * n);
      for (int slices : {1, 3}) {
        SCOPED_TRACE(fmt::format("n={} count={} slices={}", n, count, slices));
        EXPECT_EQ(schedule_violation(ring_all_reduce(ring, count, slices), single), "");
        EXPECT_EQ(schedule_violation(tree_all_reduce(n, count, slices), single), "");
        EXPECT_EQ(schedule_violation(ring_all_gather(ring, count, slices), blocks), "");
        EXPECT_EQ(schedule_violation(ring_reduce_scatter(ring, count, slices), blocks), "");
        for (int root = 0; root < n; root += 2) {
          EXPECT_EQ(schedule_violation(ring_broadcast(ring, root, count, slices), single), "");
          EXPECT_EQ(schedule_violation(ring_reduce(ring, root, count, slices), single), "");
        }
      }
      EXPECT_EQ(schedule_violation(naive_all_reduce(n, count), single), "");
      for (int root = 0; root < n; ++root) {
        EXPECT_EQ(schedule_violation(tree_broadcast(n, root, count), single), "");
        EXPECT_EQ(schedule_violation(tree_reduce(n, root, count), single), "");
        EXPECT_EQ(schedule_violation(naive_broadcast(n, root, count), single), "");
        EXPECT_EQ(schedule_violation(naive_reduce(n, root, count), single), "");
        std::vector<int64_t> root_blocks(n, count);
        root_blocks[root] = count * n;
        EXPECT_EQ(schedule_violation(naive_scatter(n, root, count), root_blocks), "");
        EXPECT_EQ(schedule_violation(naive_gather(n, root, count), root_blocks), "");
      }
    }
  }
}

TEST(Schedules, RingAllReduceHasTwoTimesNMinusOneStagesOfOneChunkPerRank) {
  const int n = 5;
  const Schedule s = ring_all_reduce(identity(n), 100, 1);
  ASSERT_EQ(s.ops.size(), static_cast<size_t>(2 * (n - 1) * n));
  EXPECT_EQ(s.steps, 2 * (n - 1));
  EXPECT_EQ(s.phases, (std::vector<std::string>{"reduce-scatter", "all-gather"}));
  for (const CommOp& op : s.ops) {
    EXPECT_EQ(op.dst, (op.src + 1) % n);
    EXPECT_EQ(op.reduce, op.algo_step < n - 1);
    EXPECT_EQ(op.from.count_elems, 20);
  }
  // Stage 0: rank i sends its own chunk i; the last reduce-scatter stage leaves rank i with chunk i+1.
  EXPECT_EQ(s.ops[0].from.offset_elems, 0);
  EXPECT_EQ(s.ops[3].from.offset_elems, 60);
}

TEST(Schedules, TreeAllReduceUsesTwoMirroredTreesOverHalvesOfTheData) {
  const Schedule s = tree_all_reduce(8, 64, 1);
  // Each tree: 7 edges up (reduce) and 7 edges down (broadcast), over 32 elements.
  ASSERT_EQ(s.ops.size(), 28u);
  int interior_in_both = 0;
  for (int r = 0; r < 8; ++r) {
    bool parent[2] = {false, false};
    for (const CommOp& op : s.ops)
      if (op.phase == 0 && op.dst == r) parent[op.from.offset_elems == 0 ? 0 : 1] = true;
    interior_in_both += parent[0] && parent[1] ? 1 : 0;
  }
  EXPECT_EQ(interior_in_both, 0) << "a rank interior in one tree must be a leaf in the other";
}

TEST(Schedules, BinomialBroadcastDoublesTheHoldersEachRound) {
  const Schedule s = tree_broadcast(8, 3, 10);
  EXPECT_EQ(s.ops.size(), 7u);
  EXPECT_EQ(s.steps, 3);
  int per_round[3] = {0, 0, 0};
  for (const CommOp& op : s.ops) ++per_round[op.step];
  EXPECT_EQ(per_round[0], 1);
  EXPECT_EQ(per_round[1], 2);
  EXPECT_EQ(per_round[2], 4);
  EXPECT_EQ(s.ops[0].src, 3);
}

TEST(Schedules, DisseminationBarrierTakesCeilLog2Rounds) {
  EXPECT_EQ(dissemination_barrier(1).ops.size(), 0u);
  EXPECT_EQ(dissemination_barrier(5).steps, 3);
  EXPECT_EQ(dissemination_barrier(5).ops.size(), 15u);
  for (const CommOp& op : dissemination_barrier(4).ops) EXPECT_TRUE(op.signal);
}

// Pairwise all-to-all: n-1 rounds; in round k rank r sends its input block (r+k) mod n to that
// rank, into output block n+r; every rank sends once and receives once per round, and every
// ordered pair of distinct ranks exchanges exactly one block.
TEST(Schedules, PairwiseAllToAllSendsBlockJToRankJInNMinusOneRounds) {
  for (int n = 1; n <= 9; ++n)
    for (int64_t block : {0, 1, 7}) {
      SCOPED_TRACE(fmt::format("n={} block={}", n, block));
      const Schedule s = pairwise_all_to_all(n, block);
      EXPECT_EQ(schedule_violation(s, std::vector<int64_t>(n, 2 * n * block)), "");
      EXPECT_EQ(s.steps, n - 1);
      EXPECT_STREQ(s.algorithm, "pairwise");
      ASSERT_EQ(s.ops.size(), static_cast<size_t>(n * (n - 1)));
      std::set<std::pair<int, int>> pairs;
      for (const CommOp& op : s.ops) {
        const int k = op.step + 1;
        EXPECT_EQ(op.dst, (op.src + k) % n);
        EXPECT_EQ(op.from.offset_elems, op.dst * block);
        EXPECT_EQ(op.to.offset_elems, (n + op.src) * block);
        EXPECT_EQ(op.from.count_elems, block);
        EXPECT_FALSE(op.reduce);
        pairs.insert({op.src, op.dst});
      }
      EXPECT_EQ(pairs.size(), static_cast<size_t>(n * (n - 1)));
    }
}

TEST(PipelineSlices, OnePerMebibyteOfChunkBetweenOneAndSixteen) {
  EXPECT_EQ(pipeline_slices(0, 100), 1);
  EXPECT_EQ(pipeline_slices(0, 3u << 20), 3);
  EXPECT_EQ(pipeline_slices(0, 1ull << 34), 16);
  EXPECT_EQ(pipeline_slices(5, 1ull << 34), 5);
}

// ---- network ----

TEST(Network, NvswitchGivesEveryGpuAFullDuplexPort) {
  const NetworkModel net(round_preset(), 4);
  EXPECT_EQ(net.links().size(), 8u);
  const NetworkRoute& r = net.route(1, 3);
  EXPECT_EQ(r.hop_count, 2);
  EXPECT_EQ(r.latency_ns, 1000);
  EXPECT_EQ(net.uncontended_transfer_ns(1, 3, 5000), 1000 + 5000);
  EXPECT_EQ(net.ring_order(identity(4)), identity(4));
}

TEST(Network, ProtocolEfficiencyScalesEveryLink) {
  HardwarePreset p = round_preset();
  p.network.protocol_efficiency = 0.5;
  const NetworkModel net(p, 2);
  EXPECT_EQ(net.uncontended_transfer_ns(0, 1, 5000), 1000 + 10000);
}

TEST(Network, PcieHostRoutesAcrossSwitchesThroughSharedUplinks) {
  HardwarePreset p = round_preset("pcie-host");
  p.network.gpus_per_switch = 2;
  p.network.switch_uplink = {"pcie-uplink", 1e9, 500.0};
  const NetworkModel net(p, 4);
  EXPECT_EQ(net.route(0, 1).hop_count, 2);
  EXPECT_EQ(net.route(0, 1).latency_ns, 1000);
  EXPECT_EQ(net.route(0, 2).hop_count, 4);
  EXPECT_EQ(net.route(0, 2).latency_ns, 1500);

  // Two transfers from switch 0 to switch 1 share its uplink: each gets half the bandwidth.
  auto two_transfers = [](int a_src, int a_dst, int b_src, int b_dst) {
    Schedule s;
    s.algorithm = "test";
    s.phases = {"x"};
    CommOp a;
    a.src = a_src;
    a.dst = a_dst;
    a.from = a.to = {0, 4000};
    CommOp b = a;
    b.src = b_src;
    b.dst = b_dst;
    s.ops = {a, b};
    s.steps = 1;
    return s;
  };
  const ScheduleTiming across = time_on(two_transfers(0, 2, 1, 3), net, 4);
  EXPECT_EQ(across.ops[0].arrival_ns, 1500 + 8000);
  EXPECT_EQ(across.ops[1].arrival_ns, 1500 + 8000);
  const ScheduleTiming within = time_on(two_transfers(0, 1, 2, 3), net, 4);
  EXPECT_EQ(within.ops[0].arrival_ns, 1000 + 4000);
  EXPECT_EQ(within.ops[1].arrival_ns, 1000 + 4000);
}

// Without peer access (GeForce cards) NCCL's SHM transport goes through host memory, so even two
// GPUs under one switch cross its uplink up and down, and two such transfers share it.
TEST(Network, PcieWithoutPeerAccessGoesThroughHostMemoryEvenUnderOneSwitch) {
  HardwarePreset p = round_preset("pcie-host");
  p.network.gpus_per_switch = 2;
  p.network.switch_uplink = {"pcie-uplink", 1e9, 500.0};
  p.network.peer_to_peer = false;
  const NetworkModel net(p, 2);
  EXPECT_EQ(net.route(0, 1).hop_count, 4);
  EXPECT_EQ(net.route(0, 1).latency_ns, 1500);
  Schedule s;
  s.algorithm = "test";
  s.phases = {"x"};
  CommOp a;
  a.src = 0;
  a.dst = 1;
  a.from = a.to = {0, 4000};
  CommOp b = a;
  b.src = 1;
  b.dst = 0;
  s.ops = {a, b};
  s.steps = 1;
  // 4000 bytes each way; each direction of the uplink carries both: 8000 ns instead of 4000.
  const ScheduleTiming both = time_on(s, net, 2);
  EXPECT_EQ(both.ops[0].arrival_ns, 1500 + 8000);
  EXPECT_EQ(both.ops[1].arrival_ns, 1500 + 8000);
}

// bench's header line says where the transfers go and what each GPU gets of the shared uplink, not
// only one link's rate (the rtx-2080ti preset: 16 GB/s x 0.57, halved between its 2 GPUs).
TEST(Network, DescribeSaysAPcieSwitchWithoutPeerAccessSharesItsUplink) {
  const NetworkModel shared(find_preset("rtx-2080ti"), 2);
  EXPECT_THAT(shared.describe(),
              HasSubstr("no peer access: through host memory, each switch's pcie3 16 GB/s uplink shared by "
                        "its 2 GPUs (4.6 GB/s usable each)"));
  const NetworkModel t4(find_preset("t4"), 4);
  EXPECT_THAT(t4.describe(), Not(HasSubstr("no peer access")));
}

TEST(Network, HybridCubeMeshRingFollowsNvlinkAndOtherPairsCrossPcie) {
  const HardwarePreset v100 = find_preset("v100-sxm2");
  const NetworkModel net(v100, 8);
  const std::vector<int> ring = net.ring_order(identity(8));
  ASSERT_EQ(ring.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const NetworkRoute& r = net.route(ring[i], ring[(i + 1) % 8]);
    EXPECT_EQ(r.hop_count, 1) << "ring edge " << ring[i] << "->" << ring[(i + 1) % 8] << " is not NVLink";
  }
  EXPECT_DOUBLE_EQ(net.route(0, 3).bottleneck_bytes_per_s, 2 * 25e9 * 0.8);  // NV2
  EXPECT_DOUBLE_EQ(net.route(0, 1).bottleneck_bytes_per_s, 25e9 * 0.8);      // NV1
  EXPECT_EQ(net.route(0, 5).hop_count, 2);                                   // SYS: through the host
  EXPECT_DOUBLE_EQ(net.route(0, 5).bottleneck_bytes_per_s, 16e9 * 0.8);
}

TEST(Network, RejectsMoreGpusThanTheBoxHolds) {
  try {
    NetworkModel(find_preset("v100-sxm2"), 9);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(e.what(), "preset v100-sxm2 (hybrid-cube-mesh topology) holds 8 GPUs; 9 requested");
  }
}

TEST(Network, RejectsAnUnknownTopology) {
  try {
    NetworkModel(round_preset("torus"), 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(e.what(),
                 "preset round: unknown topology 'torus' (expected nvswitch, pcie-host or hybrid-cube-mesh)");
  }
}

// ---- closed-form times ----

TEST(Timing, RingAllReduceMatchesTheAlphaBetaFormulaExactly) {
  const NetworkModel net(round_preset(), 8);
  for (int n : {2, 3, 4, 5, 8}) {
    const int64_t chunk_bytes = 4096;
    const int64_t s_bytes = chunk_bytes * n;  // S, divisible by n
    const ScheduleTiming t = time_on(ring_all_reduce(identity(n), s_bytes, 1), net, n);
    // alpha = 1000 ns, S/B = S ns, reduction of S/n bytes = S/n ns.
    const int64_t expected = 2 * (n - 1) * 1000 + 2 * (n - 1) * s_bytes / n + (n - 1) * s_bytes / n;
    EXPECT_EQ(makespan(t), expected) << "n=" << n;
    for (int64_t end : t.rank_end_ns) EXPECT_EQ(end, expected);
  }
}

TEST(Timing, RingAllReduceOnTheH100PresetRoundsEachTransferToWholeNanoseconds) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  const NetworkModel net(h100, 8);
  const double bandwidth = h100.peer_link.bandwidth_bytes_per_s * h100.network.protocol_efficiency;
  const int64_t alpha = std::llround(h100.peer_link.latency_ns);
  ASSERT_EQ(alpha, 936);
  for (int n : {2, 4, 8}) {
    const uint64_t chunk_bytes = 1u << 20;  // S = n MiB
    const int64_t count = static_cast<int64_t>(chunk_bytes / 4) * n;
    const ScheduleTiming t = time_on(ring_all_reduce(identity(n), count, 1), net, n, 4);
    const int64_t transfer = alpha + std::llround(static_cast<double>(chunk_bytes) / bandwidth * 1e9);
    const int64_t reduce =
        std::llround(3.0 * static_cast<double>(chunk_bytes) / h100.mem_bandwidth_bytes_per_s * 1e9);
    EXPECT_EQ(makespan(t), 2 * (n - 1) * transfer + (n - 1) * reduce) << "n=" << n;
  }
}

TEST(Timing, PipeliningHidesReductionsButNotTheBandwidthTerm) {
  const NetworkModel net(round_preset(), 4);
  const int64_t s_bytes = 4 * 65536;
  const int64_t plain = makespan(time_on(ring_all_reduce(identity(4), s_bytes, 1), net, 4));
  const int64_t piped = makespan(time_on(ring_all_reduce(identity(4), s_bytes, 8), net, 4));
  const int64_t bandwidth_term = 2 * 3 * s_bytes / 4;
  EXPECT_LT(piped, plain);
  EXPECT_GE(piped, bandwidth_term);
}

TEST(Timing, IncastIntoRankZeroSharesItsIngressLink) {
  // Naive all-reduce: n-1 concurrent sends into rank 0 share its port, its reductions run one
  // after another, then n-1 concurrent sends share its egress.
  const NetworkModel net(round_preset(), 8);
  for (int n : {2, 4, 8}) {
    const int64_t s_bytes = 10000;
    const int64_t t = makespan(time_on(naive_all_reduce(n, s_bytes), net, n));
    EXPECT_EQ(t, 2 * 1000 + (n - 1) * s_bytes + (n - 1) * s_bytes + (n - 1) * s_bytes) << "n=" << n;
  }
}

TEST(Timing, BinomialBroadcastTakesCeilLog2NRounds) {
  const NetworkModel net(round_preset(), 8);
  // 8 ranks: the last holders receive in round 3, each round alpha + S/B after the previous.
  EXPECT_EQ(makespan(time_on(tree_broadcast(8, 0, 5000), net, 8)), 3 * (1000 + 5000));
  // 5 ranks: only the root sends in round 3. Its sends leave back to back (a send's latency
  // overlaps the next one's bytes): they leave at 0, 5000 and 10000 ns, the last arrives at 16000.
  EXPECT_EQ(makespan(time_on(tree_broadcast(5, 2, 5000), net, 5)), 2 * 5000 + 1000 + 5000);
}

TEST(Timing, BarrierCostsOneLatencyPerRound) {
  const NetworkModel net(round_preset(), 8);
  const ScheduleTiming t = time_on(dissemination_barrier(8), net, 8);
  for (int64_t end : t.rank_end_ns) EXPECT_EQ(end, 3 * 1000);
}

TEST(Timing, OpsWaitForTheLaterOfTheirTwoRanks) {
  const NetworkModel net(round_preset(), 2);
  const std::vector<int> gpus = {0, 1};
  const std::vector<int64_t> starts = {0, 7000};
  const ScheduleTiming t = simulate_schedule(ring_all_reduce({0, 1}, 2000, 1), net, gpus, starts, 1);
  for (int64_t end : t.rank_end_ns) EXPECT_EQ(end, 7000 + 2 * (1000 + 1000) + 1000);
}

TEST(Timing, ZeroCountCollectivesTakeNoTime) {
  const NetworkModel net(round_preset(), 4);
  const ScheduleTiming t = time_on(ring_all_reduce(identity(4), 0, 1), net, 4);
  EXPECT_EQ(makespan(t), 0);
  for (const OpTime& op : t.ops) EXPECT_TRUE(op.empty);
}

}  // namespace
}  // namespace dpscope
