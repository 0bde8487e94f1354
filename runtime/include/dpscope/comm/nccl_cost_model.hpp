// NcclCostModel: how long NCCL takes for one collective — the one cost model behind every
// simulated time of a preset with an [nccl] table: the sim backend's traced schedules (their ops
// are re-timed to this duration, collective_choice.cpp), the analytic backend of --timing-only and
// `dpscope bench`. docs/collectives.md explains it; docs/fidelity.md measures its error against
// published nccl-tests results.
//
//   const NcclFabric f = *nccl_fabric(find_preset("h100-sxm"), 8, 1);
//   NcclPrediction p = predict_nccl(f, OpType::kAllReduce, 1 << 20);
//   p.algo, p.proto, p.time_ns;          // NcclAlgo::kRing, NcclProto::kLL, ...
//
// The model follows the structure of NCCL's own tuner (NVIDIA/nccl src/graph/tuning.cc; facts
// taken from it are cited where used, the code is ours):
//   time = latency(algo, proto) + bytes / algbw(algo, proto, channels in use)
//   latency = base(algo, proto) + hops x per-hop latency(link kind: NVLink, PCIe, network)
//     ring all-reduce: 2(n-1) hops, 2(N-1) of them over the network (N nodes);
//     tree all-reduce: 2((g-1) intra hops + log2 N network hops) (g GPUs per node);
//     NVLS (NVLink SHARP, one hop through the switch) and NVLS-tree across nodes.
//   algbw: the ring's bus bandwidth B (peer line rate x the Simple protocol's achievable
//     fraction; across nodes at most g NICs' worth) scaled per protocol (LL about half, LL128
//     0.92 and capped per channel), converted with the algorithm's bus factor. Trees get NCCL's
//     correction factors at medium sizes.
//   channels: a small message cannot fill every channel — NCCL gives each channel at least
//     threads x threshold bytes — so fewer channels (and their share of B) carry it: the smooth
//     ramp of real busbw curves, with no jump at a slice boundary. The choice always takes the
//     ramp; the time drops it where the GPUs meet in host memory (no peer access, NCCL's SHM
//     transport): there every channel's flow crosses the one uplink that B already shares out, and
//     the channels fewer than all take the whole path (docs/collectives.md, "Channels").
//   across nodes, two terms NCCL's tuner lacks or keeps elsewhere:
//     two nodes: the tree's one network edge carries each byte once per direction, so its chains
//       run at up to twice the NICs' bus bandwidth (NCCL's search raises the tree's intra-node
//       bandwidth so, and its tuner rates <= 2 nodes by it);
//     the network pipeline: a channel's proxy forwards a network step only once the GPU has
//       written all of it, so each network hop of a tree (and NVLS-tree) adds one step's wire time
//       at the channel's share of the NICs: min(step, bytes per channel) / (g x NIC / channels).
//       Rings keep every link busy from their first step and do not pay it.
// The (algo, proto) pair with the least predicted time wins, as in NCCL's tuner, unless forced
// (like NCCL_ALGO / NCCL_PROTO).
//
// all_to_all is NCCL point-to-point (algo kP2p, always the Simple protocol here): each rank sends
// bytes/n to each of its n-1 peers and receives as much. On one node of g GPUs the g-1 blocks
// leave over the GPU's NVLink (or PCIe):
//   time = base(ring, Simple) + (g-1) x hop(intra, Simple) + (g-1) x bytes/n / B_intra.
// Across N nodes of NVLink-joined GPUs with a NIC each, NCCL uses PXN (NCCL_P2P_PXN_LEVEL, default
// 2, "use PXN as much as possible to maximize aggregation", src/graph/search.cc): a block for a
// remote GPU first crosses NVLink to the local GPU on that GPU's rail, whose NIC sends it, and the
// blocks of all local GPUs for one remote GPU go as one message. The NICs carry the same (n-g)
// blocks on rail-aligned paths, NVLink carries (g-1) x N (the local peers' and the relayed ones),
// and each NIC sends N-1 messages, one per remote node:
//   time = base + g x hop(intra) + (N-1) x hop(network)
//        + max((g-1) N x bytes/n / B_intra, (n-g) x bytes/n / B_nic);
// without NVLink (no PXN) every remote peer is a message of its own: (g-1) x hop(intra) +
// (n-g) x hop(network), (g-1) blocks over the intra link. One hop latency per message, paid in
// turn: an upper bound; B_intra, B_nic as above. Not fitted to any measurement and not yet in
// docs/fidelity.md.
//
// Thread semantics: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dpscope/comm/types.hpp"
#include "dpscope/core/preset.hpp"

