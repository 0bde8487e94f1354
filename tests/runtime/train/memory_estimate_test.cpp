// The training run's memory estimate: what it counts, in closed form for a small MLP, and
// the refusals it makes before anything is allocated, naming the device, both sizes and the parts.
#include <gtest/gtest.h>

#include "dpscope/base/checked.hpp"
#include "dpscope/train/memory_estimate.hpp"
#include "support/cli.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::error_of;
using testing::run_dpscope;

// 2-8-3: 2*8 + 8 + 8*3 + 3 = 51 parameters, 204 bytes.
TrainConfig small(TrainMode mode = TrainMode::kSingle) {
  TrainConfig c;
  c.mode = mode;
  c.model = "2-8-3";
  c.batch = 16;
  c.dataset = "spirals:64";
  return c;
}

TEST(MemoryEstimate, CountsParametersGradientsOptimizerStateAndActivations) {
  const MemoryEstimate sgd = estimate_training_memory(small(), 64);
  EXPECT_EQ(sgd.parameters_bytes, 204u);
  EXPECT_EQ(sgd.gradients_bytes, 204u);
  EXPECT_EQ(sgd.optimizer_bytes, 0u);  // plain SGD keeps no state
  EXPECT_EQ(sgd.buffers_bytes, 0u);
  // Per row: input 2, Linear 8 and ReLU 8, Linear 3, the loss's gradient 3 = 24 floats, and an
  // int64 class: 104 bytes; 16 rows.
  EXPECT_EQ(sgd.activations_bytes, 16u * 104u);
  EXPECT_EQ(sgd.device_bytes, 204u + 204u + 16u * 104u);
  EXPECT_EQ(sgd.host_bytes, sgd.device_bytes) << "a simulated GPU's tensors are host memory";

  TrainConfig momentum = small();
  momentum.momentum = 0.9;
  EXPECT_EQ(estimate_training_memory(momentum, 64).optimizer_bytes, 204u);  // momentum_buffer
  TrainConfig adam = small();
  adam.optim = "adam";
  EXPECT_EQ(estimate_training_memory(adam, 64).optimizer_bytes, 408u);  // exp_avg, exp_avg_sq
  // The batch is bounded by the data: 10 rows hold 10.
  EXPECT_EQ(estimate_training_memory(small(), 10).activations_bytes, 10u * 104u);
}

TEST(MemoryEstimate, DdpCountsBucketsAndZeroShardsTheOptimizerState) {
  TrainConfig ddp = small(TrainMode::kDdp);
  ddp.devices = 4;
  ddp.optim = "adam";
  const MemoryEstimate plain = estimate_training_memory(ddp, 64);
  EXPECT_EQ(plain.buffers_bytes, 204u);  // the gradient buckets
  EXPECT_EQ(plain.optimizer_bytes, 408u);
  EXPECT_EQ(plain.activations_bytes, 16u * 104u);  // a rank's batch: 16 of its 16 rows
  ddp.zero = true;
  EXPECT_EQ(estimate_training_memory(ddp, 64).optimizer_bytes, 102u);  // a quarter each
  // dp: device 0 holds its chunk (4 rows) and the gathered output and its gradient (16 x 3 x 2 floats).
  TrainConfig dp = small(TrainMode::kDataParallel);
  dp.devices = 4;
  EXPECT_EQ(estimate_training_memory(dp, 64).activations_bytes, 4u * 104u + 16u * 3u * 2u * 4u);
}

TEST(MemoryEstimate, CpuAndSimulatedGpusAreHostMemoryTimingOnlyIsNot) {
  TrainConfig cpu = small();
  cpu.device = DeviceKind::kCpu;
  const MemoryEstimate on_cpu = estimate_training_memory(cpu, 64);
  EXPECT_EQ(on_cpu.host_bytes, on_cpu.device_bytes);
  TrainConfig ddp = small(TrainMode::kDdp);
  ddp.devices = 4;
  const MemoryEstimate sim = estimate_training_memory(ddp, 64);
  EXPECT_EQ(sim.host_bytes, 4 * sim.device_bytes);
  ddp.timing_only = true;
  ddp.dataset.clear();
  EXPECT_EQ(estimate_training_memory(ddp, 0).host_bytes, 0u);
}

