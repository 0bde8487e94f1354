// What core/cuda.hpp promises without a GPU: the logical GPU arithmetic (which physical GPU a
// logical device runs on, how many share one, their memory budgets), the thread's current stream,
// the one-line errors when no cuda device can be made, and Device::parse("cuda:N").
#include <gtest/gtest.h>

#include <thread>

#include "dpscope/core/cuda.hpp"
#include "dpscope/core/tensor.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(CudaLogicalGpus, LogicalDeviceKRunsOnPhysicalGpuKModCount) {
  for (int k = 0; k < 8; ++k) EXPECT_EQ(cuda::physical_for(k, 1), 0) << k;
  EXPECT_EQ(cuda::physical_for(0, 2), 0);
  EXPECT_EQ(cuda::physical_for(1, 2), 1);
  EXPECT_EQ(cuda::physical_for(5, 2), 1);
  EXPECT_EQ(cuda::physical_for(4, 4), 0);
  EXPECT_EQ(cuda::physical_for(6, 4), 2);
  EXPECT_EQ(testing::error_of([] { cuda::physical_for(-1, 1); }).kind, ErrorKind::kInternal);
  EXPECT_EQ(testing::error_of([] { cuda::physical_for(0, 0); }).kind, ErrorKind::kInternal);
}

TEST(CudaLogicalGpus, CountsTheLogicalDevicesSharingEachPhysicalGpu) {
  EXPECT_EQ(cuda::logical_on_physical(0, 4, 1), 4);
  EXPECT_EQ(cuda::logical_on_physical(0, 5, 2), 3);  // cuda:0, cuda:2, cuda:4
  EXPECT_EQ(cuda::logical_on_physical(1, 5, 2), 2);  // cuda:1, cuda:3
  EXPECT_EQ(cuda::logical_on_physical(3, 2, 4), 0);  // fewer logical devices than GPUs
  EXPECT_EQ(cuda::logical_on_physical(1, 8, 8), 1);
  // The counts add up to the logical devices, for every shape.
  for (int physical_count = 1; physical_count <= 4; ++physical_count) {
    for (int logical_count = 1; logical_count <= 9; ++logical_count) {
      int total = 0;
      for (int p = 0; p < physical_count; ++p)
        total += cuda::logical_on_physical(p, logical_count, physical_count);
      EXPECT_EQ(total, logical_count) << logical_count << " over " << physical_count;
    }
  }
  EXPECT_EQ(testing::error_of([] { cuda::logical_on_physical(2, 4, 2); }).kind, ErrorKind::kInternal);
}

TEST(CudaLogicalGpus, SplitsTheFreeMemoryEvenlyOrUsesTheCap) {
  EXPECT_EQ(cuda::logical_budget(80 * kGiB, 4, 0), 20 * kGiB);
  EXPECT_EQ(cuda::logical_budget(80 * kGiB, 1, 0), 80 * kGiB);
  EXPECT_EQ(cuda::logical_budget(10, 3, 0), 3u);  // rounded down: the sum never exceeds the GPU
  EXPECT_EQ(cuda::logical_budget(80 * kGiB, 4, 10 * kGiB), 10 * kGiB);
  EXPECT_EQ(cuda::logical_budget(80 * kGiB, 4, 20 * kGiB), 20 * kGiB);  // exactly the split fits
}

