// Hardware presets and the roofline / alpha-beta timing model.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "dpscope/base/error.hpp"
#include "dpscope/core/timing.hpp"

namespace dpscope {
namespace {

TEST(Preset, ShipsTheDatasheetPresets) {
  const std::vector<std::string> ids = list_presets();
  for (const char* id : {"a100-sxm", "h100-sxm", "h200", "t4", "v100-sxm2"})
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
  const HardwarePreset h100 = find_preset("h100-sxm");
  EXPECT_EQ(h100.memory_bytes, 80'000'000'000u);
  EXPECT_DOUBLE_EQ(h100.mem_bandwidth_bytes_per_s, 3.35e12);
  EXPECT_DOUBLE_EQ(h100.peak_flops, 67e12);
  EXPECT_DOUBLE_EQ(h100.peer_link.bandwidth_bytes_per_s, 450e9);
  EXPECT_FALSE(h100.sources.empty());
  EXPECT_EQ(find_preset("h200").memory_bytes, 141'000'000'000u);
}

TEST(Preset, UnknownPresetListsTheAvailableOnes) {
  try {
    find_preset("b200");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("unknown preset 'b200' (available: a100-sxm, h100-sxm"),
              std::string::npos)
        << e.what();
  }
}

TEST(Preset, MalformedFileNamesFileAndKey) {
  const auto path = std::filesystem::temp_directory_path() / "dpscope_bad_preset.toml";
  std::ofstream(path) << "name = \"x\"\nmemory_gb = \"lots\"\n";
  try {
    load_preset_file(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(std::string(e.what()).find("missing or non-numeric key 'memory_gb'"), std::string::npos)
        << e.what();
  }
  std::ofstream(path) << "name = [\n";
  EXPECT_THROW(load_preset_file(path), Error);
  std::filesystem::remove(path);
}

TEST(Timing, KernelIsLaunchLatencyPlusRoofline) {
  HardwarePreset p;
  p.peak_flops = 1e12;                 // 1,000 FLOP per ns
  p.mem_bandwidth_bytes_per_s = 1e11;  // 100 bytes per ns
  p.launch_latency_ns = 2000;
  EXPECT_EQ(kernel_time_ns(p, {.flops = 1e6, .bytes = 1e3}), 2000 + 1'000);   // compute-bound
  EXPECT_EQ(kernel_time_ns(p, {.flops = 1e3, .bytes = 1e6}), 2000 + 10'000);  // memory-bound
}

TEST(Timing, TransferIsAlphaPlusBytesOverBandwidth) {
  const LinkSpec link{.kind = "pcie4", .bandwidth_bytes_per_s = 32e9, .latency_ns = 1000};
  EXPECT_EQ(transfer_time_ns(link, 32'000), 1000 + 1000);
  EXPECT_EQ(transfer_time_ns(link, 0), 1000);
}

TEST(Timing, KernelScopeChargesTheSimulatedStream) {
  Device sim = Device::sim(0, find_preset("a100-sxm"));
  const KernelCost cost{.flops = 2.0 * 128 * 784 * 512, .bytes = 4.0 * (128 * 784 + 784 * 512 + 128 * 512)};
  { KernelScope k(sim, "forward 0.Linear", cost); }
  { KernelScope k(sim, "reduce", cost, StreamKind::kComm); }
  EXPECT_EQ(sim.clock_ns(StreamKind::kCompute), kernel_time_ns(*sim.hardware(), cost));
  EXPECT_EQ(sim.clock_ns(StreamKind::kComm), kernel_time_ns(*sim.hardware(), cost));
}

}  // namespace
}  // namespace dpscope