namespace dpscope {

// kP2p: not one of NCCL's collective algorithms but its point-to-point sends, which is how NCCL
// runs an all-to-all (ncclGroupStart, one ncclSend and ncclRecv per peer, ncclGroupEnd).
enum class NcclAlgo : uint8_t { kRing, kTree, kNvls, kP2p };
enum class NcclProto : uint8_t { kLL, kLL128, kSimple };
const char* to_string(NcclAlgo a);   // "ring", "tree", "nvls" (across nodes NVLS-tree, named nvls too), "p2p"
const char* to_string(NcclProto p);  // "LL", "LL128", "Simple"
// Parses "ll", "ll128", "simple" (case-insensitive); kUsage error naming `what` otherwise.
NcclProto parse_nccl_proto(std::string_view text, std::string_view what = "--proto");
// NCCL_ALGO's words: "ring", "tree", "nvls" (case-insensitive); nullopt for any other.
std::optional<NcclAlgo> parse_nccl_algo(std::string_view text);

enum class LinkClass : uint8_t { kNvlink, kPcie };
enum class GpuArch : uint8_t { kVolta, kAmpere, kHopper };  // NCCL's tables' rows (Turing: Volta)

// What the model needs of one communicator: ranks in nodes of g GPUs, the links between them.
struct NcclFabric {
  int ranks = 1;
  int nodes = 1;
  LinkClass intra = LinkClass::kNvlink;
  GpuArch arch = GpuArch::kHopper;
  int channels = 1;
  double intra_bytes_per_s = 0.0;        // ring bus bandwidth inside a node at the Simple protocol
  double chain_intra_bytes_per_s = 0.0;  // the same for a chain (broadcast, reduce) where it differs:
                                         // without peer access under one switch; 0 = intra's
  double nic_bytes_per_s = 0.0;          // one GPU's NIC (rail) at the Simple protocol
  double net_extra_latency_us = 0.0;     // per network hop beyond NCCL's InfiniBand figure (NCCL's
                                         // latencyInter: a slower transport such as EFA or TCPXO)
  double nvls_algbw_bytes_per_s = 0.0;   // NVLink SHARP all-reduce algbw; 0 = no NVLS
  double nvls_hw_latency_us = -1.0;      // NVLS's latency in a node as the hardware runs it; < 0 =
                                         // NCCL's tuner figure (which always decides the choice)
  bool net_simple_only = false;          // across nodes only the Simple protocol (ClusterSpec)
  bool host_memory_path = false;         // the GPUs meet in host memory (NCCL's SHM transport, no
                                         // peer access): the shared uplink, not the channels a
                                         // message fills, bounds its time (predict_nccl)
  int gpus_per_node() const { return ranks / nodes; }
};

// The fabric of `ranks` GPUs in `nodes` nodes of `preset`; nullopt where the preset has no [nccl]
// table (its collectives keep the alpha-beta flow timing of its links).
std::optional<NcclFabric> nccl_fabric(const HardwarePreset& preset, int ranks, int nodes);

// The fixed cost of one round of point-to-point sends on `f` (a kernel launch and an LL hop:
// NCCL's ring LL base latency plus one hop's, a network hop when the fabric spans nodes), in ns.
// What a collective NCCL has no algorithm for (dpscope's naive schedules) pays per round on top of
// its bytes' time, so that it is not priced below the collectives NCCL runs.
int64_t nccl_round_latency_ns(const NcclFabric& f);

struct NcclChoice {
  std::optional<NcclAlgo> algo;    // forced (NCCL_ALGO), or the tuner's choice
  std::optional<NcclProto> proto;  // forced (NCCL_PROTO), or the tuner's choice
};

// What dpscope's algorithm for `op` forces in NCCL's terms: a ring or tree all-reduce is NCCL_ALGO;
// the other ops' schedules (binomial trees for broadcast and reduce) move data as they do, and NCCL
// would run them as rings, so they leave the choice to the tuner. `algorithm` is the effective one
// (kDefault already resolved); naive has no NCCL counterpart and forces nothing.
NcclChoice nccl_choice(OpType op, Algorithm algorithm, std::optional<NcclProto> proto = std::nullopt);

struct NcclPrediction {
  NcclAlgo algo = NcclAlgo::kRing;
  NcclProto proto = NcclProto::kSimple;
  int channels = 1;        // channels the message fills
  double latency_us = 0;   // the latency term
  double pipeline_us = 0;  // the network pipeline's fill (trees across nodes), part of time_ns
  double algbw_gbps = 0;   // bytes / (time - latency - pipeline), GB/s
  int64_t time_ns = 0;
  std::string label() const;  // "ring/LL128", "nvls/Simple"
};

// `bytes` as nccl-tests counts them: the buffer of all_reduce / broadcast / reduce, the whole
// output of all_gather, the whole input of reduce_scatter. Ops NCCL has no collective for (barrier
// is an all-reduce of 4 bytes here, as PyTorch's barrier; scatter, gather: not modelled) throw.
// A forced algorithm or protocol the op or fabric lacks is a kUsage error naming it.
NcclPrediction predict_nccl(const NcclFabric& fabric, OpType op, uint64_t bytes, NcclChoice choice = {});

// An NVLS all-reduce in one node timed as NCCL runs it (NVIDIA/nccl 2.18-2.23), which predict_nccl()
// does not do: docs/fidelity.md's NVLS finding compares the two on the measured tables and says why
// the model keeps its own. The facts, from NCCL's source:
//   channels: NCCL_NVLS_NCHANNELS (16) whatever the size; src/enqueue.cc cuts the channels of a
//     small message for ring and tree only ("NVLS should not need more than 16 channels");
//   heads: one per GPU of the node (src/graph/search.cc: the intra-node NVLS graph "pulls evenly
//     from all GPUs"), each reducing its share through the switch;
//   chunk: per channel and head, 128 KiB at most, 64 / 32 / 16 KiB when the message is under
//     64 / 8 / 2 x channels x heads x the chunk so far (src/enqueue.cc); one loop of the kernel
//     moves channels x heads x chunk (src/enqueue.cc, ncclPatternNvls: nchunksPerLoop = nHeads);
//   stages: the kernel's thread groups scatter a loop into the heads' buffers, reduce it through
//     the switch's multicast, gather it back (src/device/all_reduce.h), so the first loop passes
//     three stages before the loops pipeline:
//   time = nvls_hw_latency_us + (bytes + 2 x min(bytes, loop)) / NVLS algbw.
struct NvlsRun {
  int channels = 0;
  int heads = 0;
  uint64_t chunk_bytes = 0;  // per channel and head
  uint64_t loop_bytes = 0;   // channels x heads x chunk
  int64_t loops = 0;         // ceil(bytes / loop_bytes)
  int64_t time_ns = 0;
};
// `f` one node with NVLS and its own latency (nvls_hw_latency_us >= 0), `bytes` > 0; otherwise a
// kInvalidArgument error.
NvlsRun nvls_as_nccl_runs(const NcclFabric& f, uint64_t bytes);

}  // namespace dpscope
