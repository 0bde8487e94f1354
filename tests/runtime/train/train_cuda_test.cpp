// `dpscope train` on real GPUs against the same run on the cpu: single-device, DataParallel (2
// logical GPUs) and DDP (2 and 4 logical ranks on the `cuda` backend, 1 rank on `nccl`) end within
// 1e-4 of the cpu / simulated run after 20 steps. Every case skips, saying why,
// on a machine without a GPU or a build without CUDA; scripts/gpu-check.sh runs them on one.
#include <gtest/gtest.h>

#include <cmath>

#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/io/safetensors.hpp"
#include "support/cli.hpp"
#include "support/ports.hpp"

namespace dpscope {
namespace {

using testing::run_dpscope;
using testing::TempDir;

// 20 steps of an MLP large enough for cuBLAS to take its real GEMM paths, same data and order
// (each case names its --batch: per replica for DDP, the whole batch otherwise).
const std::string kRun =
    "train --model 16-64-64-4 --dataset blobs:1280:16:4 --loss ce --optim sgd --lr 0.05 --momentum 0.9 "
    "--steps 20 --no-shuffle --seed 3 ";

// The largest absolute difference between two weight files, over every tensor.
float max_difference(const std::filesystem::path& a, const std::filesystem::path& b) {
  const NamedTensors left = load_safetensors(a);
  const NamedTensors right = load_safetensors(b);
  EXPECT_EQ(left.size(), right.size());
  float worst = 0.0f;
  for (const auto& [name, tensor] : left) {
    const std::vector<float> x = tensor.to_vector();
    const std::vector<float> y = find_tensor(right, name).to_vector();
    EXPECT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  }
  return worst;
}

class TrainCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string reason = cuda::unavailable_reason(); !reason.empty())
      GTEST_SKIP() << "no GPU run: " << reason;
  }
  // Runs `args` writing `name`.safetensors in dir_ and returns its path (asserting success).
  std::filesystem::path run(const std::string& args, const std::string& name) {
    const std::filesystem::path out = dir_.path() / (name + ".safetensors");
    const auto r = run_dpscope(kRun + args + " --save " + out.string());
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    return out;
  }
  // Runs `ranks` nccl processes under dpscope launch (below).
  void expect_launched_nccl_matches_sim(int ranks);
  TempDir dir_{"train_cuda"};
};

TEST_F(TrainCuda, SingleDeviceMatchesTheCpu) {
  const auto cpu = run("--mode single --device cpu --batch 64", "cpu");
  const auto gpu = run("--mode single --device cuda --batch 64", "cuda");
  EXPECT_LE(max_difference(cpu, gpu), 1e-4f);
}

TEST_F(TrainCuda, DataParallelOnTwoLogicalGpusMatchesTheCpu) {
  const auto cpu = run("--mode single --device cpu --batch 64", "cpu");
  const auto gpu = run("--mode dp --device cuda --devices 2 --batch 64", "dp_cuda");
  EXPECT_LE(max_difference(cpu, gpu), 1e-4f);
}

TEST_F(TrainCuda, DdpOnTheCudaBackendMatchesSimulatedDdp) {
  for (int ranks : {2, 4}) {
    const std::string common = fmt::format("--mode ddp --devices {} --batch 16 ", ranks);
    const auto sim = run(common + "--device sim --backend sim", fmt::format("sim{}", ranks));
    const auto gpu = run(common + "--device cuda --backend cuda", fmt::format("cuda{}", ranks));
    EXPECT_LE(max_difference(sim, gpu), 1e-4f) << ranks << " ranks";
  }
}

TEST_F(TrainCuda, NcclWorldSizeOneMatchesSimulatedDdp) {
  const auto sim = run("--mode ddp --devices 1 --batch 64 --device sim --backend sim", "sim1");
  const auto gpu = run("--mode ddp --devices 1 --batch 64 --device cuda --backend nccl", "nccl1");
  EXPECT_LE(max_difference(sim, gpu), 1e-4f);
}

