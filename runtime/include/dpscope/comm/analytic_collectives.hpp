// AnalyticCollectives: how long a collective takes in a world of any size — 1 GPU to tens of
// thousands, one node or many — computed from the schedules' structure instead of by rank threads
// that meet at every step (as analytical simulators such as ASTRA-sim's analytical backend do).
// What makes a timing-only DDP step of 1,024 GPUs take a fraction of a second (docs/scaling.md).
//
//   AnalyticCollectives model(find_preset("h100-sxm"), 1024);  // 128 nodes of 8 GPUs
//   auto ar = model.estimate({.op = OpType::kAllReduce, .count = 25 << 18});
//   ar.duration_ns; ar.algorithm;                             // hierarchical
//
// The world: world_size GPUs in nodes of gpus_per_node (the preset's [cluster]; a preset without
// one is a single machine of at most 8 GPUs). Node k holds ranks [k*g, (k+1)*g); GPU i of every
// node reaches GPU i of every other node through its own NIC (a rail-optimized fabric), so the g
// rails carry traffic side by side without sharing links.
//  * Within one node the real schedules (ring, tree, naive: collective_choice.cpp's choice) are
//    timed by simulate_schedule on the preset's NetworkModel, so a one-node world gets exactly the
//    sim backend's durations.
//  * Across nodes, closed forms of the alpha-beta model, with c the chunk a step moves:
//      ring (flat, over all n GPUs): 2(n-1) steps; each lasts as long as its slowest hop, the NIC
//        where the ring leaves a node (alpha_nic + c/B_nic); n-1 of them also reduce c.
//      hierarchical (NCCL's choice on multi-node; `auto`): reduce-scatter inside the node (each GPU
//        ends with S/g), a ring all-reduce of that S/g across the nodes on every rail at once, then
//        an all-gather inside the node. The 2(N-1) inter-node steps of N nodes replace 2(n-1).
//      broadcast: a binomial tree over the nodes (ceil(log2 N) rounds of alpha_nic + S/B_nic), then
//        the node's own broadcast; all_gather / reduce_scatter: a flat ring of n-1 steps; barrier:
//        ceil(log2 n) rounds of alpha_nic.
//    The hierarchical all-reduce's span carries its three phases (CollectivePhases).
//    tree and naive all-reduce across nodes, scatter, gather and point-to-point are not modelled
//    (kUnsupported naming the op).
// Every rank is symmetric and starts together, so a duration holds for every rank.
//
// Thread semantics: estimate() is thread-safe (results are memoized under a mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "dpscope/comm/backend.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/comm/types.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/trace_format/events.hpp"

namespace dpscope {

struct CollectiveQuery {
  OpType op = OpType::kAllReduce;
  Algorithm algorithm = Algorithm::kAuto;
  int64_t count = 0;  // elements per rank (all_gather: each rank's block; reduce_scatter: its output)
  uint64_t elem_bytes = 4;
  bool average = false;  // ReduceOp::kAvg: the final division by n
};

struct CollectiveEstimate {
  int64_t duration_ns = 0;
  std::string algorithm;  // "ring", "tree", "naive", "hierarchical"
  int steps = 0;          // communication steps, as the trace's `steps`
  // A hierarchical all-reduce across nodes: its three phases as the model timed them (offsets
  // from the collective's start; see phases_of_pipeline in analytic_collectives.cpp). Empty for
  // every other collective.
  std::optional<CollectivePhases> phases;
};

class AnalyticCollectives {
 public:
  // Throws kUsage when world_size < 1, when a preset without [cluster] is asked for more GPUs than
  // one machine holds, or when world_size is not a whole number of nodes.
  AnalyticCollectives(const HardwarePreset& preset, int world_size);
  ~AnalyticCollectives();
  AnalyticCollectives(const AnalyticCollectives&) = delete;
  AnalyticCollectives& operator=(const AnalyticCollectives&) = delete;

  int world_size() const { return world_size_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int nodes() const { return world_size_ / gpus_per_node_; }
  // "128 nodes x 8 GPUs: nvswitch, nvlink4 360 GB/s usable, 936 ns; ib-ndr 50 GB/s per GPU, 2.0 us"
  std::string describe() const;
  // The cluster as modelled, for the trace header; nullopt when the world is one node.
  std::optional<TraceClusterInfo> cluster_info() const;

  // Throws kUnsupported for what is not modelled (see the file comment).
  CollectiveEstimate estimate(const CollectiveQuery& query) const;

 private:
  CollectiveEstimate compute(const CollectiveQuery& q) const;
  int64_t node_collective_ns(OpType op, Algorithm algo, int64_t count, uint64_t elem, int* steps,
                             std::string* algorithm) const;
  int64_t nic_step_ns(uint64_t bytes) const;

  HardwarePreset preset_;
  int world_size_ = 1;
  int gpus_per_node_ = 1;
  std::unique_ptr<NetworkModel> node_net_;  // one node (or the whole single-node world)
  std::vector<int> node_gpus_;              // 0 .. g-1
  std::vector<int> node_ring_;
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<int, int, int64_t, uint64_t, bool>, CollectiveEstimate> memo_;
};

// A Backend that is rank 0 of a symmetric world of model->world_size() ranks: each collective
// charges this rank's comm stream with the model's duration (starting once both the comm stream
// is free and the compute stream reached the call, as the sim backend does) and writes the same
// `collective` span and `work_completed` instant a sim rank writes — without any other rank
// existing. Gradients are timing-only (Tensor::meta); small float32 tensors with data (DDP's model
// check and bucket order) get what a world of identical ranks computes: all_gather repeats this
// rank's block, all_reduce applies the op to world-size equal values. Name "analytic".
std::unique_ptr<Backend> make_analytic_backend(const Device& device,
                                               std::shared_ptr<const AnalyticCollectives> model);

}  // namespace dpscope