// Regression test: --model 2-2147483648-3 grew to 16.7 GB and ran on silently.
TEST(MemoryEstimate, RefusesAModelTheSimulatedGpuCannotHold) {
  TrainConfig huge = small();
  huge.model = "2-2147483648-3";
  const testing::Outcome refused = error_of([&] { check_training_memory(huge, 64); });
  EXPECT_EQ(refused.kind, ErrorKind::kUsage);
  // 12,884,901,891 parameters (48 GiB), as many gradients, and 16 rows through a 2^31-wide hidden
  // layer (its Linear and ReLU outputs: 256 GiB); the H100's 80 GB are 74.51 GiB.
  EXPECT_EQ(
      refused.message,
      "--model 2-2147483648-3 needs about 352.00 GiB on sim:0 (NVIDIA H100 SXM5 80GB) (parameters 48.00 "
      "GiB, gradients 48.00 GiB, optimizer state 0 B, activations 256.00 GiB), which holds 74.51 GiB; try a "
      "smaller --model or --batch");
  EXPECT_NO_THROW(check_training_memory(small(), 64));
}

TEST(MemoryEstimate, RefusesWhatThisMachineCannotHold) {
  if (host_memory_bytes() == 0) GTEST_SKIP() << "the system does not say how much memory it has";
  TrainConfig cpu = small();
  cpu.device = DeviceKind::kCpu;
  cpu.model = "2-1000000000000-3";  // 6e12 parameters: 24 TB of weights, no device capacity on cpu
  const testing::Outcome refused = error_of([&] { check_training_memory(cpu, 64); });
  EXPECT_EQ(refused.kind, ErrorKind::kUsage);
  EXPECT_EQ(refused.message.rfind("--model 2-1000000000000-3 needs about ", 0), 0u) << refused.message;
  EXPECT_NE(refused.message.find(" of host memory for the cpu device ("), std::string::npos)
      << refused.message;
  EXPECT_NE(refused.message.find("; this machine has "), std::string::npos) << refused.message;
}

// --timing-only allocates no data: a world of 1,024 GPUs of a 0.5-billion-parameter model (6 GiB a
// GPU, 6 TiB if it were host memory) runs; the same model on 64 simulated GPUs with data is refused.
TEST(MemoryEstimate, TimingOnlyIsBoundedByTheSimulatedGpuAlone) {
  TrainConfig world = small(TrainMode::kDdp);
  world.model = "16384-16384-16384-1";  // 537 M parameters
  world.dataset.clear();
  world.timing_only = true;
  world.devices = 1024;
  EXPECT_NO_THROW(check_training_memory(world, 0));
  TrainConfig sixty_four = world;
  sixty_four.timing_only = false;
  sixty_four.devices = 64;
  if (host_memory_bytes() != 0 && host_memory_bytes() < (uint64_t{256} << 30)) {
    EXPECT_NE(error_of([&] {
                check_training_memory(sixty_four, 64);
              }).message.find("of host memory for 64 simulated GPUs"),
              std::string::npos);
  }
  world.model = "65536-65536-65536-1";  // 8.6 G parameters: 96 GiB before activations
  EXPECT_NE(error_of([&] { check_training_memory(world, 0); }).message.find("which holds 74.51 GiB"),
            std::string::npos);
}

TEST(MemoryEstimate, SizesThatOverflowAreRefusedNotWrapped) {
  TrainConfig c = small();
  c.model = "4294967296-4294967296-3";  // 2^64 weights
  const testing::Outcome refused = error_of([&] { estimate_training_memory(c, 64); });
  EXPECT_EQ(refused.kind, ErrorKind::kUsage);
  EXPECT_EQ(
      refused.message,
      "--model 4294967296-4294967296-3 memory estimate: 4294967296 * 4294967296 overflows a 64-bit integer");
}

// End to end: the run ends at once with one line and exit code 2, before allocating the model.
TEST(MemoryEstimate, TheCommandRefusesAHugeModelAtOnce) {
  const auto r = run_dpscope("train --dataset spirals:64 --model 2-2147483648-3 --batch 16 --steps 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("dpscope: error: --model 2-2147483648-3 needs about 352.00 GiB on sim:0"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace dpscope
