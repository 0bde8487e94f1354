// NetworkModel: links, routes and ring order for the presets' topologies (comm/network.hpp).
#include "dpscope/comm/network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "dpscope/base/error.hpp"
#include "dpscope/core/device.hpp"

namespace dpscope {
namespace {

int64_t round_ns(double ns) { return static_cast<int64_t>(std::llround(ns)); }

}  // namespace

NetworkModel::NetworkModel(const HardwarePreset& preset, int gpu_count)
    : topology_(preset.topology),
      gpu_count_(gpu_count),
      efficiency_(preset.network.protocol_efficiency),
      mem_bandwidth_bytes_per_s_(preset.mem_bandwidth_bytes_per_s),
      peer_kind_(preset.peer_link.kind),
      peer_latency_ns_(round_ns(preset.peer_link.latency_ns)),
      fabric_(dpscope::nccl_fabric(preset, gpu_count, 1)) {
  DPS_CHECK(gpu_count >= 1, ErrorKind::kInvalidArgument, "a network needs at least one GPU, got {}",
            gpu_count);
  const int max_gpus = preset.network.max_gpus;
  DPS_CHECK(max_gpus == 0 || gpu_count <= max_gpus, ErrorKind::kInvalidArgument,
            "preset {} ({} topology) holds {} GPUs; {} requested", preset.id, topology_, max_gpus, gpu_count);
  DPS_CHECK(preset.peer_link.bandwidth_bytes_per_s > 0, ErrorKind::kInvalidArgument,
            "preset {}: peer_link bandwidth must be positive", preset.id);
  routes_.resize(static_cast<size_t>(gpu_count) * gpu_count);
  const double peer_bw = preset.peer_link.bandwidth_bytes_per_s;

  if (topology_ == "nvswitch") {
    std::vector<int> egress(gpu_count), ingress(gpu_count);
    for (int g = 0; g < gpu_count; ++g) {
      egress[g] = add_link(fmt::format("gpu{} -> switch", g), peer_bw);
      ingress[g] = add_link(fmt::format("switch -> gpu{}", g), peer_bw);
    }
    for (int s = 0; s < gpu_count; ++s)
      for (int d = 0; d < gpu_count; ++d)
        if (s != d) set_route(s, d, {egress[s], ingress[d]}, peer_latency_ns_);
  } else if (topology_ == "pcie-host") {
    const int per_switch = preset.network.gpus_per_switch > 0 ? preset.network.gpus_per_switch : gpu_count;
    const int switches = (gpu_count + per_switch - 1) / per_switch;
    const LinkSpec& uplink = preset.network.switch_uplink;
    const bool has_uplinks = preset.network.gpus_per_switch > 0;
    DPS_CHECK(!has_uplinks || uplink.bandwidth_bytes_per_s > 0, ErrorKind::kInvalidArgument,
              "preset {}: pcie-host with gpus_per_switch needs [network.switch_uplink]", preset.id);
    std::vector<int> up(gpu_count), down(gpu_count), sw_up(switches), sw_down(switches);
    for (int g = 0; g < gpu_count; ++g) {
      up[g] = add_link(fmt::format("gpu{} -> pcie switch{}", g, g / per_switch), peer_bw);
      down[g] = add_link(fmt::format("pcie switch{} -> gpu{}", g / per_switch, g), peer_bw);
    }
    for (int s = 0; s < switches && has_uplinks; ++s) {
      sw_up[s] = add_link(fmt::format("pcie switch{} -> host", s), uplink.bandwidth_bytes_per_s);
      sw_down[s] = add_link(fmt::format("host -> pcie switch{}", s), uplink.bandwidth_bytes_per_s);
    }
    if (has_uplinks && !preset.network.peer_to_peer && gpu_count > 1) {
      const int sharing = std::min(gpu_count, per_switch);
      through_host_ = fmt::format(
          "; no peer access: through host memory, each switch's {} {:.0f} GB/s uplink shared by its {} GPUs "
          "({:.1f} GB/s usable each)",
          uplink.kind, uplink.bandwidth_bytes_per_s / 1e9, sharing,
          uplink.bandwidth_bytes_per_s * efficiency_ / sharing / 1e9);
    }
    for (int s = 0; s < gpu_count; ++s) {
      for (int d = 0; d < gpu_count; ++d) {
        if (s == d) continue;
        const int ss = s / per_switch, ds = d / per_switch;
        // Without peer access (network.peer_to_peer = false) a transfer between two GPUs under one
        // switch also goes up to host memory and back down (NCCL's SHM transport).
        const bool through_host = has_uplinks && (ss != ds || !preset.network.peer_to_peer);
        if (!through_host) {
          set_route(s, d, {up[s], down[d]}, peer_latency_ns_);
        } else {
          set_route(s, d, {up[s], sw_up[ss], sw_down[ds], down[d]},
                    peer_latency_ns_ + round_ns(uplink.latency_ns));
        }
      }
    }
  } else if (topology_ == "hybrid-cube-mesh") {
    const double brick = preset.network.nvlink_bandwidth_bytes_per_s;
    DPS_CHECK(brick > 0 && !preset.network.nvlinks.empty(), ErrorKind::kInvalidArgument,
              "preset {}: hybrid-cube-mesh needs network.nvlink_gbps and network.nvlinks", preset.id);
    pair_bandwidth_.assign(static_cast<size_t>(gpu_count) * gpu_count, 0.0);
    std::vector<int> nvlink(static_cast<size_t>(gpu_count) * gpu_count, -1);
    for (const NvlinkConnection& c : preset.network.nvlinks) {
      if (c.a >= gpu_count || c.b >= gpu_count) continue;  // a box with fewer GPUs in use
      for (auto [s, d] : {std::pair{c.a, c.b}, std::pair{c.b, c.a}}) {
        nvlink[s * gpu_count + d] =
            add_link(fmt::format("nvlink x{} gpu{} -> gpu{}", c.links, s, d), brick * c.links);
        pair_bandwidth_[s * gpu_count + d] = brick * c.links;
      }
    }
    const double host_bw = preset.host_link.bandwidth_bytes_per_s;
    std::vector<int> up(gpu_count), down(gpu_count);
    for (int g = 0; g < gpu_count; ++g) {
      up[g] = add_link(fmt::format("gpu{} -> host (pcie)", g), host_bw);
      down[g] = add_link(fmt::format("host -> gpu{} (pcie)", g), host_bw);
    }
    const int64_t pcie_latency = 2 * round_ns(preset.host_link.latency_ns);
    for (int s = 0; s < gpu_count; ++s) {
      for (int d = 0; d < gpu_count; ++d) {
        if (s == d) continue;
        if (const int link = nvlink[s * gpu_count + d]; link >= 0) {
          set_route(s, d, {link}, peer_latency_ns_);
        } else {
          set_route(s, d, {up[s], down[d]}, pcie_latency);
        }
      }
    }
  } else {
    throw Error(
        ErrorKind::kInvalidArgument,
        fmt::format("preset {}: unknown topology '{}' (expected nvswitch, pcie-host or hybrid-cube-mesh)",
                    preset.id, topology_));
  }
}

std::optional<NcclFabric> NetworkModel::nccl_fabric(int ranks) const {
  if (!fabric_) return std::nullopt;
  NcclFabric f = *fabric_;
  f.ranks = ranks;
  return f;
}

int NetworkModel::add_link(std::string name, double line_rate_bytes_per_s) {
  links_.push_back({std::move(name), line_rate_bytes_per_s * efficiency_});
  return static_cast<int>(links_.size()) - 1;
}

void NetworkModel::set_route(int src, int dst, std::initializer_list<int> links, int64_t latency_ns) {
  NetworkRoute& r = routes_[static_cast<size_t>(src) * gpu_count_ + dst];
  r.hop_count = 0;
  r.bottleneck_bytes_per_s = std::numeric_limits<double>::infinity();
  for (int link : links) {
    r.links[r.hop_count++] = link;
    r.bottleneck_bytes_per_s = std::min(r.bottleneck_bytes_per_s, links_[link].bandwidth_bytes_per_s);
  }
  r.latency_ns = latency_ns;
}

const NetworkRoute& NetworkModel::route(int src, int dst) const {
  DPS_ASSERT(src >= 0 && dst >= 0 && src < gpu_count_ && dst < gpu_count_ && src != dst,
             "route({}, {}) on a network of {} GPUs", src, dst, gpu_count_);
  return routes_[static_cast<size_t>(src) * gpu_count_ + dst];
}

std::vector<int> NetworkModel::ring_order(std::span<const int> gpus) const {
  const int n = static_cast<int>(gpus.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (pair_bandwidth_.empty() || n <= 3) return order;  // uniform, or every order is the same ring
  // Hybrid cube-mesh: the Hamiltonian cycle whose slowest edge is fastest (ties: the
  // lexicographically first), position 0 fixed — NCCL's ring search, done exhaustively.
  auto edge_bw = [&](int a, int b) {
    return pair_bandwidth_[static_cast<size_t>(gpus[a]) * gpu_count_ + gpus[b]];
  };
  std::vector<int> best = order;
  double best_bw = -1.0;
  std::vector<int> perm = order;
  do {
    double bw = std::numeric_limits<double>::infinity();
    for (int i = 0; i < n; ++i) bw = std::min(bw, edge_bw(perm[i], perm[(i + 1) % n]));
    if (bw > best_bw) {
      best_bw = bw;
      best = perm;
    }
  } while (std::next_permutation(perm.begin() + 1, perm.end()));
  return best_bw > 0.0 ? best : order;
}

int64_t NetworkModel::uncontended_transfer_ns(int src, int dst, uint64_t bytes) const {
  const NetworkRoute& r = route(src, dst);
  return r.latency_ns + round_ns(static_cast<double>(bytes) / r.bottleneck_bytes_per_s * 1e9);
}

int64_t NetworkModel::reduce_time_ns(uint64_t bytes) const {
  return round_ns(3.0 * static_cast<double>(bytes) / mem_bandwidth_bytes_per_s_ * 1e9);
}

int64_t NetworkModel::scale_time_ns(uint64_t bytes) const {
  return round_ns(2.0 * static_cast<double>(bytes) / mem_bandwidth_bytes_per_s_ * 1e9);
}

std::string NetworkModel::describe() const {
  double peer = 0.0;
  for (const NetworkLink& l : links_) peer = std::max(peer, l.bandwidth_bytes_per_s);
  return fmt::format("{}, {} GPU{}, {} {:.0f} GB/s usable per direction ({:.0f}% of line rate), {} ns{}",
                     topology_, gpu_count_, gpu_count_ == 1 ? "" : "s", peer_kind_, peer / 1e9,
                     efficiency_ * 100.0, peer_latency_ns_, through_host_);
}

// ---- trace header links ----

namespace {

int add_header_node(TraceHeader& header, std::string name, std::string kind) {
  const int id = static_cast<int>(header.devices.size());  // as add_trace_device numbers them
  header.devices.push_back({.id = id, .name = std::move(name), .kind = std::move(kind)});
  return id;
}

int ensure_host(TraceHeader& header) {
  if (header.host_id < 0) header.host_id = add_header_node(header, "host", "host");
  return header.host_id;
}

void add_header_link(TraceHeader& header, int a, int b, const std::string& kind, double bandwidth_bytes_per_s,
                     double latency_ns) {
  header.links.push_back({.src = a,
                          .dst = b,
                          .kind = kind,
                          .bandwidth_bytes_per_s = bandwidth_bytes_per_s,
                          .latency_ns = latency_ns});
}

}  // namespace

void add_network_links(TraceHeader& header, const HardwarePreset& preset, std::span<const int> gpu_ids) {
  const std::string& topology = preset.topology;
  if (topology != "nvswitch" && topology != "pcie-host" && topology != "hybrid-cube-mesh") return;
  const int n = static_cast<int>(gpu_ids.size());
  auto is_gpu = [&](int id) { return std::find(gpu_ids.begin(), gpu_ids.end(), id) != gpu_ids.end(); };
  std::erase_if(header.links, [&](const TraceLinkInfo& l) { return is_gpu(l.src) || is_gpu(l.dst); });
  const LinkSpec& peer = preset.peer_link;
  const LinkSpec& host_link = preset.host_link;
  if (topology == "pcie-host") {
    const int per_switch = preset.network.gpus_per_switch > 0 ? preset.network.gpus_per_switch : n;
    const bool has_uplinks = preset.network.gpus_per_switch > 0;
    const LinkSpec& uplink = has_uplinks ? preset.network.switch_uplink : host_link;
    const int host = ensure_host(header);
    std::vector<int> switches;
    for (int s = 0; s * per_switch < n; ++s) {
      switches.push_back(add_header_node(header, fmt::format("pcie switch {}", s), "switch"));
      add_header_link(header, switches.back(), host, uplink.kind, uplink.bandwidth_bytes_per_s,
                      uplink.latency_ns);
    }
    for (int g = 0; g < n; ++g)
      add_header_link(header, gpu_ids[g], switches[static_cast<size_t>(g / per_switch)], peer.kind,
                      peer.bandwidth_bytes_per_s, peer.latency_ns * 0.5);
    return;
  }
  const int host = ensure_host(header);
  for (int g = 0; g < n; ++g)
    add_header_link(header, gpu_ids[g], host, host_link.kind, host_link.bandwidth_bytes_per_s,
                    host_link.latency_ns);
  if (topology == "nvswitch") {
    if (n < 2) return;
    const int nvswitch = add_header_node(header, "nvswitch", "switch");
    for (int g = 0; g < n; ++g)
      add_header_link(header, gpu_ids[g], nvswitch, peer.kind, peer.bandwidth_bytes_per_s,
                      peer.latency_ns * 0.5);
    return;
  }
  for (const NvlinkConnection& c : preset.network.nvlinks) {  // hybrid-cube-mesh
    if (c.a >= n || c.b >= n) continue;                       // a box with fewer GPUs in use
    add_header_link(header, gpu_ids[c.a], gpu_ids[c.b], peer.kind,
                    preset.network.nvlink_bandwidth_bytes_per_s * c.links, peer.latency_ns);
  }
}

}  // namespace dpscope
