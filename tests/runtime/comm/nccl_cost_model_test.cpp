// NCCL's cost model: closed forms from NCCL's tuning constants, the tuner's choices, smooth
// curves, forced algorithms and protocols, and one time shared by the sim backend's traced
// schedules, the analytic timing-only backend and the model itself.
#include "dpscope/comm/nccl_cost_model.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "comm_test_util.hpp"
#include "dpscope/comm/analytic_collectives.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

NcclFabric fabric(const std::string& preset, int ranks, int nodes = 1) {
  return *nccl_fabric(find_preset(preset), ranks, nodes);
}

TEST(NcclCostModel, PresetsWithoutAnNcclTableKeepTheirFlowTiming) {
  EXPECT_FALSE(nccl_fabric(test::round_preset(), 4, 1).has_value());
  EXPECT_TRUE(nccl_fabric(find_preset("h100-sxm"), 8, 1).has_value());
}

TEST(NcclCostModel, EightBytesOnEightH100sIsTheLowLatencyRing) {
  // LL ring: base 6.6 us + 14 NVLink hops x 0.6 us = 15.0 us; the LL tree pays 6.8 + 2 x 7 x 0.6.
  // 8 bytes fill one of 16 channels at LL's bandwidth, min(141, 0.5 x 360) GB/s x 8/14 / 16.
  const NcclPrediction p = predict_nccl(fabric("h100-sxm", 8), OpType::kAllReduce, 8);
  EXPECT_EQ(p.label(), "ring/LL");
  EXPECT_EQ(p.channels, 1);
  EXPECT_NEAR(p.latency_us, 15.0, 1e-9);
  const double algbw = 141.0 * 8.0 / 14.0 / 16.0;
  EXPECT_EQ(p.time_ns, std::llround((15.0 + 8.0 / (1e3 * algbw)) * 1e3));
}

TEST(NcclCostModel, LargeAllReducesOnH100UseNvlinkSharp) {
  // NVLS: one 25 us hop through the switch; algbw 0.61 x 450 GB/s.
  const uint64_t bytes = 8ull << 30;
  const NcclPrediction p = predict_nccl(fabric("h100-sxm", 8), OpType::kAllReduce, bytes);
  EXPECT_EQ(p.label(), "nvls/Simple");
  EXPECT_EQ(p.time_ns, std::llround((25.0 + static_cast<double>(bytes) / (1e3 * 0.61 * 450.0)) * 1e3));
  // A100's NVSwitch has no SHARP: the Simple ring, 2(n-1)/n of the data over 0.8 x 300 GB/s.
  const NcclPrediction a = predict_nccl(fabric("a100-sxm", 8), OpType::kAllReduce, bytes);
  EXPECT_EQ(a.label(), "ring/Simple");
  const double ring_algbw = 0.8 * 300.0 * 8.0 / 14.0;
  EXPECT_EQ(a.time_ns,
            std::llround((8.4 + 14 * 3.4 + static_cast<double>(bytes) / (1e3 * ring_algbw)) * 1e3));
}

TEST(NcclCostModel, ForcedAlgorithmAndProtocolAreObeyed) {
  const NcclFabric f = fabric("h100-sxm", 8);
  const NcclPrediction ring = predict_nccl(f, OpType::kAllReduce, 1 << 30, {.algo = NcclAlgo::kRing});
  EXPECT_EQ(ring.algo, NcclAlgo::kRing);
  const NcclPrediction ll = predict_nccl(f, OpType::kAllReduce, 1 << 30, {.proto = NcclProto::kLL});
  EXPECT_EQ(ll.proto, NcclProto::kLL);
  EXPECT_GT(ll.time_ns, ring.time_ns);  // LL moves half the payload per line
  const NcclPrediction tree = predict_nccl(f, OpType::kAllReduce, 4096, {.algo = NcclAlgo::kTree});
  EXPECT_EQ(tree.algo, NcclAlgo::kTree);
}

