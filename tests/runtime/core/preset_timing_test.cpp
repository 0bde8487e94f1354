// Hardware presets and the roofline / alpha-beta timing model.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/core/timing.hpp"
#include "support/temp_files.hpp"

namespace dpscope {
namespace {

TEST(Preset, ShipsTheDatasheetPresets) {
  const std::vector<std::string> ids = list_presets();
  for (const char* id : {"a100-sxm", "h100-sxm", "h200", "rtx-2080ti", "t4", "v100-sxm2"})
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
  const auto path = testing::unique_temp_path("bad_preset.toml");
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

// A preset is read through the input guard: a FIFO is refused at once (it blocked the reader), a
// file past 1 MiB is refused before toml++ sees it.
TEST(Preset, AFifoOrAHugeFileIsRefusedNeverWaitedOn) {
  const auto fifo = testing::unique_temp_path("fifo_preset.toml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    load_preset_file(fifo);
    ADD_FAILURE() << "a FIFO was read as a preset";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_EQ(std::string(e.what()),
              "cannot read preset '" + fifo.string() + "': is a FIFO (named pipe), not a regular file");
  }
  std::filesystem::remove(fifo);
  const auto huge = testing::unique_temp_path("huge_preset.toml");
  std::ofstream(huge) << std::string((1 << 20) + 1, '#');
  try {
    load_preset_file(huge);
    ADD_FAILURE() << "a preset of 1 MiB + 1 byte was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find("1048577 bytes"), std::string::npos) << e.what();
  }
  std::filesystem::remove(huge);
}

// A preset file of the minimal keys plus `extra` lines, written to a temporary path.
std::filesystem::path write_preset(const std::string& extra) {
  const auto path = testing::unique_temp_path("calibrated_preset.toml");
  std::ofstream(path) << "name = \"x\"\nmemory_gb = 1\nmemory_bandwidth_gbps = 100\nfp32_tflops = 1\n"
                         "launch_latency_us = 2\ntopology = \"pcie-host\"\n"
                         "[host_link]\nkind = \"pcie4\"\nbandwidth_gbps = 32\nlatency_us = 1\n"
                         "[peer_link]\nkind = \"pcie4\"\nbandwidth_gbps = 32\nlatency_us = 1\n"
                      << extra;
  return path;
}

TEST(Preset, CalibrationScalesTheRooflineAndAddsHostIssueTime) {
  const auto path = write_preset(
      "[calibration]\nmeasured_on = \"GPU Z\"\ngemm_efficiency = 0.5\nmemory_bandwidth_fraction = 0.8\n"
      "launch_latency_us = 5\nhost_issue_us = 7.5\n");
  const HardwarePreset p = load_preset_file(path);
  EXPECT_DOUBLE_EQ(p.compute_efficiency, 0.5);
  EXPECT_DOUBLE_EQ(p.bandwidth_fraction, 0.8);
  EXPECT_DOUBLE_EQ(p.launch_latency_ns, 5000);
  EXPECT_DOUBLE_EQ(p.host_issue_ns, 7500);
  EXPECT_EQ(p.calibrated_on, "GPU Z");
  // 1 TFLOP/s at half efficiency: 1e6 FLOP take 2 us; 100 GB/s at 0.8: 8e5 bytes take 10 us.
  EXPECT_EQ(kernel_time_ns(p, {.flops = 1e6, .bytes = 1}), 5000 + 2000);
  EXPECT_EQ(kernel_time_ns(p, {.flops = 1, .bytes = 8e5}), 5000 + 10'000);
  // Uncalibrated: the datasheet roofline and no host time.
  const HardwarePreset plain = load_preset_file(write_preset(""));
  EXPECT_DOUBLE_EQ(plain.compute_efficiency, 1.0);
  EXPECT_DOUBLE_EQ(plain.host_issue_ns, 0.0);
  EXPECT_TRUE(plain.calibrated_on.empty());
  std::filesystem::remove(path);
}

// network.peer_to_peer: GPUs that may not access each other's memory (GeForce) reach each other
// through host memory; every other preset keeps peer access.
TEST(Preset, PeerToPeerIsOnUnlessThePresetSaysTheDriverRefusesIt) {
  EXPECT_FALSE(find_preset("rtx-2080ti").network.peer_to_peer);
  for (const std::string& id : list_presets()) {
    if (id != "rtx-2080ti") {
      EXPECT_TRUE(find_preset(id).network.peer_to_peer) << id;
    }
  }
  const auto off = write_preset("[network]\npeer_to_peer = false\n");
  EXPECT_FALSE(load_preset_file(off).network.peer_to_peer);
  const auto bad = write_preset("[network]\npeer_to_peer = \"no\"\n");
  try {
    load_preset_file(bad);
    ADD_FAILURE() << "peer_to_peer = \"no\" was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_EQ(std::string(e.what()),
              "preset " + bad.string() + ": network.peer_to_peer must be true or false");
  }
  std::filesystem::remove(off);
  std::filesystem::remove(bad);
}

TEST(Preset, CalibrationOutOfRangeNamesTheKey) {
  for (const auto& [line, key] : std::vector<std::pair<std::string, std::string>>{
           {"gemm_efficiency = 1.5", "'calibration.gemm_efficiency' is 1.5, it must be in (0, 1]"},
           {"memory_bandwidth_fraction = 0", "'calibration.memory_bandwidth_fraction' is 0"},
           {"host_issue_us = -1", "'calibration.host_issue_us' is -1"},
           {"launch_latency_us = \"fast\"", "key 'calibration.launch_latency_us' must be a number"}}) {
    const auto path = write_preset("[calibration]\n" + line + "\n");
    try {
      load_preset_file(path);
      ADD_FAILURE() << line;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  }
}

TEST(Preset, ClusterDescribesNodesJoinedByANicPerGpu) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  EXPECT_EQ(h100.cluster.gpus_per_node, 8);
  EXPECT_EQ(h100.cluster.nic.kind, "ib-ndr");
  EXPECT_DOUBLE_EQ(h100.cluster.nic.bandwidth_bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(h100.cluster.nic.latency_ns, 0);  // beyond NCCL's own InfiniBand hop (docs/scaling.md)
  EXPECT_EQ(find_preset("t4").cluster.gpus_per_node, 0);  // one machine
  EXPECT_FALSE(h100.cluster.simple_only);                 // InfiniBand carries every protocol
  const auto efa = write_preset(
      "[cluster]\ngpus_per_node = 8\nsimple_only = true\n[cluster.nic]\nkind = \"efa\"\nbandwidth_gbps = "
      "6.25\nlatency_us = 18\n");
  EXPECT_TRUE(load_preset_file(efa).cluster.simple_only);  // EFA's NCCL_PROTO=simple (aws-ofi-nccl)
  std::filesystem::remove(efa);
  for (const auto& [table, message] : std::vector<std::pair<std::string, std::string>>{
           {"[cluster]\ngpus_per_node = 0\n",
            "cluster.gpus_per_node must be a whole number in [1, 1024], got 0"},
           {"[cluster]\ngpus_per_node = 2.5\n",
            "cluster.gpus_per_node must be a whole number in [1, 1024], got 2.5"},
           {"[cluster]\ngpus_per_node = 8\n", "missing string key 'cluster.nic.kind'"},
           {"[cluster]\ngpus_per_node = 8\n[cluster.nic]\nkind = \"ib\"\nbandwidth_gbps = 0\nlatency_us = "
            "1\n",
            "cluster.nic needs a positive bandwidth and a latency >= 0"},
           {"[cluster]\ngpus_per_node = 8\nsimple_only = 1\n[cluster.nic]\nkind = \"efa\"\nbandwidth_gbps = "
            "6.25\nlatency_us = 18\n",
            "cluster.simple_only must be true or false"}}) {
    const auto path = write_preset(table);
    try {
      load_preset_file(path);
      ADD_FAILURE() << table;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  }
}

TEST(Timing, AHostBoundStepWaitsForTheHostToIssueEachKernel) {
  HardwarePreset p = find_preset("a100-sxm");
  p.host_issue_ns = 10'000;  // 10 us per kernel: longer than the tiny kernels below
  Device sim = Device::sim(0, p);
  const KernelCost tiny{.flops = 1, .bytes = 4};
  for (int i = 0; i < 3; ++i) KernelScope k(sim, "tiny", tiny);
  // The third kernel starts once the host issued it at 30 us, and runs its own time after.
  EXPECT_EQ(sim.clock_ns(StreamKind::kCompute), 30'000 + kernel_time_ns(p, tiny));
  // Behind a long kernel the host runs ahead: the next tiny kernel queues behind the stream.
  const KernelCost big{.flops = 1e12, .bytes = 4};
  { KernelScope k(sim, "big", big); }    // issued at 40 us, the stream free before then
  { KernelScope k(sim, "tiny", tiny); }  // issued at 50 us, long before the big one ends
  EXPECT_EQ(sim.clock_ns(StreamKind::kCompute), 40'000 + kernel_time_ns(p, big) + kernel_time_ns(p, tiny));
  // synchronize() brings the host up to the streams.
  const int64_t now = sim.synchronize();
  { KernelScope k(sim, "tiny", tiny); }
  EXPECT_EQ(sim.clock_ns(StreamKind::kCompute), now + 10'000 + kernel_time_ns(p, tiny));
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

// [nccl] nvls_latency_us: NVLS's latency under one step per channel; absent = the tuner's figure
// (-1), out of range = one error naming the file and the key.
TEST(Preset, NvlsLatencyIsReadAndRangeChecked) {
  EXPECT_DOUBLE_EQ(find_preset("h100-sxm").nccl.nvls_latency_us, 2.1);
  EXPECT_DOUBLE_EQ(find_preset("h200").nccl.nvls_latency_us, 2.1);
  EXPECT_DOUBLE_EQ(find_preset("a100-sxm").nccl.nvls_latency_us, -1.0);
  const auto path = write_preset("[nccl]\nchannels = 2\nnvls_latency_us = -5\n");
  try {
    load_preset_file(path);
    ADD_FAILURE() << "a negative NVLS latency was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(std::string(e.what()).find("preset " + path.string() +
                                         ": nccl.nvls_latency_us must be in [0, 1000], got -5"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dpscope
