// NetworkModel: the GPU-to-GPU network of a hardware preset, as directed links with bandwidth and
// latency, routes between GPUs, and the ring order collectives use (docs/collectives.md).
//
// Topologies (preset key `topology`, details in its [network] table):
//  * nvswitch          — every GPU has one full-duplex port (peer_link) into a non-blocking switch
//                        (HGX/DGX H100, A100). Route g->h: [g egress, h ingress]. Any GPU count.
//  * pcie-host         — GPUs in pairs (network.gpus_per_switch) behind PCIe switches whose x16
//                        uplinks (network.switch_uplink) meet at the host (a 4x T4 server). Route
//                        within a switch: [g up, h down]; across: [g up, switch up, switch down,
//                        h down], which is where concurrent transfers share bandwidth.
//  * hybrid-cube-mesh  — DGX-1: GPU pairs joined by 1 or 2 NVLinks (network.nvlinks); pairs
//                        without NVLink route over PCIe through the host (2 x host_link latency).
//                        Rings follow NVLink edges (the best bottleneck Hamiltonian cycle, as NCCL
//                        searches), so only trees and naive algorithms touch PCIe.
// Each link's usable bandwidth is its line rate times network.protocol_efficiency (NCCL's
// protocol overhead). Latencies are whole nanoseconds (rounded once, here).
//
// Thread semantics: immutable after construction; safe to share between threads.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dpscope/comm/nccl_cost_model.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/trace_format/schema.hpp"

namespace dpscope {

struct NetworkLink {
  std::string name;                    // "gpu3 egress", "switch1 uplink", "nvlink 0->3"
  double bandwidth_bytes_per_s = 0.0;  // usable (line rate x protocol efficiency), one direction
};

struct NetworkRoute {
  std::array<int, 4> links{};  // link ids, in order
  int hop_count = 0;
  int64_t latency_ns = 0;  // alpha of the whole path
  double bottleneck_bytes_per_s = 0.0;
};

class NetworkModel {
 public:
  // Throws kInvalidArgument for an unknown topology or more GPUs than it holds.
  NetworkModel(const HardwarePreset& preset, int gpu_count);

  int gpu_count() const { return gpu_count_; }
  const std::string& topology() const { return topology_; }
  const std::vector<NetworkLink>& links() const { return links_; }
  // The path from GPU `src` to GPU `dst` (src != dst).
  const NetworkRoute& route(int src, int dst) const;

  // The order in which ring algorithms visit `gpus` (returns indices into `gpus`, starting at 0).
  std::vector<int> ring_order(std::span<const int> gpus) const;

  // Duration of `bytes` over the path when nothing else uses it:
  //   latency_ns + llround(bytes / bottleneck_bandwidth * 1e9).
  int64_t uncontended_transfer_ns(int src, int dst, uint64_t bytes) const;
  // A reduction kernel combining `bytes` received into `bytes` local: reads 2x, writes 1x, at the
  // device's memory bandwidth (roofline, memory-bound): llround(3 * bytes / mem_bw * 1e9). Fused
  // into the collective (as NCCL does), so no launch latency.
  int64_t reduce_time_ns(uint64_t bytes) const;
  // The final division of ReduceOp::kAvg: reads and writes `bytes` once each.
  int64_t scale_time_ns(uint64_t bytes) const;

  // One line: "nvswitch, 8 GPUs, nvlink4 360 GB/s usable per direction, 936 ns".
  std::string describe() const;

  // NCCL's cost model for a group of `ranks` GPUs of this node (comm/nccl_cost_model.hpp), or
  // nullopt where the preset has no [nccl] table: then the flow timing of the links is the model.
  std::optional<NcclFabric> nccl_fabric(int ranks) const;

 private:
  int add_link(std::string name, double line_rate_bytes_per_s);
  void set_route(int src, int dst, std::initializer_list<int> links, int64_t latency_ns);

  std::string topology_;
  int gpu_count_ = 0;
  double efficiency_ = 1.0;
  double mem_bandwidth_bytes_per_s_ = 0.0;
  std::string peer_kind_;
  int64_t peer_latency_ns_ = 0;
  std::string through_host_;  // describe()'s note where GPUs under one switch have no peer access
  std::vector<NetworkLink> links_;
  std::vector<NetworkRoute> routes_;    // gpu_count x gpu_count
  std::vector<double> pair_bandwidth_;  // cube-mesh NVLink bandwidth per pair (0 = none)
  std::optional<NcclFabric> fabric_;    // for gpu_count ranks in one node
};

// The trace header's links for GPUs on `preset`'s topology, so the visualizer draws the machine that
// was simulated (docs/trace-format.md, "Header"). `gpu_ids[g]` is the header id of network GPU g
// (added with add_trace_device). Replaces every link those GPUs had and adds, like NetworkModel:
//  * nvswitch          — a device "nvswitch" (kind "switch") with one peer_link port per GPU;
//  * pcie-host         — devices "pcie switch S" (kind "switch"), each GPU on its switch (peer_link),
//                        each switch on the host (network.switch_uplink); no GPU-GPU or GPU-host link;
//  * hybrid-cube-mesh  — one link per NVLink pair (kind peer_link's, bandwidth links x nvlink_gbps).
// Every GPU keeps a host_link to the host except on pcie-host. A link's latency_ns is its share of
// the route's alpha (half the peer latency per switch port). Unknown topologies keep the GPUs'
// links as they were.
void add_network_links(TraceHeader& header, const HardwarePreset& preset, std::span<const int> gpu_ids);

}  // namespace dpscope
