// predict_nccl(): NCCL's collectives' cost model (comm/nccl_cost_model.hpp).
//
// The constants below are facts of NCCL's public tuning model, NVIDIA/nccl src/graph/tuning.cc
// (2.19-2.23): base latencies (`baseLat`), per-hop hardware latencies by link kind (`hwLat`), the
// LL / LL128 / tree bandwidth refinements and per-channel caps (`llMaxBws`,
// `perChMaxRingLL128Bws`, `perChMaxTreeLL128Bws`, `perChMaxTreeBws`), the tree correction factors
// (`treeCorrectionFactor`), and the per-thread work thresholds that decide how many channels a
// message fills (src/include/device.h: NCCL_*_THREAD_THRESHOLD, NCCL_*_MAX_NTHREADS). Latencies
// are in microseconds, bandwidths in GB/s, as NCCL writes them.
#include "dpscope/comm/nccl_cost_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "dpscope/base/ascii.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope {
namespace {

constexpr int kAlgos = 3;   // ring, tree, nvls (index = NcclAlgo)
constexpr int kProtos = 3;  // LL, LL128, Simple (index = NcclProto)

// baseLat[algo][proto], us. NVLS has no base latency, only its hop through the switch.
constexpr double kBaseLatency[kAlgos][kProtos] = {{6.6, 14.0, 8.4}, {6.8, 14.0, 8.4}, {0.0, 0.0, 0.0}};

// hwLat[link][algo][proto], us: NVLink, PCIe, network. NVLS's network entry is NVLS-tree's.
enum HwKind { kHwNvlink = 0, kHwPcie = 1, kHwNet = 2 };
constexpr double kHopLatency[3][kAlgos][kProtos] = {
    {{0.6, 1.9, 3.4}, {0.6, 1.25, 4.0}, {0.0, 0.0, 25.0}},
    {{1.0, 2.5, 5.7}, {1.0, 1.9, 4.0}, {0.0, 0.0, 0.0}},
    {{2.7, 4.0, 14.0}, {5.0, 8.5, 14.0}, {0.0, 0.0, 14.0}},
};

// Indexed [arch][nodes: 1, 2, more].
constexpr double kLlMaxBw[3][3] = {{39.0, 39.0, 20.4}, {87.7, 39.0, 20.4}, {141.0, 39.0, 20.4}};
constexpr double kRingLl128PerChannel[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}};
constexpr double kTreeLl128PerChannel[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}};
constexpr double kTreePerChannel[3][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};

// Trees at medium sizes: a factor on their bandwidth per power of two from 64 B (index
// log2(bytes / 64)) to 256 MiB.
constexpr std::array<std::array<double, 23>, kProtos> kTreeCorrection = {{
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
}};

// Bytes each thread of a channel must have before NCCL adds a channel, and threads per channel.
constexpr double kThreadThreshold[kProtos] = {8.0, 8.0, 64.0};
constexpr double kThreads[kProtos] = {512.0, 640.0, 512.0};

// Multi-node rings pay the host's network post overhead per step (1 us on x86, 3x for Simple).
constexpr double kNetOverheadUs = 1.0;

// Payload bytes of one step of a channel's connection buffer, the unit a network proxy forwards
// (src/include/device.h, NCCL's defaults): LL 8 lines x 512 threads of 16-byte lines with 8 data
// bytes; LL128 120 x 640 eight-byte elements, 15 of every 16 data; Simple NCCL_BUFFSIZE (4 MiB) /
// NCCL_STEPS (8).
constexpr double kStepPayloadBytes[kProtos] = {8.0 * 512 * 8, 120.0 * 640 * 8 * 15 / 16, (4 << 20) / 8.0};

// The step of an NVLS connection: 128 KiB (NCCL 2.21 release notes, "Add stepSize as property of a
// connection ... set it to 128K for NVLink SHARP"; quoted in ROCm/rccl#1271).
constexpr double kNvlsStepBytes = 128 << 10;

int log2_floor(uint64_t v) {
  int r = -1;
  while (v != 0) {
    v >>= 1;
    ++r;
  }
  return r;
}