TEST(NcclCostModel, UnavailablePairsAreOneClearError) {
  const testing::Outcome pcie = testing::error_of(
      [] { predict_nccl(fabric("t4", 4), OpType::kAllReduce, 1024, {.proto = NcclProto::kLL128}); });
  EXPECT_EQ(pcie.kind, ErrorKind::kUsage);
  EXPECT_EQ(pcie.message, "LL128 is not available for all_reduce on this fabric (4 GPUs, 1 node, PCIe)");
  const testing::Outcome nvls = testing::error_of(
      [] { predict_nccl(fabric("a100-sxm", 8), OpType::kAllGather, 1024, {.algo = NcclAlgo::kNvls}); });
  EXPECT_EQ(nvls.message, "nvls is not available for all_gather on this fabric (8 GPUs, 1 node)");
  const testing::Outcome scatter =
      testing::error_of([] { predict_nccl(fabric("a100-sxm", 8), OpType::kScatter, 1024); });
  EXPECT_EQ(scatter.kind, ErrorKind::kUnsupported);
  EXPECT_EQ(scatter.message, "NCCL's cost model has no scatter (it is not an NCCL collective)");
  EXPECT_EQ(parse_nccl_proto("ll128"), NcclProto::kLL128);
  const testing::Outcome bad = testing::error_of([] { parse_nccl_proto("fast"); });
  EXPECT_EQ(bad.message, "--proto 'fast': expected LL, LL128 or Simple");
  // NCCL_ALGO's words, in any case.
  EXPECT_EQ(parse_nccl_algo("NVLS"), NcclAlgo::kNvls);
  EXPECT_EQ(parse_nccl_algo("Tree"), NcclAlgo::kTree);
  EXPECT_EQ(parse_nccl_algo("ring"), NcclAlgo::kRing);
  EXPECT_EQ(parse_nccl_algo("nvlsx"), std::nullopt);
  EXPECT_EQ(parse_nccl_algo("naive"), std::nullopt);  // ours, not NCCL's
}

// Real busbw curves rise smoothly with size; the model's must not jump back at a slice or channel
// boundary (the old flow model's busbw fell at 8 -> 16 MiB).
TEST(NcclCostModel, BusBandwidthNeverFallsFromOneSizeToTheNext) {
  for (const std::string preset : {"h100-sxm", "h200", "a100-sxm", "v100-sxm2", "t4", "rtx-2080ti"}) {
    const int n = preset == "t4" ? 4 : preset == "rtx-2080ti" ? 2 : 8;
    for (const int nodes : {1, 4}) {
      if (nodes > 1 && (preset == "v100-sxm2" || preset == "t4" || preset == "rtx-2080ti"))
        continue;  // no [cluster]
      const NcclFabric f = fabric(preset, n * nodes, nodes);
      for (OpType op : {OpType::kAllReduce, OpType::kAllGather, OpType::kBroadcast}) {
        double previous = 0.0;
        for (uint64_t bytes = 64; bytes <= (8ull << 30); bytes *= 2) {
          const double busbw = static_cast<double>(bytes) / predict_nccl(f, op, bytes).time_ns;
          EXPECT_GE(busbw, previous * 0.97) << preset << " x" << nodes << " " << api_name(op) << " " << bytes;
          previous = busbw;
        }
      }
    }
  }
}

// PCIe without peer access (rtx-2080ti: two GeForce cards under one switch): NCCL's SHM transport
// sends every ring hop up the switch's uplink into host memory and down again, so the GPUs under it
// share it in each direction. With peer access (t4) a ring crosses an uplink once per direction.
TEST(NcclCostModel, PcieWithoutPeerAccessSharesTheSwitchUplinkAmongItsGpus) {
  const HardwarePreset rtx = find_preset("rtx-2080ti");
  const double uplink = rtx.network.switch_uplink.bandwidth_bytes_per_s * rtx.network.protocol_efficiency;
  EXPECT_DOUBLE_EQ(fabric("rtx-2080ti", 2).intra_bytes_per_s, uplink / 2);
  EXPECT_EQ(fabric("rtx-2080ti", 2).intra, LinkClass::kPcie);
  HardwarePreset with_p2p = rtx;
  with_p2p.network.peer_to_peer = true;  // the same box if the driver allowed peer access
  EXPECT_DOUBLE_EQ(nccl_fabric(with_p2p, 2, 1)->intra_bytes_per_s,
                   rtx.peer_link.bandwidth_bytes_per_s * rtx.network.protocol_efficiency);
  const HardwarePreset t4 = find_preset("t4");
  EXPECT_DOUBLE_EQ(fabric("t4", 4).intra_bytes_per_s,
                   t4.network.switch_uplink.bandwidth_bytes_per_s * t4.network.protocol_efficiency);
  // 1 GiB is bandwidth-bound: the Simple ring at the shared uplink's share (busbw = algbw on 2 GPUs).
  const NcclPrediction big = predict_nccl(fabric("rtx-2080ti", 2), OpType::kAllReduce, 1ull << 30);
  EXPECT_EQ(big.label(), "ring/Simple");
  EXPECT_NEAR(static_cast<double>(1ull << 30) / big.time_ns, uplink / 2 / 1e9, 0.01);
}

