// `dpscope train` against the defects an adversarial pass found: a batch size that hung every mode,
// outputs checked only after training or overwriting inputs, no_sync resumes that left the straight
// path, negative counts accepted, and the flags --device/--backend with the old spelling still
// working. Every case ends within a time limit with one clear line.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/io/npy.hpp"
#include "dpscope/io/safetensors.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

using testing::TempDir;

// Runs `dpscope ARGS` killed after 60 s (exit 124): a hang fails the test instead of the suite.
testing::CommandResult run_limited(const std::string& args) { return testing::run_dpscope_within(60, args); }

void expect_one_error_line(const std::string& args, const std::string& needle) {
  testing::expect_usage_error_line(run_limited(args), args, needle);
}

const std::string kSmall = "train --dataset spirals:64 --model 2-8-3 ";
const std::string kHugeBatch = "--batch 9223372036854775807 ";

TEST(TrainDefects, ABatchNearTheInt64LimitTrainsOnTheWholeDatasetInEveryMode) {
  const auto single = run_limited(kSmall + kHugeBatch + "--steps 2");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_NE(single.output.find("batch 64 (the whole mini-batch), 64 samples, 2 steps"), std::string::npos)
      << single.output;
  const auto dp = run_limited(kSmall + kHugeBatch + "--steps 2 --mode dp --devices 3");
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  EXPECT_NE(dp.output.find("batch 64 (the whole mini-batch, scattered in chunks of up to 22 over 3 GPUs)"),
            std::string::npos)
      << dp.output;
  const auto ddp = run_limited(kSmall + kHugeBatch + "--epochs 1 --mode ddp --devices 2");
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  EXPECT_NE(
      ddp.output.find("batch 9223372036854775807 per rank x 2 ranks = 64 samples per step (global batch) "
                      "(a rank holds only 32 samples per epoch), 64 samples, 1 steps"),
      std::string::npos)
      << ddp.output;
}

TEST(TrainDefects, OutputsAreCheckedBeforeAnyWork) {
  TempDir dir("defects_outputs");
  const std::string run = kSmall + "--steps 50 ";
  expect_one_error_line(run + "--save " + (dir / "missing/w.safetensors"),
                        "--save " + (dir / "missing/w.safetensors") + ": cannot write there: directory");
  expect_one_error_line(run + "--save " + dir.path().string(), "is a directory; give a file name");
  expect_one_error_line(run + "--trace " + (dir / "t.jsonl") + " --save " + (dir / "t.jsonl"),
                        "--trace " + (dir / "t.jsonl") + " is the same file as --save");
  std::ofstream(dir / "plain") << "x";
  expect_one_error_line(run + "--checkpoint-dir " + (dir / "plain/ckpt"), "is a file, not a directory");
  // Every mode refuses before training: no progress line was printed (checked by the one line).
  expect_one_error_line(kSmall + "--steps 5 --mode dp --devices 2 --save " + (dir / "no/w.safetensors"),
                        "directory");
  expect_one_error_line(kSmall + "--steps 5 --mode ddp --devices 2 --save " + (dir / "no/w.safetensors"),
                        "directory");
}

TEST(TrainDefects, NoOutputOverwritesAnInput) {
  TempDir dir("defects_inputs");
  ASSERT_EQ(run_limited(kSmall + "--steps 1 --save " + (dir / "init.safetensors")).exit_code, 0);
  const auto before = std::filesystem::file_size(dir / "init.safetensors");
  expect_one_error_line(
      kSmall + "--steps 1 --init " + (dir / "init.safetensors") + " --trace " + (dir / "init.safetensors"),
      "--trace " + (dir / "init.safetensors") + " is the same file as the input --init");
  // Another spelling of the same file is the same file.
  expect_one_error_line(
      kSmall + "--steps 1 --init " + (dir / "init.safetensors") + " --save " + (dir / "./init.safetensors"),
      "is the same file as the input --init");
  EXPECT_EQ(std::filesystem::file_size(dir / "init.safetensors"), before);

  const std::string x = dir / "x.npy", y = dir / "y.npy";
  save_npy(x, Tensor::from_floats(std::vector<float>(20, 0.5f), {10, 2}));
  save_npy(y, Tensor::from_ints(std::vector<int64_t>(10, 1), {10}));
  expect_one_error_line("train --model 2-8-3 --data " + x + "," + y + " --trace " + y,
                        "--trace " + y + " is the same file as the input --data " + y);
  expect_one_error_line("train --model 2-8-3 --data " + x + "," + y + " --save " + x,
                        "--save " + x + " is the same file as the input --data " + x);
}