struct Candidate {
  double latency_us = 0.0;
  double busbw_gbps = 0.0;  // all channels
  double bus_to_alg = 1.0;  // algbw = busbw x bus_to_alg
  double per_channel_bytes = 0.0;
};

// The latency and bandwidth of (algo, proto) for `op`, or busbw 0 where NCCL lacks the pair.
Candidate candidate(const NcclFabric& f, OpType op, NcclAlgo algo, NcclProto proto) {
  const int a = static_cast<int>(algo);
  const int p = static_cast<int>(proto);
  const int n = f.ranks;
  const int N = f.nodes;
  const int g = f.gpus_per_node();
  const int arch = static_cast<int>(f.arch);
  const int nodes_index = N == 1 ? 0 : N == 2 ? 1 : 2;
  const int intra_hw = f.intra == LinkClass::kNvlink ? kHwNvlink : kHwPcie;
  const double C = f.channels;
  const bool all_reduce = op == OpType::kAllReduce;
  Candidate c;
  if (proto == NcclProto::kLL128 && f.intra != LinkClass::kNvlink) return c;  // NVLink only
  if (N > 1 && f.net_simple_only && proto != NcclProto::kSimple) return c;    // NCCL_PROTO=simple
  // The ring's bus bandwidth: the peer links inside a node; across nodes, each ring leaves a node
  // through one NIC, and the channels spread over the g rails.
  const bool chain = op == OpType::kBroadcast || op == OpType::kReduce;
  const double intra_gbps =
      (chain && f.chain_intra_bytes_per_s > 0.0 ? f.chain_intra_bytes_per_s : f.intra_bytes_per_s) / 1e9;
  const double ring_gbps = N == 1 ? intra_gbps : std::min(intra_gbps, g * f.nic_bytes_per_s / 1e9);
  const double ll_max = kLlMaxBw[arch][nodes_index];
  double intra_lat = kHopLatency[intra_hw][a][p];
  // A network hop: NCCL's figure plus the fabric's extra latency, twice for Simple (its flush).
  const double inter_lat =
      kHopLatency[kHwNet][a][p] + f.net_extra_latency_us * (proto == NcclProto::kSimple ? 2.0 : 1.0);
  c.per_channel_bytes = kThreadThreshold[p] * kThreads[p];

  switch (algo) {
    case NcclAlgo::kRing: {
      double bus = ring_gbps;
      if (proto == NcclProto::kLL) bus = std::min(ll_max, bus * 0.5);
      if (proto == NcclProto::kLL128) bus = std::min(bus * 0.92, C * kRingLl128PerChannel[arch][nodes_index]);
      const int steps = all_reduce                                                 ? 2 * (n - 1)
                        : op == OpType::kAllGather || op == OpType::kReduceScatter ? n - 1
                                                                                   : n;
      c.busbw_gbps = bus;
      c.bus_to_alg = static_cast<double>(n) / steps;
      if (proto == NcclProto::kLL) c.per_channel_bytes *= n;  // NCCL scales LL rings' threshold by n
      if (N > 1)
        intra_lat = std::max(intra_lat, proto == NcclProto::kSimple ? 3 * kNetOverheadUs : kNetOverheadUs);
      if (chain) {
        // A pipelined chain: n-1 hops, N-1 of them between nodes.
        c.latency_us = kBaseLatency[a][p] + (n - N) * intra_lat + (N - 1) * inter_lat;
      } else {
        const int inter_steps = N == 1 ? 0 : all_reduce ? 2 * (N - 1) : N - 1;
        c.latency_us = kBaseLatency[a][p] + (steps - inter_steps) * intra_lat + inter_steps * inter_lat;
      }
      return c;
    }
    case NcclAlgo::kTree: {
      if (!all_reduce) return c;
      // On two nodes the tree's one network edge joins the two in-node chains: every byte crosses
      // it once up (reduce) and once down (broadcast), once in each direction of the node's NICs,
      // where a ring crosses them 2(n-1)/n times. So the tree may run its chains at up to twice
      // the NICs' bus bandwidth: NCCL's topology search raises a tree graph's intra-node bandwidth
      // up to 2x its network bandwidth ("increase bwIntra for trees (2 nodes or collnet)",
      // src/graph/search.cc), and its tuner rates algorithms on <= 2 nodes by that intra-node
      // bandwidth (src/graph/tuning.cc: `nNodes <= 2 ? bwIntra : bwInter`). Past two nodes the
      // tree's inner nodes send and receive over the network for both their children and their
      // parent, and the NICs bound it as they bound the ring.
      const double nics_gbps = g * f.nic_bytes_per_s / 1e9;
      const double tree_gbps = N == 1 ? intra_gbps : std::min(intra_gbps, (N == 2 ? 2.0 : 1.0) * nics_gbps);
      double bus = std::min(tree_gbps * 0.92, C * kTreePerChannel[arch][nodes_index]);
      if (proto == NcclProto::kLL) bus = std::min(bus / 3.8, ll_max);
      if (proto == NcclProto::kLL128)
        bus =
            std::min(bus * (N == 1 ? 7.0 / 9.0 : 120.0 / 128.0), C * kTreeLl128PerChannel[arch][nodes_index]);
      c.busbw_gbps = bus;
      c.bus_to_alg = 0.5;
      // With one GPU per node every hop is a network hop: NCCL uses the tree's network latency.
      c.latency_us =
          kBaseLatency[a][p] + 2 * ((g - 1) * intra_lat + log2_floor(static_cast<uint64_t>(N)) * inter_lat);
      return c;
    }
    case NcclAlgo::kNvls: {
      if (!all_reduce || proto != NcclProto::kSimple || f.nvls_algbw_bytes_per_s <= 0.0 || g < 2) return c;
      // NVLink SHARP reduces inside the switch: one hop in the node; across nodes a tree over the
      // NICs of every GPU (NVLS-tree), whose bandwidth halves past two nodes as NCCL models it.
      double alg = f.nvls_algbw_bytes_per_s / 1e9;
      if (N > 1) alg = std::min(alg, g * f.nic_bytes_per_s / 1e9 * (N <= 2 ? 1.0 : 0.5));
      c.busbw_gbps = alg;
      c.bus_to_alg = 1.0;
      c.latency_us =
          kHopLatency[kHwNvlink][a][p] + (N > 1 ? 2 * log2_floor(static_cast<uint64_t>(N)) * inter_lat : 0.0);
      return c;
    }
    case NcclAlgo::kP2p: return c;  // not a collective algorithm: all_to_all_p2p() below
  }
  return c;
}

