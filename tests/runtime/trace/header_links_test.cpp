// The trace header's links come from the network model of the preset's topology
// (add_network_links, comm/network.hpp): the visualizer draws the machine that was simulated.
// Exact device lists and links for the three topologies; a T4 box has no GPU-GPU link.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dpscope/comm/network.hpp"
#include "dpscope/core/device.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/trace/recorder.hpp"

namespace dpscope {
namespace {

struct Built {
  TraceHeader header;
  std::vector<int> gpu_ids;
};

Built header_for(const std::string& preset_id, int gpus) {
  const HardwarePreset hw = find_preset(preset_id);
  Built b;
  for (int g = 0; g < gpus; ++g) b.gpu_ids.push_back(add_trace_device(b.header, Device::sim(g, hw)));
  add_network_links(b.header, hw, b.gpu_ids);
  return b;
}

// "a-b" for each link (names of its devices), in header order.
std::vector<std::string> link_names(const TraceHeader& h) {
  std::vector<std::string> out;
  for (const TraceLinkInfo& l : h.links) out.push_back(h.devices[l.src].name + "-" + h.devices[l.dst].name);
  return out;
}

TEST(HeaderLinks, AddTraceDeviceLinksEachGpuToTheHostOnly) {
  const HardwarePreset hw = find_preset("h100-sxm");
  TraceHeader h;
  add_trace_device(h, Device::sim(0, hw));
  add_trace_device(h, Device::sim(1, hw));
  EXPECT_EQ(link_names(h), (std::vector<std::string>{"sim:0-host", "sim:1-host"}));
}

TEST(HeaderLinks, T4HasAPcieHostTreeAndNoGpuToGpuLink) {
  const HardwarePreset t4 = find_preset("t4");
  const Built b = header_for("t4", 4);
  std::vector<std::string> names;
  for (const TraceDeviceInfo& d : b.header.devices) names.push_back(d.name + ":" + d.kind);
  EXPECT_EQ(names, (std::vector<std::string>{"sim:0:sim", "host:host", "sim:1:sim", "sim:2:sim", "sim:3:sim",
                                             "pcie switch 0:switch", "pcie switch 1:switch"}));
  EXPECT_EQ(link_names(b.header),
            (std::vector<std::string>{"pcie switch 0-host", "pcie switch 1-host", "sim:0-pcie switch 0",
                                      "sim:1-pcie switch 0", "sim:2-pcie switch 1", "sim:3-pcie switch 1"}));
  for (const TraceLinkInfo& l : b.header.links) {
    const bool uplink = b.header.devices[l.dst].kind == "host";
    const LinkSpec& spec = uplink ? t4.network.switch_uplink : t4.peer_link;
    EXPECT_EQ(l.kind, spec.kind);
    EXPECT_EQ(l.bandwidth_bytes_per_s, spec.bandwidth_bytes_per_s);
    EXPECT_EQ(l.latency_ns, uplink ? spec.latency_ns : spec.latency_ns * 0.5);
  }
}

TEST(HeaderLinks, NvswitchIsOneSwitchWithAPortPerGpu) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  const Built b = header_for("h100-sxm", 3);
  ASSERT_EQ(b.header.devices.size(), 5u);
  EXPECT_EQ(b.header.devices[4].name, "nvswitch");
  EXPECT_EQ(b.header.devices[4].kind, "switch");
  EXPECT_EQ(link_names(b.header),
            (std::vector<std::string>{"sim:0-host", "sim:1-host", "sim:2-host", "sim:0-nvswitch",
                                      "sim:1-nvswitch", "sim:2-nvswitch"}));
  EXPECT_EQ(b.header.links[3].kind, h100.peer_link.kind);
  EXPECT_EQ(b.header.links[3].bandwidth_bytes_per_s, h100.peer_link.bandwidth_bytes_per_s);
  EXPECT_EQ(b.header.links[3].latency_ns, h100.peer_link.latency_ns * 0.5);
}

TEST(HeaderLinks, HybridCubeMeshHasOneLinkPerNvlinkPair) {
  const HardwarePreset v100 = find_preset("v100-sxm2");
  const Built b = header_for("v100-sxm2", 8);
  EXPECT_EQ(b.header.devices.size(), 9u) << "8 GPUs and the host, no switch";
  ASSERT_EQ(b.header.links.size(), 8 + v100.network.nvlinks.size());
  for (size_t i = 0; i < v100.network.nvlinks.size(); ++i) {
    const NvlinkConnection& c = v100.network.nvlinks[i];
    const TraceLinkInfo& l = b.header.links[8 + i];
    EXPECT_EQ(l.src, b.gpu_ids[c.a]);
    EXPECT_EQ(l.dst, b.gpu_ids[c.b]);
    EXPECT_EQ(l.bandwidth_bytes_per_s, v100.network.nvlink_bandwidth_bytes_per_s * c.links);
  }
  // Fewer GPUs in use: only the pairs among them.
  const Built four = header_for("v100-sxm2", 4);
  for (const TraceLinkInfo& l : four.header.links) {
    EXPECT_LT(l.src, 5);
    EXPECT_LT(l.dst, 5);
  }
}

}  // namespace
}  // namespace dpscope