TEST(TrainDefects, NegativeCountsAndSeedsAreRefused) {
  expect_one_error_line(kSmall + "--steps -1", "--steps must be at least 1, got -1");
  expect_one_error_line(kSmall + "--epochs -1", "--epochs must be at least 1, got -1");
  expect_one_error_line(kSmall + "--steps 1 --seed -1",
                        "--seed must be an integer from 0 to 18446744073709551615, got '-1'");
  expect_one_error_line(kSmall + "--steps 1 --seed 12x", "got '12x'");
  const auto big_seed = run_limited(kSmall + "--steps 1 --seed 18446744073709551615");
  EXPECT_EQ(big_seed.exit_code, 0) << big_seed.output;
}

TEST(TrainDefects, PresetsAreCheckedOnEveryDeviceAndModeAlike) {
  expect_one_error_line(kSmall + "--steps 1 --mode dp --devices 9 --preset v100-sxm2",
                        "--devices 9: preset v100-sxm2 (hybrid-cube-mesh topology) holds 8 GPUs");
  expect_one_error_line(kSmall + "--steps 1 --device cpu --preset bogus", "unknown preset 'bogus'");
}

TEST(TrainDefects, TheNanMessageCountsStepsLikeTheProgressLines) {
  const auto r = run_limited(
      "train --dataset regression:64 --model 4-8-1 --loss mse --lr 1e30 --batch 16 --steps 8 --no-shuffle");
  ASSERT_EQ(r.exit_code, 2) << r.output;
  std::smatch error;
  ASSERT_TRUE(std::regex_search(r.output, error, std::regex("loss became \\S+ at step (\\d+)"))) << r.output;
  const int failed = std::stoi(error[1]);
  // The progress printed every step before the failing one, counting from 1, and not the failing one.
  EXPECT_NE(r.output.find(fmt::format("step {}/8", failed - 1)), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(fmt::format("step {}/8", failed)), std::string::npos) << r.output;
}

