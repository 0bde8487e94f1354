// Devices: names, parsing, memory accounting by category, OOM wording, simulated stream clocks.
#include <gtest/gtest.h>

#include "dpscope/core/tensor.hpp"

namespace dpscope {
namespace {

TEST(Device, ParsesCpuAndSimNames) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  EXPECT_EQ(Device::parse("cpu").name(), "cpu");
  EXPECT_EQ(Device::parse("sim:3", &h100).name(), "sim:3");
  EXPECT_EQ(Device::parse("sim:3", &h100).index(), 3);
}

TEST(Device, RejectsBadNames) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  for (const char* bad : {"gpu:0", "sim:", "sim:-1", "sim:1x", ""}) {
    try {
      Device::parse(bad, &h100);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDevice) << bad;
      EXPECT_NE(std::string(e.what()).find(fmt::format("'{}'", bad)), std::string::npos) << e.what();
    }
  }
}

TEST(Device, EachSimDeviceIsDistinct) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  Device a = Device::sim(0, h100);
  Device b = Device::sim(0, h100);
  EXPECT_FALSE(a == b);
  EXPECT_TRUE(a == a);
  EXPECT_TRUE(Device::cpu() == Device());
}

TEST(Device, AccountsAllocationsByCategoryAndReleasesThem) {
  Device sim = Device::sim(0, find_preset("t4"));
  {
    Tensor w = Tensor::zeros({256, 256}, sim, MemoryCategory::kParameters);
    Tensor g = Tensor::zeros({256, 256}, sim, MemoryCategory::kGradients);
    Tensor view = w.rows(0, 10);  // a view allocates nothing
    const MemoryStats m = sim.memory();
    EXPECT_EQ(m.bytes[static_cast<int>(MemoryCategory::kParameters)], 262144u);
    EXPECT_EQ(m.bytes[static_cast<int>(MemoryCategory::kGradients)], 262144u);
    EXPECT_EQ(m.in_use_bytes(), 524288u);
  }
  EXPECT_EQ(sim.memory().in_use_bytes(), 0u);
  EXPECT_EQ(sim.memory().peak_bytes, 524288u);
}

TEST(Device, OutOfMemoryNamesDeviceRequestAndFree) {
  HardwarePreset tiny = find_preset("t4");
  tiny.memory_bytes = 1 << 20;  // 1 MiB
  Device sim = Device::sim(1, tiny);
  Tensor a = Tensor::meta({128 * 1024}, sim, MemoryCategory::kParameters);  // 512 KiB
  try {
    Tensor::meta({256 * 1024}, sim, MemoryCategory::kActivations);  // 1 MiB more
    FAIL() << "expected OOM";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_STREQ(
        e.what(),
        "sim:1 out of memory: tried to allocate 1.00 MiB for activations; 512.00 KiB free of 1.00 MiB "
        "(parameters 512.00 KiB, gradients 0 B, optimizer state 0 B, activations 0 B, buffers 0 B)");
  }
  EXPECT_EQ(sim.memory().in_use_bytes(), 512u * 1024);  // the failed allocation left nothing behind
}

TEST(Device, StreamsHaveIndependentClocksAndEventsOrderThem) {
  Device sim = Device::sim(0, find_preset("h100-sxm"));
  EXPECT_EQ(sim.advance(StreamKind::kCompute, 100), 0);
  EXPECT_EQ(sim.advance(StreamKind::kCompute, 50), 100);
  EXPECT_EQ(sim.clock_ns(StreamKind::kComm), 0);
  const Event ready = sim.record(StreamKind::kCompute);
  sim.wait(StreamKind::kComm, ready);
  EXPECT_EQ(sim.clock_ns(StreamKind::kComm), 150);
  sim.advance(StreamKind::kComm, 1000);
  EXPECT_EQ(sim.synchronize(), 1150);
  EXPECT_EQ(sim.clock_ns(StreamKind::kCompute), 1150);
}

TEST(Device, PhaseScopeRestoresThePreviousPhase) {
  Device sim = Device::sim(0, find_preset("h100-sxm"));
  sim.set_phase(Phase::kForward);
  {
    PhaseScope scope(sim, Phase::kBackward);
    EXPECT_EQ(sim.phase(), Phase::kBackward);
  }
  EXPECT_EQ(sim.phase(), Phase::kForward);
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
}

}  // namespace
}  // namespace dpscope