// A broadcast's or reduce's ring is a chain: the GPU before the root only receives. Under one switch
// without peer access its uplink then carries g - 1 flows each way, not g: with 2 GPUs one flow has
// the whole uplink. Under several switches (or with peer access) nothing changes.
TEST(NcclCostModel, ChainsWithoutPeerAccessShareTheUplinkAmongOneFlowFewer) {
  const HardwarePreset rtx = find_preset("rtx-2080ti");
  const double uplink = rtx.network.switch_uplink.bandwidth_bytes_per_s * rtx.network.protocol_efficiency;
  // Two GPUs: the chain's one flow is alone in its direction, at what one flow alone moves.
  const double alone = rtx.network.switch_uplink.bandwidth_bytes_per_s * rtx.network.one_flow_efficiency;
  const NcclFabric two = fabric("rtx-2080ti", 2);
  EXPECT_DOUBLE_EQ(two.chain_intra_bytes_per_s, alone);
  for (OpType op : {OpType::kBroadcast, OpType::kReduce}) {
    const NcclPrediction big = predict_nccl(two, op, 1ull << 30);
    EXPECT_NEAR(static_cast<double>(1ull << 30) / big.time_ns, alone / 1e9, 0.01) << to_string(op);
  }
  HardwarePreset unmeasured = rtx;  // no one-flow figure: the shared uplink's efficiency
  unmeasured.network.one_flow_efficiency = 0.0;
  EXPECT_DOUBLE_EQ(nccl_fabric(unmeasured, 2, 1)->chain_intra_bytes_per_s, uplink);
  // The all-reduce's and all-gather's rings keep the shared uplink: every GPU sends.
  const NcclPrediction ag = predict_nccl(two, OpType::kAllGather, 1ull << 30);
  EXPECT_NEAR(static_cast<double>(1ull << 30) / 2 / ag.time_ns, uplink / 2 / 1e9, 0.01);
  HardwarePreset four = rtx;
  four.network.gpus_per_switch = 4;
  four.network.max_gpus = 4;
  EXPECT_DOUBLE_EQ(nccl_fabric(four, 4, 1)->chain_intra_bytes_per_s, uplink / 3);
  four.network.gpus_per_switch = 2;  // two switches: one of them still carries a flow per GPU
  EXPECT_EQ(nccl_fabric(four, 4, 1)->chain_intra_bytes_per_s, 0.0);
  HardwarePreset with_p2p = rtx;
  with_p2p.network.peer_to_peer = true;
  EXPECT_EQ(nccl_fabric(with_p2p, 2, 1)->chain_intra_bytes_per_s, 0.0);
  EXPECT_EQ(fabric("t4", 4).chain_intra_bytes_per_s, 0.0);
  EXPECT_EQ(fabric("h100-sxm", 8).chain_intra_bytes_per_s, 0.0);
}

// Through host memory (SHM, no peer access) the choice keeps the channel ramp, but the time gives
// the channels a small message fills the whole path: NCCL's tuner times with all channels' bandwidth
// and cuts the channels after choosing, and every channel's flow crosses the one shared uplink.
TEST(NcclCostModel, ThroughHostMemoryTheChannelsAMessageFillsTakeTheWholePath) {
  const NcclFabric shm = fabric("rtx-2080ti", 2);
  EXPECT_TRUE(shm.host_memory_path);
  EXPECT_FALSE(fabric("t4", 4).host_memory_path);  // peer access: NCCL's P2P transport
  EXPECT_FALSE(fabric("h100-sxm", 8).host_memory_path);
  EXPECT_FALSE(fabric("rtx-2080ti", 1).host_memory_path);  // one GPU: nothing to send
  // 8 KiB all-reduce: ring/LL on 1 of the 2 channels (LL ring threshold 8 x 512 x 2 = 8 KiB), timed
  // at LL's half of the whole ring bandwidth, algbw = busbw x n / 2(n-1) = busbw on 2 GPUs.
  const uint64_t bytes = 8u << 10;
  const NcclPrediction p = predict_nccl(shm, OpType::kAllReduce, bytes);
  EXPECT_EQ(p.label(), "ring/LL");
  EXPECT_EQ(p.channels, 1);
  EXPECT_LT(p.channels, shm.channels);
  const double ll_gbps = 0.5 * shm.intra_bytes_per_s / 1e9;
  EXPECT_NEAR(p.algbw_gbps, ll_gbps, 1e-9);
  EXPECT_NEAR(p.latency_us, 6.6 + 2 * 1.0, 1e-9);  // base + 2(n-1) PCIe LL hops
  EXPECT_EQ(p.time_ns, std::llround((6.6 + 2 * 1.0 + bytes / (1e3 * ll_gbps)) * 1e3));
  // The same fabric with the ramp in the time (as on NVLink): the one channel's share, half of it.
  NcclFabric ramp = shm;
  ramp.host_memory_path = false;
  const NcclPrediction r = predict_nccl(ramp, OpType::kAllReduce, bytes);
  EXPECT_NEAR(r.algbw_gbps, ll_gbps / 2, 1e-9);
  EXPECT_GT(r.time_ns, p.time_ns);
  // Only the time changes: every collective chooses the same pair on the same channels at every
  // size, and a message that fills every channel gets the same time.
  for (OpType op : {OpType::kAllReduce, OpType::kAllGather, OpType::kBroadcast, OpType::kReduce,
                    OpType::kReduceScatter}) {
    for (uint64_t b = 8; b <= (1ull << 30); b *= 2) {
      const NcclPrediction a = predict_nccl(shm, op, b);
      const NcclPrediction c = predict_nccl(ramp, op, b);
      EXPECT_EQ(a.label(), c.label()) << to_string(op) << " " << b;
      EXPECT_EQ(a.channels, c.channels) << to_string(op) << " " << b;
      EXPECT_LE(a.time_ns, c.time_ns) << to_string(op) << " " << b;
      if (a.channels == shm.channels) {
        EXPECT_EQ(a.time_ns, c.time_ns) << to_string(op) << " " << b;
      }
    }
  }
}

