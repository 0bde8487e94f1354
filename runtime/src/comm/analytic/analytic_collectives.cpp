// AnalyticCollectives and the `analytic` backend (comm/analytic_collectives.hpp).
#include "dpscope/comm/analytic_collectives.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "../algorithms/collective_choice.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/comm/nccl_cost_model.hpp"
#include "dpscope/trace_format/events.hpp"

namespace dpscope {
namespace {

constexpr int kMaxSingleMachineGpus = 8;  // a preset without [cluster]: one box

int ceil_log2(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The phases of NCCL's pipelined hierarchical all-reduce (tree or NVLS-tree across nodes) from the
// terms of its prediction `p` (time = latency + network pipeline fill + bytes / algbw):
//  * every phase streams the whole buffer, chunk after chunk, at the pipeline's one rate, so each
//    is busy for the stream time S = time - latency - fill, and they overlap;
//  * the first chunk enters the network only after the in-node hops up (the reduce inside the
//    node), and the in-node hops down (the all-gather) come after the network: the latency's
//    in-node part `intra_latency_ns` (the same algorithm and protocol on one node of g GPUs) is
//    split evenly between them (NCCL's chain is as long up as down), the rest of the latency and
//    the pipeline fill belong to the network phase.
// So rs = [0, a + S), net = [a, a + b + S), ag = [a + b, time), a = intra / 2, b = inter + fill.
CollectivePhases phases_of_pipeline(const NcclPrediction& p, int64_t intra_latency_ns) {
  const int64_t latency_ns = std::llround(p.latency_us * 1e3);
  const int64_t fill_ns = std::llround(p.pipeline_us * 1e3);
  const int64_t stream_ns = std::max<int64_t>(0, p.time_ns - latency_ns - fill_ns);
  const int64_t intra_ns = std::clamp<int64_t>(intra_latency_ns, 0, latency_ns);
  const int64_t up_ns = intra_ns / 2;
  const int64_t net_ns = latency_ns - intra_ns + fill_ns;
  const int64_t end_ns = std::max<int64_t>(p.time_ns, up_ns + net_ns);
  return {.rs_start_ns = 0,
          .rs_dur_ns = up_ns + stream_ns,
          .net_start_ns = up_ns,
          .net_dur_ns = net_ns + stream_ns,
          .ag_start_ns = up_ns + net_ns,
          .ag_dur_ns = end_ns - (up_ns + net_ns)};
}

}  // namespace

AnalyticCollectives::AnalyticCollectives(const HardwarePreset& preset, int world_size)
    : preset_(preset), world_size_(world_size) {
  DPS_CHECK(world_size >= 1, ErrorKind::kUsage,
            "analytic collectives: the world needs at least 1 GPU, got {}", world_size);
  const int per_node = preset.cluster.gpus_per_node;
  if (per_node == 0) {
    const int box = preset.network.max_gpus > 0 ? preset.network.max_gpus : kMaxSingleMachineGpus;
    DPS_CHECK(world_size <= box, ErrorKind::kUsage,
              "preset {} describes one machine of at most {} GPUs (it has no [cluster] table), so {} GPUs "
              "cannot be simulated; use a preset with nodes to join (a100-sxm, h100-sxm, h200)",
              preset.id, box, world_size);
    gpus_per_node_ = world_size;
  } else if (world_size <= per_node) {
    gpus_per_node_ = world_size;
  } else {
    DPS_CHECK(world_size % per_node == 0, ErrorKind::kUsage,
              "{} GPUs are not a whole number of {}-GPU nodes (preset {}); use a multiple of {}", world_size,
              per_node, preset.id, per_node);
    gpus_per_node_ = per_node;
  }
  node_net_ = std::make_unique<NetworkModel>(preset_, gpus_per_node_);
  node_gpus_.resize(static_cast<size_t>(gpus_per_node_));
  std::iota(node_gpus_.begin(), node_gpus_.end(), 0);
  node_ring_ = node_net_->ring_order(node_gpus_);
}

AnalyticCollectives::~AnalyticCollectives() = default;

std::string AnalyticCollectives::describe() const {
  if (nodes() == 1) return node_net_->describe();
  const LinkSpec& nic = preset_.cluster.nic;
  return fmt::format("{} nodes x {} GPUs: {}; {} {:.0f} GB/s per GPU, {:.1f} us", nodes(), gpus_per_node_,
                     node_net_->describe(), nic.kind,
                     nic.bandwidth_bytes_per_s * preset_.network.protocol_efficiency / 1e9,
                     nic.latency_ns / 1e3);
}

std::optional<TraceClusterInfo> AnalyticCollectives::cluster_info() const {
  if (nodes() == 1) return std::nullopt;
  return TraceClusterInfo{.nodes = nodes(),
                          .gpus_per_node = gpus_per_node_,
                          .intra_topology = preset_.topology,
                          .intra_link = preset_.peer_link.kind,
                          .intra_bandwidth_bytes_per_s = preset_.peer_link.bandwidth_bytes_per_s,
                          .intra_latency_ns = preset_.peer_link.latency_ns,
                          .rails_per_node = gpus_per_node_,  // one NIC per GPU (ClusterSpec)
                          .rail_kind = preset_.cluster.nic.kind,
                          .rail_bandwidth_bytes_per_s = preset_.cluster.nic.bandwidth_bytes_per_s,
                          .rail_latency_ns = preset_.cluster.nic.latency_ns};
}

CollectiveEstimate AnalyticCollectives::estimate(const CollectiveQuery& query) const {
  const auto key = std::make_tuple(static_cast<int>(query.op), static_cast<int>(query.algorithm), query.count,
                                   query.elem_bytes, query.average);
  {
    std::lock_guard lock(mutex_);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  }
  CollectiveEstimate e = compute(query);
  std::lock_guard lock(mutex_);
  return memo_.emplace(key, std::move(e)).first->second;
}

int64_t AnalyticCollectives::node_collective_ns(OpType op, Algorithm algo, int64_t count, uint64_t elem,
                                                int* steps, std::string* algorithm) const {
  if (gpus_per_node_ == 1) return 0;
  const std::vector<int64_t> starts(static_cast<size_t>(gpus_per_node_), 0);
  const detail::TimedSchedule t =
      detail::choose_schedule({.op = op, .algorithm = algo, .count = count, .root = 0, .elem_bytes = elem},
                              *node_net_, node_gpus_, node_ring_, starts);
  if (steps != nullptr) *steps += t.schedule.steps;
  if (algorithm != nullptr) *algorithm = t.schedule.algorithm;
  return detail::max_end(t.timing);
}

// One message of `bytes` over a NIC: alpha + bytes / usable bandwidth.
int64_t AnalyticCollectives::nic_step_ns(uint64_t bytes) const {
  const LinkSpec& nic = preset_.cluster.nic;
  const double usable = nic.bandwidth_bytes_per_s * preset_.network.protocol_efficiency;
  return std::llround(nic.latency_ns) + std::llround(static_cast<double>(bytes) / usable * 1e9);
}

CollectiveEstimate AnalyticCollectives::compute(const CollectiveQuery& q) const {
  DPS_CHECK(q.count >= 0, ErrorKind::kInvalidArgument, "analytic {}: negative element count {}",
            api_name(q.op), q.count);
  const uint64_t elem = q.elem_bytes;
  const uint64_t total_bytes = static_cast<uint64_t>(q.count) * elem;
  const int64_t scale_ns = q.average ? node_net_->scale_time_ns(total_bytes) : 0;
  CollectiveEstimate e;
  e.algorithm = q.algorithm == Algorithm::kAuto ? "ring" : to_string(q.algorithm);  // 1 GPU: no schedule
  if (nodes() == 1) {  // the real schedules on one machine (the average's division costs as in the sim)
    e.duration_ns = node_collective_ns(q.op, q.algorithm, q.count, elem, &e.steps, &e.algorithm) + scale_ns;
    return e;
  }

  const int n = world_size_;
  const int g = gpus_per_node_;
  const int N = nodes();
  if (const std::optional<NcclFabric> fabric = nccl_fabric(preset_, n, N)) {
    // NCCL's cost model across the nodes (comm/nccl_cost_model.hpp), as on one node.
    uint64_t bytes = total_bytes;
    if (q.op == OpType::kAllGather || q.op == OpType::kReduceScatter) bytes *= static_cast<uint64_t>(n);
    const NcclChoice choice = nccl_choice(q.op, q.algorithm);
    DPS_CHECK(q.algorithm != Algorithm::kNaive, ErrorKind::kUnsupported,
              "{} with the naive algorithm is not modelled across nodes ({} nodes of {} GPUs)",
              api_name(q.op), N, g);
    const NcclPrediction p = predict_nccl(*fabric, q.op, bytes, choice);
    // NCCL's trees across nodes (tree, NVLS-tree: in-node then between nodes, pipelined per chunk)
    // are the hierarchical all-reduce; the trace names them so.
    e.algorithm = q.op == OpType::kAllToAll                                 ? "pairwise"
                  : p.algo == NcclAlgo::kRing || q.op != OpType::kAllReduce ? "ring"
                                                                            : "hierarchical";
    e.steps = q.op == OpType::kAllReduce ? 2 * (n - 1) : n - 1;
    e.duration_ns = p.time_ns + scale_ns;
    if (e.algorithm == "hierarchical" && bytes > 0) {
      // The in-node part of the latency: the same algorithm and protocol on one node.
      const NcclFabric one_node = *nccl_fabric(preset_, g, 1);
      const NcclPrediction inside = predict_nccl(one_node, q.op, bytes, {.algo = p.algo, .proto = p.proto});
      e.phases = phases_of_pipeline(p, std::llround(inside.latency_us * 1e3));
    }
    return e;
  }
  const LinkSpec& peer = preset_.peer_link;
  const double peer_usable = peer.bandwidth_bytes_per_s * preset_.network.protocol_efficiency;
  // A flat ring's step: every GPU sends a chunk at once; the slowest hop is the one that leaves a
  // node over its NIC (never faster than a hop inside the node).
  auto flat_ring_step = [&](uint64_t chunk) {
    const int64_t inside =
        std::llround(peer.latency_ns) + std::llround(static_cast<double>(chunk) / peer_usable * 1e9);
    return std::max(nic_step_ns(chunk), inside);
  };
  switch (q.op) {
    case OpType::kAllReduce: {
      if (q.algorithm == Algorithm::kRing) {
        const uint64_t chunk = ceil_div(static_cast<uint64_t>(q.count), static_cast<uint64_t>(n)) * elem;
        e.algorithm = "ring";
        e.steps = 2 * (n - 1);
        e.duration_ns =
            e.steps * flat_ring_step(chunk) + (n - 1) * node_net_->reduce_time_ns(chunk) + scale_ns;
        return e;
      }
      DPS_CHECK(
          q.algorithm == Algorithm::kAuto, ErrorKind::kUnsupported,
          "all_reduce with the {} algorithm is not modelled across nodes ({} nodes of {} GPUs): use ring, "
          "or auto for the hierarchical algorithm",
          to_string(q.algorithm), N, g);
      // Reduce-scatter in the node, all-reduce of the shard across nodes on every rail, all-gather.
      const int64_t shard =
          static_cast<int64_t>(ceil_div(static_cast<uint64_t>(q.count), static_cast<uint64_t>(g)));
      const uint64_t chunk = ceil_div(static_cast<uint64_t>(shard), static_cast<uint64_t>(N)) * elem;
      // The three phases run one after the other here.
      const int64_t rs_ns =
          node_collective_ns(OpType::kReduceScatter, Algorithm::kRing, shard, elem, &e.steps, nullptr);
      const int64_t ag_ns =
          node_collective_ns(OpType::kAllGather, Algorithm::kRing, shard, elem, &e.steps, nullptr);
      const int64_t across = 2 * (N - 1) * nic_step_ns(chunk) + (N - 1) * node_net_->reduce_time_ns(chunk);
      e.steps += 2 * (N - 1);
      e.algorithm = "hierarchical";
      e.duration_ns = rs_ns + across + ag_ns + scale_ns;
      e.phases = CollectivePhases{.rs_start_ns = 0,
                                  .rs_dur_ns = rs_ns,
                                  .net_start_ns = rs_ns,
                                  .net_dur_ns = across,
                                  .ag_start_ns = rs_ns + across,
                                  .ag_dur_ns = ag_ns};
      return e;
    }
    case OpType::kBroadcast: {
      const int rounds = ceil_log2(N);
      e.steps = rounds;
      e.duration_ns = rounds * nic_step_ns(total_bytes) +
                      node_collective_ns(OpType::kBroadcast, q.algorithm, q.count, elem, &e.steps, nullptr);
      e.algorithm = "hierarchical";
      return e;
    }
    case OpType::kAllGather:
    case OpType::kReduceScatter: {
      const uint64_t block = static_cast<uint64_t>(q.count) * elem;
      e.algorithm = "ring";
      e.steps = n - 1;
      e.duration_ns = e.steps * flat_ring_step(block) +
                      (q.op == OpType::kReduceScatter ? (n - 1) * node_net_->reduce_time_ns(block) : 0) +
                      scale_ns;
      return e;
    }
    case OpType::kAllToAll: {
      // The pairwise exchange's n-1 rounds, each as slow as its hop that leaves the node.
      const uint64_t block = static_cast<uint64_t>(q.count / n) * elem;
      e.algorithm = "pairwise";
      e.steps = n - 1;
      e.duration_ns = e.steps * flat_ring_step(block);
      return e;
    }
    case OpType::kBarrier: {
      e.algorithm = "dissemination";
      e.steps = ceil_log2(n);
      e.duration_ns = e.steps * nic_step_ns(0);
      return e;
    }
    default:
      throw Error(ErrorKind::kUnsupported,
                  fmt::format("{} is not modelled across nodes ({} nodes of {} GPUs)", api_name(q.op), N, g));
  }
}

}  // namespace dpscope