// all_to_all as NCCL runs it, point to point (the header's formula).
NcclPrediction all_to_all_p2p(const NcclFabric& f, uint64_t bytes) {
  const int ring = static_cast<int>(NcclAlgo::kRing);
  const int simple = static_cast<int>(NcclProto::kSimple);
  const int n = f.ranks;
  const int g = f.gpus_per_node();
  const int intra_hw = f.intra == LinkClass::kNvlink ? kHwNvlink : kHwPcie;
  const double block = static_cast<double>(bytes) / n;
  // PXN across nodes of NVLink-joined GPUs (the header): the relayed blocks cross NVLink too, and
  // each NIC sends one message per remote node.
  const bool pxn = f.nodes > 1 && g > 1 && f.intra == LinkClass::kNvlink;
  const double intra_blocks = pxn ? static_cast<double>(g - 1) * f.nodes : g - 1;
  const double intra_us = intra_blocks * block / (f.intra_bytes_per_s / 1e6);
  const double net_us = n > g ? (n - g) * block / (f.nic_bytes_per_s / 1e6) : 0.0;
  const int net_messages = pxn ? f.nodes - 1 : n - g;
  NcclPrediction r;
  r.algo = NcclAlgo::kP2p;
  r.proto = NcclProto::kSimple;
  r.channels = 1;
  r.latency_us = kBaseLatency[ring][simple] + (g - 1 + (pxn ? 1 : 0)) * kHopLatency[intra_hw][ring][simple] +
                 net_messages * (kHopLatency[kHwNet][ring][simple] + 2.0 * f.net_extra_latency_us);
  const double wire_us = std::max(intra_us, net_us);
  r.algbw_gbps = wire_us > 0 ? static_cast<double>(bytes) / (wire_us * 1e3) : 0.0;
  r.time_ns = std::llround((r.latency_us + wire_us) * 1e3);
  return r;
}