TEST(NcclCostModel, AcrossNodesTheNetworkBoundsTheRing) {
  // 4 nodes of 8 H100: a ring's bus bandwidth is at most the node's 8 NICs (8 x 0.8 x 50 GB/s);
  // inside one node it is NVLink's 0.8 x 450.
  const uint64_t bytes = 8ull << 30;
  const NcclPrediction across = predict_nccl(fabric("h100-sxm", 32, 4), OpType::kAllGather, bytes);
  EXPECT_EQ(across.algo, NcclAlgo::kRing);
  EXPECT_NEAR(across.algbw_gbps * 31.0 / 32.0, std::min(8 * 0.8 * 50.0, 0.8 * 450.0), 1e-6);
  const NcclPrediction inside = predict_nccl(fabric("h100-sxm", 8), OpType::kAllGather, bytes);
  EXPECT_NEAR(inside.algbw_gbps * 7.0 / 8.0, 0.8 * 450.0, 1e-6);
}

// On two nodes a tree's one network edge carries each byte once per direction, so its chains may
// run at twice the NICs' bus bandwidth (NCCL's search raises a tree's intra-node bandwidth up to 2x
// its network bandwidth); past two nodes the NICs bound it as they bound the ring.
TEST(NcclCostModel, TwoNodeTreesCrossTheNetworkOncePerDirection) {
  const uint64_t bytes = 8ull << 30;  // past the tree correction table: factor 1
  const NcclChoice tree{.algo = NcclAlgo::kTree, .proto = NcclProto::kSimple};
  // 2 nodes of 8 A100: min(NVLink 0.8 x 300, 2 x 8 NICs x 0.8 x 25) x 0.92, halved to algbw.
  const NcclPrediction two = predict_nccl(fabric("a100-sxm", 16, 2), OpType::kAllReduce, bytes, tree);
  EXPECT_NEAR(two.algbw_gbps, 0.5 * 0.92 * std::min(0.8 * 300.0, 2 * 8 * 0.8 * 25.0), 1e-9);
  const NcclPrediction four = predict_nccl(fabric("a100-sxm", 32, 4), OpType::kAllReduce, bytes, tree);
  EXPECT_NEAR(four.algbw_gbps, 0.5 * 0.92 * std::min(0.8 * 300.0, 8 * 0.8 * 25.0), 1e-9);
  // So on two nodes the tree's bus bandwidth passes the ring's bound, the node's NICs.
  const NcclPrediction chosen = predict_nccl(fabric("a100-sxm", 16, 2), OpType::kAllReduce, bytes);
  EXPECT_EQ(chosen.label(), "tree/Simple");
  EXPECT_GT(static_cast<double>(bytes) / chosen.time_ns * 30.0 / 16.0, 8 * 0.8 * 25.0);
}