TEST_F(TrainCuda, NcclRefusesTwoRanksOnOneGpuInOneLine) {
  if (cuda::physical_device_count() != 1) GTEST_SKIP() << "needs a machine with exactly one GPU";
  const auto r = run_dpscope(kRun + "--mode ddp --devices 2 --batch 16 --device cuda --backend nccl");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("--backend cuda"), std::string::npos) << r.output;
}

// NCCL across processes: `dpscope launch --nproc N -- dpscope train ... --backend nccl`, one
// process per GPU, the ncclUniqueId through the launcher's TCPStore, against simulated DDP; each
// rank writes its own trace.
void TrainCuda::expect_launched_nccl_matches_sim(int ranks) {
  const std::string common = fmt::format("--mode ddp --devices {} --batch {} ", ranks, 64 / ranks);
  const auto sim = run(common + "--device sim --backend sim", fmt::format("sim{}", ranks));
  const std::filesystem::path out = dir_.path() / fmt::format("launched{}.safetensors", ranks);
  const std::filesystem::path traces = dir_.path() / fmt::format("traces{}", ranks);
  const auto r = run_dpscope(fmt::format(
      "launch --nproc {} --master-port {} -- {} {} {} --device cuda --backend nccl --save {} --trace {}",
      ranks, testing::free_port(), DPSCOPE_CLI, kRun, common, out.string(), traces.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("rank 0 of {} processes (nccl)", ranks)), std::string::npos)
      << r.output;
  EXPECT_LE(max_difference(sim, out), 1e-4f) << ranks << " processes";
  for (int k = 0; k < ranks; ++k)
    EXPECT_TRUE(std::filesystem::exists(traces / fmt::format("rank-{}.jsonl", k))) << r.output;
}

TEST_F(TrainCuda, NcclOneProcessUnderLaunchMatchesSimulatedDdp) { expect_launched_nccl_matches_sim(1); }

TEST_F(TrainCuda, NcclTwoProcessesUnderLaunchMatchSimulatedDdp) {
  if (cuda::physical_device_count() < 2)
    GTEST_SKIP() << "2 processes need 2 GPUs, this machine has " << cuda::physical_device_count();
  expect_launched_nccl_matches_sim(2);
}

TEST_F(TrainCuda, NcclProcessesSharingOneGpuAreRefusedInOneLinePerRank) {
  if (cuda::physical_device_count() != 1) GTEST_SKIP() << "needs a machine with exactly one GPU";
  const auto r =
      run_dpscope(fmt::format("launch --nproc 2 --master-port {} -- {} {} --mode ddp --devices 2 --batch "
                              "16 --device cuda --backend nccl",
                              testing::free_port(), DPSCOPE_CLI, kRun));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find("--backend nccl: 2 processes on this machine (LOCAL_WORLD_SIZE=2) need 2 GPUs, it has 1"),
      std::string::npos)
      << r.output;
}

TEST_F(TrainCuda, AMeasuredTraceHasTheSimulatedTracesEventNames) {
  const std::filesystem::path trace = dir_.path() / "ddp.jsonl";
  const auto r = run_dpscope(
      kRun + "--mode ddp --devices 2 --batch 16 --device cuda --backend cuda --trace " + trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto stats = run_dpscope("trace stats " + trace.string());
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_NE(stats.output.find("measured clock"), std::string::npos) << stats.output;
  // The bucket all-reduce spans carry the simulated traces' names (the visualizer keys on them).
  const std::string events = testing::read_file(trace);
  EXPECT_NE(events.find(R"("name":"all_reduce ring)"), std::string::npos);
  EXPECT_NE(events.find(R"("name":"forward 0.Linear")"), std::string::npos);
  EXPECT_NE(events.find(R"("name":"copy H2D")"), std::string::npos);
  EXPECT_EQ(events.find(R"("dev":-1)"), std::string::npos) << "an event on no device";
}

}  // namespace
}  // namespace dpscope