// `whole_path`: the channels the message fills still get all of the path's bandwidth (the time of
// a message through host memory, predict_nccl()); otherwise their share of it.
NcclPrediction evaluate(const NcclFabric& f, OpType op, uint64_t bytes, NcclAlgo algo, NcclProto proto,
                        const Candidate& c, bool whole_path = false) {
  NcclPrediction r;
  r.algo = algo;
  r.proto = proto;
  // Channels the message fills: each needs per_channel_bytes before the next one is used.
  const double fill = std::floor(static_cast<double>(bytes) / c.per_channel_bytes);
  r.channels = static_cast<int>(std::clamp(fill, 1.0, static_cast<double>(f.channels)));
  const double share = whole_path ? 1.0 : static_cast<double>(r.channels) / f.channels;
  double algbw = c.busbw_gbps * c.bus_to_alg * share;
  if (algo == NcclAlgo::kTree) {
    const int log_size = log2_floor(bytes >> 6);
    if (log_size >= 0 && log_size < 23) algbw *= kTreeCorrection[static_cast<int>(proto)][log_size];
  }
  double latency = c.latency_us;
  // NCCL's "plateau effect of ring" on multi-node all-reduce with the Simple protocol.
  if (algo == NcclAlgo::kRing && proto == NcclProto::kSimple && f.nodes > 1 && op == OpType::kAllReduce &&
      static_cast<double>(bytes) / (static_cast<double>(f.channels) * f.ranks) >= 64)
    latency *= f.arch == GpuArch::kVolta ? 1.9 : 1.4;
  // The network pipeline. A channel's proxy thread posts a network send only once the GPU has
  // written a whole step of the connection buffer, and the receiver's GPU takes it only once it
  // has arrived, so every network hop of a pipelined tree holds the data back by one step's wire
  // time at the channel's share of the node's NICs. A message smaller than a step per channel moves
  // as one partial step. A ring keeps every link busy from its first step (each rank sends its own
  // data first), so its network hops overlap instead; trees and NVLS-trees cross 2 log2 N network
  // hops in line (up, then down).
  double pipeline_us = 0.0;
  if (algo != NcclAlgo::kRing && f.nodes > 1) {
    const double step = std::min(kStepPayloadBytes[static_cast<int>(proto)],
                                 static_cast<double>(bytes) / static_cast<double>(r.channels));
    const double channel_share_bytes_per_us = f.gpus_per_node() * f.nic_bytes_per_s / 1e6 / f.channels;
    pipeline_us = 2.0 * log2_floor(static_cast<uint64_t>(f.nodes)) * step / channel_share_bytes_per_us;
  }
  r.latency_us = latency;
  r.pipeline_us = pipeline_us;
  r.algbw_gbps = algbw;
  const double time_us = latency + pipeline_us + static_cast<double>(bytes) / (1e3 * algbw);
  r.time_ns = std::llround(time_us * 1e3);
  return r;
}

}  // namespace

const char* to_string(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::kRing: return "ring";
    case NcclAlgo::kTree: return "tree";
    case NcclAlgo::kNvls: return "nvls";
    case NcclAlgo::kP2p: return "p2p";
  }
  return "?";
}

const char* to_string(NcclProto p) {
  switch (p) {
    case NcclProto::kLL: return "LL";
    case NcclProto::kLL128: return "LL128";
    case NcclProto::kSimple: return "Simple";
  }
  return "?";
}

NcclProto parse_nccl_proto(std::string_view text, std::string_view what) {
  const std::string t = ascii_lower(text);
  if (t == "ll") return NcclProto::kLL;
  if (t == "ll128") return NcclProto::kLL128;
  if (t == "simple") return NcclProto::kSimple;
  throw Error(ErrorKind::kUsage, fmt::format("{} '{}': expected LL, LL128 or Simple", what, text));
}