// A network proxy forwards a channel's data one whole step of its buffer at a time: every network
// hop of a tree adds one step's wire time at the channel's share of the node's NICs.
TEST(NcclCostModel, TreesAcrossNodesWaitOneNetworkStepPerHop) {
  const NcclFabric f = fabric("a100-sxm", 16, 2);  // 16 channels share 8 x 0.8 x 25 GB/s
  const double share_bytes_per_us = 8 * 0.8 * 25e9 / 1e6 / 16;
  const NcclChoice tree{.algo = NcclAlgo::kTree, .proto = NcclProto::kSimple};
  // A large message moves in full Simple steps, NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8: up and down.
  const NcclPrediction large = predict_nccl(f, OpType::kAllReduce, 1ull << 30, tree);
  EXPECT_NEAR(large.pipeline_us, 2 * 524288.0 / share_bytes_per_us, 1e-9);
  EXPECT_EQ(
      large.time_ns,
      std::llround((large.latency_us + large.pipeline_us + (1ull << 30) / (1e3 * large.algbw_gbps)) * 1e3));
  // 64 KiB fills 2 channels (32 KiB each at Simple's threshold): one partial step of 32 KiB.
  const NcclPrediction small = predict_nccl(f, OpType::kAllReduce, 64 << 10, tree);
  EXPECT_EQ(small.channels, 2);
  EXPECT_NEAR(small.pipeline_us, 2 * 32768.0 / share_bytes_per_us, 1e-9);
  // LL and LL128 forward their own, smaller steps: 8 x 512 lines of 8 data bytes; 120 x 640 x 8 x 15/16.
  const NcclPrediction ll =
      predict_nccl(f, OpType::kAllReduce, 1ull << 30, {.algo = NcclAlgo::kTree, .proto = NcclProto::kLL});
  EXPECT_NEAR(ll.pipeline_us, 2 * 32768.0 / share_bytes_per_us, 1e-9);
  // Rings overlap their network hops; one node has none.
  EXPECT_EQ(predict_nccl(f, OpType::kAllReduce, 1ull << 30, {.algo = NcclAlgo::kRing}).pipeline_us, 0.0);
  EXPECT_EQ(predict_nccl(fabric("a100-sxm", 8), OpType::kAllReduce, 1ull << 30, tree).pipeline_us, 0.0);
}

// EFA without in-order 128-byte delivery runs NCCL_PROTO=simple (aws-ofi-nccl): across nodes the
// model offers only Simple there, and says why when LL is forced.
TEST(NcclCostModel, ASimpleOnlyNetworkRunsSimpleAcrossNodes) {
  HardwarePreset preset = find_preset("a100-sxm");
  preset.cluster.simple_only = true;
  const NcclFabric across = *nccl_fabric(preset, 16, 2);
  EXPECT_EQ(predict_nccl(across, OpType::kAllReduce, 8).proto, NcclProto::kSimple);
  const testing::Outcome ll =
      testing::error_of([&] { predict_nccl(across, OpType::kAllReduce, 8, {.proto = NcclProto::kLL}); });
  EXPECT_EQ(ll.kind, ErrorKind::kUsage);
  EXPECT_EQ(ll.message,
            "LL is not available for all_reduce on this fabric (16 GPUs, 2 nodes, a network with the Simple "
            "protocol only)");
  EXPECT_EQ(predict_nccl(*nccl_fabric(preset, 8, 1), OpType::kAllReduce, 8).proto, NcclProto::kLL);  // NVLink
}

// The sim backend's traced schedule lasts exactly the model's time (its ops re-timed), and the
// analytic backend agrees with both, on one node and (analytic vs model) across nodes.
TEST(NcclCostModel, SimBackendAnalyticBackendAndModelAgree) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  for (const int64_t count : {int64_t{2}, int64_t{1} << 16, int64_t{1} << 22}) {
    std::atomic<int64_t> latest{0};
    SimWorldOptions options = test::round_options();
    options.hardware = h100;
    spawn(
        8,
        [&](ProcessGroup& pg) {
          Tensor t = Tensor::meta({count}, pg.device());
          std::shared_ptr<Work> w = pg.all_reduce(t, {});
          w->wait();
          int64_t seen = latest.load();
          while (w->end_ns() > seen && !latest.compare_exchange_weak(seen, w->end_ns())) {
          }
        },
        options);
    const int64_t model = predict_nccl(fabric("h100-sxm", 8), OpType::kAllReduce, count * 4).time_ns;
    EXPECT_EQ(latest.load(), model) << count;
    const AnalyticCollectives analytic(h100, 8);
    EXPECT_EQ(analytic.estimate({.op = OpType::kAllReduce, .count = count}).duration_ns, model) << count;
  }
  const AnalyticCollectives cluster(h100, 64);
  const CollectiveEstimate e = cluster.estimate({.op = OpType::kAllReduce, .count = 1 << 24});
  EXPECT_EQ(e.duration_ns, predict_nccl(fabric("h100-sxm", 64, 8), OpType::kAllReduce, 4u << 24).time_ns);
  EXPECT_EQ(e.algorithm, "hierarchical");
}