TEST(CudaLogicalGpus, ACapLargerThanTheSplitIsAnErrorNamingBoth) {
  const testing::Outcome outcome = testing::error_of([] { cuda::logical_budget(80 * kGiB, 4, 30 * kGiB); });
  EXPECT_EQ(outcome.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(
      outcome.message,
      "--gpu-mem 30.00 GiB per logical GPU does not fit: 4 logical GPUs share a GPU with 80.00 GiB free "
      "(20.00 GiB each)");
  EXPECT_EQ(testing::error_of([] { cuda::logical_budget(kGiB, 0, 0); }).kind, ErrorKind::kInternal);
}

TEST(CudaLogicalGpus, DescribesSxmH100AndH200ByTheirPresetsAndOtherBoardsByTheDriver) {
  EXPECT_EQ(cuda::preset_id_for_gpu("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(cuda::preset_id_for_gpu("NVIDIA H200"), "h200");
  EXPECT_EQ(cuda::preset_id_for_gpu("NVIDIA H100 PCIe"), "");
  EXPECT_EQ(cuda::preset_id_for_gpu("NVIDIA H100 NVL"), "");
  EXPECT_EQ(cuda::preset_id_for_gpu("NVIDIA H200 NVL"), "");
  EXPECT_EQ(cuda::preset_id_for_gpu("Tesla T4"), "");
  // The ids name presets that exist.
  EXPECT_EQ(find_preset(cuda::preset_id_for_gpu("NVIDIA H100 80GB HBM3")).id, "h100-sxm");
  EXPECT_EQ(find_preset(cuda::preset_id_for_gpu("NVIDIA H200")).id, "h200");
}

TEST(CudaStreams, KernelsGoOnTheComputeStreamUnlessAGuardSaysOtherwise) {
  EXPECT_EQ(cuda::current_stream(), StreamKind::kCompute);
  {
    const cuda::StreamGuard comm(StreamKind::kComm);
    EXPECT_EQ(cuda::current_stream(), StreamKind::kComm);
    {
      const cuda::StreamGuard copy(StreamKind::kCopy);
      EXPECT_EQ(cuda::current_stream(), StreamKind::kCopy);
    }
    EXPECT_EQ(cuda::current_stream(), StreamKind::kComm);
    // The current stream is the calling thread's: another thread still issues on compute.
    StreamKind other = StreamKind::kCopy;
    std::thread([&other] { other = cuda::current_stream(); }).join();
    EXPECT_EQ(other, StreamKind::kCompute);
  }
  EXPECT_EQ(cuda::current_stream(), StreamKind::kCompute);
}

TEST(CudaAvailability, SaysWhyNoCudaDeviceCanBeMadeInOneLine) {
  if (cuda::physical_device_count() > 0)
    GTEST_SKIP() << "this machine has a CUDA GPU: cuda devices can be made";
  const std::string reason = cuda::unavailable_reason();
  if (cuda::built()) {
    EXPECT_EQ(reason.rfind("no CUDA GPU on this machine (cudaGetDeviceCount: ", 0), 0u) << reason;
  } else {
    EXPECT_EQ(reason.rfind("dpscope was built without CUDA", 0), 0u) << reason;
  }
  EXPECT_EQ(reason.find('\n'), std::string::npos);
  const testing::Outcome outcome = testing::error_of([] { cuda::make_devices({.count = 2}); });
  EXPECT_EQ(outcome.kind, ErrorKind::kDevice);
  EXPECT_EQ(outcome.message, "--device cuda: " + reason);
  EXPECT_EQ(testing::what_of([] { cuda::require_available("--backend nccl"); }), "--backend nccl: " + reason);
}

TEST(CudaAvailability, AskingForNoDevicesIsAnInvalidArgumentEvenWithoutAGpu) {
  const testing::Outcome outcome = testing::error_of([] { cuda::make_devices({.count = 0}); });
  EXPECT_EQ(outcome.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(outcome.message, "--devices 0: need at least one cuda device");
}

TEST(CudaAvailability, ParsingCudaNPointsToMakeDevices) {
  const std::string reason = cuda::unavailable_reason();
  const std::string expected =
      "device 'cuda:0' cannot be made on its own: cuda devices are made together by cuda::make_devices() "
      "(dpscope train --device cuda --devices N)" +
      (reason.empty() ? std::string() : "; " + reason);
  const testing::Outcome outcome = testing::error_of([] { Device::parse("cuda:0"); });
  EXPECT_EQ(outcome.kind, ErrorKind::kDevice);
  EXPECT_EQ(outcome.message, expected);
  EXPECT_EQ(testing::error_of([] { Device::parse("gpu:0"); }).message,
            "invalid device 'gpu:0': expected cpu, sim:N or cuda:N");
}

TEST(CudaAvailability, CudaHandlesOfANonCudaDeviceFailNamingIt) {
  const Device sim = Device::sim(0, find_preset("t4"));
  const std::string message = testing::what_of([&] { cuda::physical_index(sim.impl()); });
  if (cuda::built()) {
    EXPECT_EQ(message, "physical_index: sim:0 is not a cuda device");
    EXPECT_EQ(testing::what_of([&] { cuda::stream_handle(sim.impl(), StreamKind::kComm); }),
              "stream_handle: sim:0 is not a cuda device");
  } else {
    EXPECT_EQ(message, "cuda device: " + cuda::unavailable_reason());
  }
  // Asking a non-cuda device for measurements gives nothing rather than an error.
  EXPECT_FALSE(cuda::last_copy_span(sim.impl()).has_value());
  EXPECT_NO_THROW(cuda::flush_trace(sim.impl()));
}

}  // namespace
}  // namespace dpscope