std::optional<NcclAlgo> parse_nccl_algo(std::string_view text) {
  const std::string t = ascii_lower(text);
  if (t == "ring") return NcclAlgo::kRing;
  if (t == "tree") return NcclAlgo::kTree;
  if (t == "nvls") return NcclAlgo::kNvls;
  return std::nullopt;
}

std::string NcclPrediction::label() const { return fmt::format("{}/{}", to_string(algo), to_string(proto)); }

std::optional<NcclFabric> nccl_fabric(const HardwarePreset& preset, int ranks, int nodes) {
  if (!preset.nccl.present) return std::nullopt;
  DPS_CHECK(ranks >= 1 && nodes >= 1 && ranks % nodes == 0, ErrorKind::kInvalidArgument,
            "nccl_fabric: {} ranks in {} nodes", ranks, nodes);
  NcclFabric f;
  f.ranks = ranks;
  f.nodes = nodes;
  const std::string& kind = preset.peer_link.kind;
  f.intra = kind.rfind("nvlink", 0) == 0 ? LinkClass::kNvlink : LinkClass::kPcie;
  f.arch = kind == "nvlink4" ? GpuArch::kHopper : kind == "nvlink3" ? GpuArch::kAmpere : GpuArch::kVolta;
  f.channels = preset.nccl.channels;
  const double eff = preset.network.protocol_efficiency;
  double peer = preset.peer_link.bandwidth_bytes_per_s;
  // A ring through PCIe switches crosses each switch's uplink once per direction.
  const int g = ranks / nodes;
  const int per_switch = preset.network.gpus_per_switch;
  if (preset.topology == "pcie-host" && per_switch > 0 && preset.network.peer_to_peer && g > per_switch)
    peer = std::min(peer, preset.network.switch_uplink.bandwidth_bytes_per_s);
  // Without peer access NCCL connects the ring's neighbours with its SHM transport: the sender
  // writes into host memory and the receiver reads it from there, so every GPU's send goes up its
  // switch's uplink and every receive comes down it. The uplink carries one ring flow per GPU
  // under it, in each direction, and each gets its share.
  // A broadcast's or reduce's ring is a chain (NCCL's src/device/broadcast.h, reduce.h): the GPU
  // before the root only receives and the root only sends, so where every GPU sits under one
  // switch its uplink carries g - 1 flows each way, not g. (Under several switches, some switch
  // still carries one flow per GPU in a direction.)
  // What each of `flows` flows sharing a direction of the uplink gets: alone, the preset's
  // one_flow_efficiency of the line rate (where it gives one, with its source); sharing, they move
  // protocol_efficiency of it together.
  const auto through_host = [&](int flows) {
    const double alone = preset.network.one_flow_efficiency;
    return std::min(peer, preset.network.switch_uplink.bandwidth_bytes_per_s / flows) *
           (flows == 1 && alone > 0.0 ? alone : eff);
  };
  const bool shm = preset.topology == "pcie-host" && per_switch > 0 && !preset.network.peer_to_peer && g > 1;
  if (shm && g <= per_switch) f.chain_intra_bytes_per_s = through_host(g - 1);
  f.intra_bytes_per_s = shm ? through_host(std::min(g, per_switch)) : peer * eff;
  f.host_memory_path = shm;
  f.nic_bytes_per_s = preset.cluster.nic.bandwidth_bytes_per_s * eff;
  f.net_extra_latency_us = preset.cluster.nic.latency_ns / 1e3;
  f.nvls_algbw_bytes_per_s = preset.nccl.nvls_algbw_fraction * preset.peer_link.bandwidth_bytes_per_s;
  f.nvls_hw_latency_us = preset.nccl.nvls_latency_us;
  f.net_simple_only = preset.cluster.simple_only;
  return f;
}