// all_to_all is NCCL point-to-point: a launch (ring Simple base, 8.4 us), one Simple hop per peer
// (NVLink 3.4 us; network 14 us plus the fabric's extra latency, twice for Simple), and its bytes:
// (g-1)/n of the buffer over NVLink and (n-g)/n over the GPU's NIC rail, concurrently.
TEST(NcclCostModel, AllToAllIsPointToPointBoundByNvlinkInANodeAndByTheRailAcrossNodes) {
  const NcclFabric one = fabric("h100-sxm", 8);
  const uint64_t bytes = 64ull << 20;
  const NcclPrediction p = predict_nccl(one, OpType::kAllToAll, bytes);
  EXPECT_EQ(p.label(), "p2p/Simple");
  EXPECT_NEAR(p.latency_us, 8.4 + 7 * 3.4, 1e-9);
  const double wire_us = 7.0 * (bytes / 8.0) / (one.intra_bytes_per_s / 1e6);
  EXPECT_EQ(p.time_ns, std::llround((8.4 + 7 * 3.4 + wire_us) * 1e3));

  // Across 4 nodes, PXN: a block for a remote GPU crosses NVLink to the GPU on its rail, whose NIC
  // sends the 8 local GPUs' blocks for it as one message: 3 network messages (one per remote node)
  // where each of the 24 remote peers would be one, one more NVLink hop, and 7 x 4 blocks over NVLink.
  const NcclFabric four = fabric("h100-sxm", 32, 4);
  const NcclPrediction q = predict_nccl(four, OpType::kAllToAll, bytes);
  const double block = bytes / 32.0;
  const double latency = 8.4 + 8 * 3.4 + 3 * (14.0 + 2 * four.net_extra_latency_us);
  EXPECT_NEAR(q.latency_us, latency, 1e-9);
  const double net_us = 24 * block / (four.nic_bytes_per_s / 1e6);
  ASSERT_GT(net_us, 7 * 4 * block / (four.intra_bytes_per_s / 1e6)) << "the rail is the bound across nodes";
  EXPECT_EQ(q.time_ns, std::llround((latency + net_us) * 1e3));
  // Without NVLink between a node's GPUs NCCL has no PXN: each of the 24 remote peers is a message.
  NcclFabric pcie = four;
  pcie.intra = LinkClass::kPcie;
  const NcclPrediction direct = predict_nccl(pcie, OpType::kAllToAll, bytes);
  EXPECT_GE(direct.latency_us - q.latency_us, 21 * 14.0 - 3.4)
      << "21 more network messages, one NVLink hop fewer";

  const testing::Outcome ring =
      testing::error_of([&] { predict_nccl(one, OpType::kAllToAll, bytes, {.algo = NcclAlgo::kRing}); });
  EXPECT_EQ(ring.kind, ErrorKind::kUsage);
  EXPECT_EQ(ring.message,
            "all_to_all runs as NCCL point-to-point sends (p2p/Simple): ring is not available for it");
  EXPECT_EQ(predict_nccl(one, OpType::kAllToAll, 0).time_ns, 0) << "nothing to send";
}

// The sim backend's traced pairwise schedule and the analytic backend take the cost model's time.
TEST(NcclCostModel, AllToAllTimeIsSharedBySimAndAnalytic) {
  const int64_t count = 1 << 20;  // floats per rank
  const NcclPrediction p = predict_nccl(fabric("h100-sxm", 8), OpType::kAllToAll, count * 4);
  const AnalyticCollectives analytic(find_preset("h100-sxm"), 8);
  EXPECT_EQ(analytic.estimate({.op = OpType::kAllToAll, .count = count}).duration_ns, p.time_ns);
  std::atomic<int64_t> latest{0};
  SimWorldOptions options = test::round_options();
  options.hardware = find_preset("h100-sxm");
  spawn(
      8,
      [&](ProcessGroup& pg) {
        Tensor in = Tensor::meta({count}, pg.device()), out = Tensor::meta({count}, pg.device());
        std::shared_ptr<Work> w = pg.all_to_all_single(out, in);
        w->wait();
        int64_t seen = latest.load();
        while (w->end_ns() > seen && !latest.compare_exchange_weak(seen, w->end_ns())) {
        }
      },
      options);
  EXPECT_EQ(latest.load(), p.time_ns);
}

// NCCL chooses by its tuner's figures; the time is the hardware's. The H100 preset's NVLS latency
// (2.1 us under one 128 KiB step per channel) changes no choice at any size, times a forced NVLS
// all-reduce of 1 KiB with it, moves linearly to the tuner's 25 us as the message fills one step on
// each of the 16 channels (2 MiB), and leaves every size from there on as the tuner times it.
TEST(NcclCostModel, NcclChoosesByItsTunerButNvlsIsTimedByTheHardware) {
  const NcclFabric f = fabric("h100-sxm", 8);
  ASSERT_DOUBLE_EQ(f.nvls_hw_latency_us, 2.1);
  NcclFabric tuner = f;
  tuner.nvls_hw_latency_us = -1.0;
  for (uint64_t bytes = 8; bytes <= (8ull << 30); bytes *= 2) {
    EXPECT_EQ(predict_nccl(f, OpType::kAllReduce, bytes).label(),
              predict_nccl(tuner, OpType::kAllReduce, bytes).label())
        << bytes;
  }
  const NcclChoice nvls = {.algo = NcclAlgo::kNvls};
  // 1 KiB fills one channel of 0.61 x 450 / 16 GB/s.
  const NcclPrediction small = predict_nccl(f, OpType::kAllReduce, 1024, nvls);
  const double small_latency_us = 2.1 + (25.0 - 2.1) * 1024.0 / (16 * 131072.0);
  EXPECT_NEAR(small.latency_us, small_latency_us, 1e-9);
  EXPECT_NEAR(static_cast<double>(small.time_ns),
              (small_latency_us + 1024.0 / (1e3 * 0.61 * 450.0 / 16)) * 1e3, 1.0);
  const NcclPrediction half = predict_nccl(f, OpType::kAllReduce, 1 << 20, nvls);
  EXPECT_NEAR(half.latency_us, (2.1 + 25.0) / 2, 1e-9);
  for (uint64_t bytes = 2u << 20; bytes <= (8ull << 30); bytes *= 2) {
    EXPECT_EQ(predict_nccl(f, OpType::kAllReduce, bytes, nvls).time_ns,
              predict_nccl(tuner, OpType::kAllReduce, bytes, nvls).time_ns)
        << bytes;
  }
  // Without the preset's figure (A100 has no NVLS; a preset may leave it out) the tuner's times.
  EXPECT_DOUBLE_EQ(fabric("a100-sxm", 8).nvls_hw_latency_us, -1.0);
}