// The review found the step lines printing rank 0's own loss while the summary printed the mean over
// ranks: both now print the step's loss as one definition (the mean over ranks in ddp).
TEST(TrainDefects, DdpStepLinesAndSummaryPrintTheSameLoss) {
  const auto r = run_limited(kSmall + "--batch 8 --steps 3 --mode ddp --devices 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch first_step, last_step, summary;
  ASSERT_TRUE(std::regex_search(r.output, first_step, std::regex("step 1/3  epoch 0  loss (\\S+)\n")))
      << r.output;
  ASSERT_TRUE(std::regex_search(r.output, last_step, std::regex("step 3/3  epoch 0  loss (\\S+)\n")))
      << r.output;
  ASSERT_TRUE(
      std::regex_search(r.output, summary, std::regex("mean loss over ranks: first (\\S+), final (\\S+)\n")))
      << r.output;
  EXPECT_EQ(first_step[1], summary[1]) << r.output;
  EXPECT_EQ(last_step[1], summary[2]) << r.output;
  EXPECT_EQ(r.output.find("rank 0 loss"), std::string::npos) << r.output;
  const auto single = run_limited(kSmall + "--batch 8 --steps 3");
  EXPECT_NE(single.output.find("step 1/3  epoch 0  loss "), std::string::npos) << single.output;
  EXPECT_NE(single.output.find("\nloss: first "), std::string::npos) << single.output;
}

TEST(TrainDefects, DdpWithNoSyncResumesBitIdentically) {
  TempDir dir("defects_nosync");
  const std::string run =
      "train --mode ddp --devices 2 --dataset blobs:64 --model 2-16-3 --batch 4 --optim adam "
      "--lr 0.01 --no-sync-every 3 ";
  ASSERT_EQ(run_limited(run + "--steps 7 --save " + (dir / "straight.safetensors")).exit_code, 0);
  // Stopped after 5 steps: its last synchronized boundary is step 3, where the checkpoint is.
  const auto first = run_limited(run + "--steps 5 --checkpoint-dir " + (dir / "ckpt"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("checkpoint-00000003.safetensors"), std::string::npos) << first.output;
  const auto second = run_limited(run + "--steps 7 --resume --checkpoint-dir " + (dir / "ckpt") + " --save " +
                                  (dir / "resumed.safetensors"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed after step 3"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("checkpoint-00000006.safetensors"), std::string::npos) << second.output;
  const NamedTensors a = load_safetensors(dir / "straight.safetensors");
  const NamedTensors b = load_safetensors(dir / "resumed.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].second.to_vector(), b[i].second.to_vector()) << a[i].first << " differs";
  // A run shorter than one no_sync cycle has no synchronized boundary to checkpoint at, and says so.
  const auto short_run = run_limited(run + "--steps 2 --checkpoint-dir " + (dir / "short"));
  ASSERT_EQ(short_run.exit_code, 0) << short_run.output;
  EXPECT_NE(short_run.output.find("checkpoint: none written (one needs a synchronized step: a multiple of "
                                  "--no-sync-every 3)"),
            std::string::npos)
      << short_run.output;
}

TEST(TrainFlags, DeviceAndBackendAreSeparateAndTheOldSpellingStillRuns) {
  TempDir dir("flags_device");
  const auto cpu = run_limited(kSmall + "--steps 1 --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_EQ(cpu.output.find("note:"), std::string::npos) << cpu.output;
  ASSERT_EQ(run_limited(kSmall + "--steps 1 --device cpu --trace " + (dir / "t.jsonl")).exit_code, 0);
  const trace::TraceData t = trace::read_trace(dir / "t.jsonl");
  EXPECT_NE(t.header.run_json.find(R"("device":"cpu","backend":"sim")"), std::string::npos)
      << t.header.run_json;

  const auto old_cpu = run_limited(kSmall + "--steps 1 --backend cpu");
  ASSERT_EQ(old_cpu.exit_code, 0) << old_cpu.output;
  EXPECT_EQ(std::count(old_cpu.output.begin(), old_cpu.output.end(), '\n') -
                std::count(cpu.output.begin(), cpu.output.end(), '\n'),
            1)
      << "exactly one extra line, the note:\n"
      << old_cpu.output;
  EXPECT_NE(old_cpu.output.find("note: --backend cpu is now spelled --device cpu"), std::string::npos)
      << old_cpu.output;
  EXPECT_NE(old_cpu.output.find("== dpscope train: single on cpu"), std::string::npos) << old_cpu.output;
  const auto old_sim = run_limited(kSmall + "--steps 1 --backend sim");
  ASSERT_EQ(old_sim.exit_code, 0) << old_sim.output;
  EXPECT_NE(old_sim.output.find("spell it --device sim"), std::string::npos) << old_sim.output;
  const auto ddp = run_limited(kSmall + "--steps 1 --mode ddp --devices 2 --backend sim");
  EXPECT_EQ(ddp.exit_code, 0) << ddp.output;
  EXPECT_EQ(ddp.output.find("note:"), std::string::npos) << "sim is a backend in ddp:\n" << ddp.output;

  // Real GPUs: one line saying why they cannot be used here (no GPU, or a build without CUDA), or a run.
  if (const std::string reason = cuda::unavailable_reason(); !reason.empty()) {
    expect_one_error_line(kSmall + "--steps 1 --device cuda", "--device cuda: " + reason);
    expect_one_error_line(kSmall + "--steps 1 --mode ddp --devices 2 --device cuda --backend nccl",
                          is_backend_registered("nccl") ? "--device cuda: " + reason
                                                        : std::string("--backend nccl is not built"));
  } else {
    const auto on_gpu = run_limited(kSmall + "--steps 1 --device cuda");
    EXPECT_EQ(on_gpu.exit_code, 0) << on_gpu.output;
  }
  for (const char* backend : {"cuda", "nccl", "mpi"}) {
    const std::string args = kSmall + "--steps 1 --mode ddp --devices 2 --backend " + backend;
    if (!is_backend_registered(backend))
      expect_one_error_line(args, fmt::format("--backend {} is not built in this version", backend));
    else if (std::string(backend) == "mpi")
      expect_one_error_line(args, "--backend mpi runs each rank as a process on its CPU, started by mpirun");
    else
      expect_one_error_line(args, fmt::format("--backend {} needs --device cuda", backend));
  }
  expect_one_error_line(kSmall + "--steps 1 --mode ddp --devices 2 --device cuda --backend sim",
                        "--device cuda communicates through --backend cuda or nccl, not sim");
  expect_one_error_line(kSmall + "--steps 1 --device tpu", "--device 'tpu' is not one of cpu, sim, cuda");
  expect_one_error_line(kSmall + "--steps 1 --device sim --backend cpu", "give only --device sim");
}

}  // namespace
}  // namespace dpscope