int64_t nccl_round_latency_ns(const NcclFabric& f) {
  const int ring = static_cast<int>(NcclAlgo::kRing);
  const int ll = static_cast<int>(NcclProto::kLL);
  const double hop = f.nodes > 1 ? kHopLatency[kHwNet][ring][ll] + f.net_extra_latency_us
                                 : kHopLatency[f.intra == LinkClass::kNvlink ? kHwNvlink : kHwPcie][ring][ll];
  return std::llround((kBaseLatency[ring][ll] + hop) * 1e3);
}

NcclChoice nccl_choice(OpType op, Algorithm algorithm, std::optional<NcclProto> proto) {
  NcclChoice choice{.proto = proto};
  if (op == OpType::kAllReduce && algorithm == Algorithm::kRing) choice.algo = NcclAlgo::kRing;
  if (op == OpType::kAllReduce && algorithm == Algorithm::kTree) choice.algo = NcclAlgo::kTree;
  return choice;
}

NcclPrediction predict_nccl(const NcclFabric& f, OpType op, uint64_t bytes, NcclChoice choice) {
  if (op == OpType::kBarrier) {  // PyTorch's barrier: an all-reduce of one float
    op = OpType::kAllReduce;
    bytes = 4;
  }
  DPS_CHECK(op == OpType::kAllReduce || op == OpType::kBroadcast || op == OpType::kReduce ||
                op == OpType::kAllGather || op == OpType::kReduceScatter || op == OpType::kAllToAll,
            ErrorKind::kUnsupported, "NCCL's cost model has no {} (it is not an NCCL collective)",
            api_name(op));
  if (f.ranks <= 1 || bytes == 0) {  // NCCL returns at once for an empty buffer
    NcclPrediction alone;
    if (op == OpType::kAllToAll) alone.algo = NcclAlgo::kP2p;
    alone.proto = choice.proto.value_or(NcclProto::kSimple);
    return alone;  // NCCL copies (out of place) or does nothing: no communication
  }
  if (op == OpType::kAllToAll) {
    DPS_CHECK((!choice.algo || *choice.algo == NcclAlgo::kP2p) &&
                  (!choice.proto || *choice.proto == NcclProto::kSimple),
              ErrorKind::kUsage,
              "all_to_all runs as NCCL point-to-point sends (p2p/Simple): {}{}{} is not available for it",
              choice.algo ? to_string(*choice.algo) : "", choice.algo && choice.proto ? "/" : "",
              choice.proto ? to_string(*choice.proto) : "");
    return all_to_all_p2p(f, bytes);
  }
  NcclPrediction best;
  best.time_ns = std::numeric_limits<int64_t>::max();
  bool any = false;
  for (int a = 0; a < kAlgos; ++a) {
    if (choice.algo && static_cast<int>(*choice.algo) != a) continue;
    for (int p = 0; p < kProtos; ++p) {
      if (choice.proto && static_cast<int>(*choice.proto) != p) continue;
      const Candidate c = candidate(f, op, static_cast<NcclAlgo>(a), static_cast<NcclProto>(p));
      if (c.busbw_gbps <= 0.0) continue;
      const NcclPrediction r = evaluate(f, op, bytes, static_cast<NcclAlgo>(a), static_cast<NcclProto>(p), c);
      if (!any || r.time_ns < best.time_ns) best = r;
      any = true;
    }
  }
  DPS_CHECK(any, ErrorKind::kUsage, "{}{}{} is not available for {} on this fabric ({} GPUs, {} node{}{}{})",
            choice.algo ? to_string(*choice.algo) : "", choice.algo && choice.proto ? "/" : "",
            choice.proto ? to_string(*choice.proto) : "", api_name(op), f.ranks, f.nodes,
            f.nodes == 1 ? "" : "s", f.intra == LinkClass::kPcie ? ", PCIe" : "",
            f.nodes > 1 && f.net_simple_only ? ", a network with the Simple protocol only" : "");
  // NCCL chooses by its tuner's figures (above); the time is the hardware's. They differ for NVLS
  // where the preset gives NVLS's own latency: the tuner's 25 us NVLink hop for NVLS is deliberately
  // pessimistic for small messages (it keeps them on ring and tree). A message under one NVLS step
  // per channel crosses the switch in one pass and pays the preset's figure; from one full step per
  // channel on, the steps pipeline through the switch's reduce and multicast stages, whose fill the
  // tuner's figure stands for (the tables past that size take at least it); in between, the
  // partial first step moves it linearly from one to the other.
  if (best.algo == NcclAlgo::kNvls && f.nvls_hw_latency_us >= 0.0) {
    Candidate c = candidate(f, op, NcclAlgo::kNvls, best.proto);
    const double tuner_hop_us =
        kHopLatency[kHwNvlink][static_cast<int>(NcclAlgo::kNvls)][static_cast<int>(best.proto)];
    const double filled = std::min(1.0, static_cast<double>(bytes) / (f.channels * kNvlsStepBytes));
    c.latency_us += (f.nvls_hw_latency_us - tuner_hop_us) * (1.0 - filled);
    best = evaluate(f, op, bytes, NcclAlgo::kNvls, best.proto, c);
  }
  // The same separation for the channels a small message fills, where the GPUs meet in host memory.
  // NCCL's tuner times every pair with all channels' bandwidth (src/graph/tuning.cc,
  // ncclTopoGetAlgoTime: it scales by channels only where the user fixed their number) and cuts the
  // channels for a small message only after choosing (src/enqueue.cc, topoGetAlgoInfo); the model's
  // choice keeps its ramp (above: no choice changes). On NVLink the ramp is what the tables show: a
  // channel is one SM's thread block, and fewer of them drive less of the links. Through host memory
  // (NCCL's SHM transport) every channel's flow crosses the switch's one uplink, which the fabric's
  // bandwidth already shares among the GPUs' flows, and NCCL doubles the rings its topology search
  // finds into copies over the same links (src/graph/connect.cc): the channels a message fills take
  // the whole path, as the tuner's own time has it.
  if (f.host_memory_path && best.channels < f.channels) {
    const Candidate c = candidate(f, op, best.algo, best.proto);
    best = evaluate(f, op, bytes, best.algo, best.proto, c, /*whole_path=*/true);
  }
  return best;
}