// Past two nodes the model keeps NCCL's tuner's structure (src/graph/tuning.cc), with NCCL's own
// InfiniBand hop (h100-sxm: 0 us extra): a ring crosses the network on 2(N-1) of its 2(n-1) steps
// and pays the host's network post (1 us) on the others; a tree's depth across nodes is log2 N
// rounded down (NCCL's log2i), so 10 nodes cost what 8 do and 16 nodes two network hops more;
// NVLS-tree runs at most at half of the node's NICs (NCCL's bwInter/2), where two nodes get them all.
// docs/fidelity.md judges it on 4 nodes, not-compared/ on 8 (NVIDIA/nccl-tests#309).
TEST(NcclCostModel, PastTwoNodesTheStructureIsNcclsTuners) {
  const NcclChoice ring_ll{.algo = NcclAlgo::kRing, .proto = NcclProto::kLL};
  const NcclPrediction ring = predict_nccl(fabric("h100-sxm", 32, 4), OpType::kAllReduce, 8, ring_ll);
  // base 6.6 + (62 - 6) steps x max(NVLink 0.6, post 1.0) + 6 network steps x 2.7 (NCCL's IB LL hop).
  EXPECT_NEAR(ring.latency_us, 6.6 + 56 * 1.0 + 6 * 2.7, 1e-9);

  const NcclChoice tree_ll{.algo = NcclAlgo::kTree, .proto = NcclProto::kLL};
  const double eight = predict_nccl(fabric("h100-sxm", 64, 8), OpType::kAllReduce, 8, tree_ll).latency_us;
  const double ten = predict_nccl(fabric("h100-sxm", 80, 10), OpType::kAllReduce, 8, tree_ll).latency_us;
  const double sixteen = predict_nccl(fabric("h100-sxm", 128, 16), OpType::kAllReduce, 8, tree_ll).latency_us;
  // base 6.8 + 2 x (7 NVLink hops x 0.6 + log2 8 network hops x 5.0 (NCCL's IB tree LL hop)).
  EXPECT_NEAR(eight, 6.8 + 2 * (7 * 0.6 + 3 * 5.0), 1e-9);
  EXPECT_DOUBLE_EQ(ten, eight);
  EXPECT_NEAR(sixteen - eight, 2 * 5.0, 1e-9);

  const uint64_t bytes = 8ull << 30;
  const NcclChoice nvls{.algo = NcclAlgo::kNvls};
  const double nvls_gbps = 0.61 * 450.0;    // h100-sxm's nccl.nvls_algbw_fraction x NVLink
  const double nics_gbps = 8 * 0.8 * 50.0;  // 8 rails of 50 GB/s at protocol_efficiency 0.8
  EXPECT_NEAR(predict_nccl(fabric("h100-sxm", 16, 2), OpType::kAllReduce, bytes, nvls).algbw_gbps,
              std::min(nvls_gbps, nics_gbps), 1e-9);
  EXPECT_NEAR(predict_nccl(fabric("h100-sxm", 32, 4), OpType::kAllReduce, bytes, nvls).algbw_gbps,
              std::min(nvls_gbps, nics_gbps / 2), 1e-9);
  EXPECT_EQ(predict_nccl(fabric("h100-sxm", 80, 10), OpType::kAllReduce, bytes, nvls).label(), "nvls/Simple");
}