NvlsRun nvls_as_nccl_runs(const NcclFabric& f, uint64_t bytes) {
  DPS_CHECK(
      f.nodes == 1 && f.gpus_per_node() >= 2 && f.nvls_algbw_bytes_per_s > 0.0 &&
          f.nvls_hw_latency_us >= 0.0 && bytes > 0,
      ErrorKind::kInvalidArgument,
      "nvls_as_nccl_runs: needs one node of >= 2 GPUs with NVLS and its latency, and bytes > 0 ({} GPUs in "
      "{} nodes, {} bytes)",
      f.ranks, f.nodes, bytes);
  constexpr int kNvlsChannels = 16;  // NCCL_NVLS_NCHANNELS' default
  constexpr int kCopyStages = 2;     // scatter and gather, around the reduce through the switch
  NvlsRun r;
  r.channels = kNvlsChannels;
  r.heads = f.gpus_per_node();
  const uint64_t concurrent = static_cast<uint64_t>(r.channels) * static_cast<uint64_t>(r.heads);
  uint64_t chunk = 128 << 10;
  if (bytes < 64 * concurrent * chunk && chunk > (64 << 10)) chunk = 64 << 10;
  if (bytes < 8 * concurrent * chunk && chunk > (32 << 10)) chunk = 32 << 10;
  if (bytes < 2 * concurrent * chunk && chunk > (16 << 10)) chunk = 16 << 10;
  r.chunk_bytes = chunk;
  r.loop_bytes = concurrent * chunk;
  r.loops = static_cast<int64_t>((bytes + r.loop_bytes - 1) / r.loop_bytes);
  const double wire_bytes =
      static_cast<double>(bytes) + kCopyStages * static_cast<double>(std::min(bytes, r.loop_bytes));
  r.time_ns = std::llround(f.nvls_hw_latency_us * 1e3 + wire_bytes / f.nvls_algbw_bytes_per_s * 1e9);
  return r;
}

}  // namespace dpscope