// Past two nodes the bandwidth bounds are the node's NICs, whatever the node count: a rail-aligned
// ring at most g NICs, NVLS-tree at most half of them (NCCL's `bwInter/2` for more than two nodes,
// src/graph/tuning.cc). So a large all-reduce on 10 or 16 nodes takes the bus bandwidth of 4 or 8.
TEST(NcclCostModel, PastTwoNodesTheBandwidthBoundsDoNotShrinkWithTheNodeCount) {
  const uint64_t bytes = 8ull << 30;
  const double nics_gbps = 8 * 0.8 * 50.0;                             // 8 rails of 50 GB/s at 0.8
  const double nvls_alg_gbps = std::min(0.61 * 450.0, nics_gbps / 2);  // h100-sxm's NVLS, half the NICs
  for (const int nodes : {4, 8, 10, 16}) {
    const int n = 8 * nodes;
    const NcclFabric f = fabric("h100-sxm", n, nodes);
    const NcclPrediction ring =
        predict_nccl(f, OpType::kAllReduce, bytes, {.algo = NcclAlgo::kRing, .proto = NcclProto::kSimple});
    // busbw = algbw x 2(n-1)/n: the NICs' 320 GB/s under NVLink's 0.8 x 450.
    EXPECT_NEAR(ring.algbw_gbps * 2.0 * (n - 1) / n, nics_gbps, 1e-9) << nodes;
    const NcclPrediction nvls = predict_nccl(f, OpType::kAllReduce, bytes, {.algo = NcclAlgo::kNvls});
    EXPECT_NEAR(nvls.algbw_gbps, nvls_alg_gbps, 1e-9) << nodes;
  }
}

// NVLS as NCCL runs it (the fidelity report's comparison; predict_nccl() keeps its ramp): all 16
// NVLS channels at any size, a head per GPU, NCCL's chunk per channel and head (16 KiB below 8 MiB,
// 32 KiB below 64 MiB, 64 KiB below 1 GiB, 128 KiB from there), and a first loop that passes the
// scatter and gather stages besides the reduce: latency + (bytes + 2 x min(bytes, loop)) / algbw.
TEST(NcclCostModel, NvlsAsNcclRunsItTakesAllChannelsAndNcclsChunks) {
  const NcclFabric f = fabric("h100-sxm", 8);
  const double algbw_bytes_per_us = 0.61 * 450e3;
  const auto expect_run = [&](uint64_t bytes, uint64_t chunk) {
    const NvlsRun r = nvls_as_nccl_runs(f, bytes);
    EXPECT_EQ(r.channels, 16) << bytes;
    EXPECT_EQ(r.heads, 8) << bytes;
    EXPECT_EQ(r.chunk_bytes, chunk) << bytes;
    EXPECT_EQ(r.loop_bytes, 16 * 8 * chunk) << bytes;
    EXPECT_EQ(r.loops, static_cast<int64_t>((bytes + r.loop_bytes - 1) / r.loop_bytes)) << bytes;
    const double wire = static_cast<double>(bytes) + 2.0 * static_cast<double>(std::min(bytes, r.loop_bytes));
    EXPECT_NEAR(static_cast<double>(r.time_ns), (2.1 + wire / algbw_bytes_per_us) * 1e3, 1.0) << bytes;
  };
  expect_run(1024, 16 << 10);             // one partial loop: three stages of 1 KiB
  expect_run((8u << 20) - 4, 16 << 10);   // under 2 x 128 x 32 KiB
  expect_run(8u << 20, 32 << 10);         // 2 loops of 4 MiB
  expect_run((64u << 20) - 4, 32 << 10);  // under 8 x 128 x 64 KiB
  expect_run(64u << 20, 64 << 10);
  expect_run((1ull << 30) - 4, 64 << 10);  // under 64 x 128 x 128 KiB
  expect_run(1ull << 30, 128 << 10);
  // A small message is not spread over fewer channels: 32 KiB takes the same bandwidth as 1 MiB.
  const double small_us = static_cast<double>(nvls_as_nccl_runs(f, 32u << 10).time_ns) / 1e3 - 2.1;
  EXPECT_NEAR(small_us, 3.0 * (32u << 10) / algbw_bytes_per_us, 1e-3);
}

TEST(NcclCostModel, NvlsAsNcclRunsItNeedsOneNodeWithNvls) {
  const testing::Outcome two_nodes =
      testing::error_of([] { nvls_as_nccl_runs(fabric("h100-sxm", 16, 2), 1024); });
  EXPECT_EQ(two_nodes.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(
      two_nodes.message,
      "nvls_as_nccl_runs: needs one node of >= 2 GPUs with NVLS and its latency, and bytes > 0 (16 GPUs "
      "in 2 nodes, 1024 bytes)");
  EXPECT_EQ(testing::error_of([] { nvls_as_nccl_runs(fabric("a100-sxm", 8), 1024); }).kind,
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::error_of([] { nvls_as_nccl_runs(fabric("h100-sxm", 8), 0); }).kind,
            ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace dpscope
