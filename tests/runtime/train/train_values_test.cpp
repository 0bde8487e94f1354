// Values a training run is given: float flags that are not finite numbers in range, NaN
// or inf in --data and --init, and inputs that are not regular files. Each used to run on until
// "loss became nan ... (try a smaller --lr)" (or to block, for a FIFO); each is now one line naming
// the flag, or the file and the first bad value, with exit code 2, before training starts.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "dpscope/core/cuda.hpp"
#include "dpscope/io/finite_values.hpp"
#include "dpscope/io/npy.hpp"
#include "dpscope/io/safetensors.hpp"
#include "dpscope/train/train.hpp"
#include "support/cli.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::error_of;
using testing::run_dpscope;
using testing::TempDir;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TrainConfig valid() {
  TrainConfig c;
  c.model = "2-8-3";
  c.batch = 16;
  c.dataset = "spirals:64";
  return c;
}

// The message validate() refuses `edit` of a valid configuration with (kUsage), or "no error".
std::string refusal(const std::function<void(TrainConfig&)>& edit) {
  TrainConfig c = valid();
  edit(c);
  const testing::Outcome o = error_of([&] { c.validate(); });
  if (o.message != "no error") {
    EXPECT_EQ(o.kind, ErrorKind::kUsage) << o.message;
  }
  return o.message;
}

TEST(TrainValues, FloatFlagsMustBeFiniteNumbersInRange) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(refusal([&](TrainConfig& c) { c.lr = inf; }), "--lr must be a finite number, got inf");
  EXPECT_EQ(refusal([&](TrainConfig& c) { c.lr = nan; }), "--lr must be a finite number, got nan");
  EXPECT_EQ(refusal([&](TrainConfig& c) { c.momentum = -inf; }),
            "--momentum must be a finite number, got -inf");
  EXPECT_EQ(refusal([&](TrainConfig& c) { c.momentum = 1.5; }), "--momentum must be <= 1, got 1.5");
  EXPECT_EQ(refusal([&](TrainConfig& c) { c.momentum = 1.0; }), "no error");
  EXPECT_EQ(refusal([&](TrainConfig& c) { c.weight_decay = nan; }),
            "--weight-decay must be a finite number, got nan");
  EXPECT_EQ(refusal([&](TrainConfig& c) { c.gpu_mem_mb = inf; }),
            "--gpu-mem must be a finite number, got inf");
  EXPECT_EQ(refusal([&](TrainConfig& c) {
              c.mode = TrainMode::kDdp;
              c.devices = 2;
              c.bucket_cap_mb = inf;
            }),
            "--bucket-mb must be a finite number, got inf");
  EXPECT_EQ(refusal([&](TrainConfig& c) {
              c.mode = TrainMode::kDdp;
              c.devices = 2;
              c.first_bucket_mb = 1e300;  // its bytes would not fit in 64 bits
            }),
            "--first-bucket-mb must be <= 1073741824, got 1e+300");
}

// Regression test: `--lr 1e309` parses as inf and ran into "loss became nan (try a smaller --lr)".
// validate() checks values alone; what the machine and its launcher provide is check_machine()'s
// to refuse: a launcher's RANK/WORLD_SIZE around a mode that runs in one process, and --device cuda
// where no GPU can be used. (validate() used to probe both, so a configuration's values could not
// be checked apart from the machine they would run on.)
TEST(TrainValues, ValidateReadsNoEnvironmentAndProbesNoGpu) {
  const TrainConfig single = valid();
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  const testing::Outcome values = error_of([&] { single.validate(); });
  const testing::Outcome machine = error_of([&] { check_machine(single); });
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  EXPECT_EQ(values.message, "no error");
  EXPECT_EQ(machine.kind, ErrorKind::kUsage);
  EXPECT_EQ(
      machine.message,
      "this process is rank 1 of 2 (RANK and WORLD_SIZE are set, as dpscope launch and torchrun do), but "
      "--mode single runs the whole run in one process: use --mode ddp --device cuda --backend nccl for "
      "one process per GPU, or start one process");
  EXPECT_EQ(error_of([&] { check_machine(single); }).message, "no error");  // no launcher: nothing to refuse

  TrainConfig on_gpu = valid();
  on_gpu.device = DeviceKind::kCuda;
  EXPECT_EQ(error_of([&] { on_gpu.validate(); }).message, "no error");
  const std::string reason = cuda::unavailable_reason();
  if (reason.empty()) GTEST_SKIP() << "this machine has a usable GPU: --device cuda is not refused here";
  EXPECT_EQ(error_of([&] { check_machine(on_gpu); }).message, "--device cuda: " + reason);
}

TEST(TrainValues, TheCommandNamesTheFlag) {
  const std::string run = "train --dataset spirals:64 --model 2-8-3 --batch 16 --steps 2 ";
  for (const auto& [flag, message] :
       {std::pair{"--lr 1e309", "--lr must be a finite number, got inf"},
        {"--lr nan", "--lr must be a finite number, got nan"},
        {"--momentum inf", "--momentum must be a finite number, got inf"},
        {"--weight-decay 1e999", "--weight-decay must be a finite number, got inf"}}) {
    const auto r = run_dpscope(run + flag);
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.output;
    EXPECT_EQ(r.output, std::string("dpscope: error: ") + message + "\n") << flag;
  }
}

TEST(TrainValues, FirstNonFiniteNamesThePosition) {
  const float values[] = {1.0f, 2.0f, 3.0f, 4.0f, kInf, kNan};
  const std::optional<NonFiniteValue> bad = first_non_finite(Tensor::from_floats(values, {2, 3}));
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->flat_index, 4);
  EXPECT_EQ(bad->position, "[1, 1]");
  EXPECT_TRUE(std::isinf(bad->value));
  const float fine[] = {0.0f, -1.0f};
  EXPECT_FALSE(first_non_finite(Tensor::from_floats(fine, {2})).has_value());
  const int64_t ints[] = {1, 2};
  EXPECT_FALSE(first_non_finite(Tensor::from_ints(ints, {2})).has_value());
}

// Writes inputs [4, 2] (with `bad` at row 2, column 1 when `in_inputs`) and int64 classes, or float
// targets [4, 3] with `bad` at [3, 2] for mse.
std::string write_data(const TempDir& dir, float bad, bool in_inputs, bool mse = false) {
  std::vector<float> x = {0.f, 1.f, 1.f, 0.f, 0.5f, 0.5f, -1.f, 1.f};
  if (in_inputs) x[5] = bad;
  save_npy(dir / "x.npy", Tensor::from_floats(x, {4, 2}));
  if (mse) {
    std::vector<float> y(12, 0.25f);
    if (!in_inputs) y[11] = bad;
    save_npy(dir / "y.npy", Tensor::from_floats(y, {4, 3}));
  } else {
    const int64_t y[] = {0, 1, 2, 1};
    save_npy(dir / "y.npy", Tensor::from_ints(y, {4}));
  }
  return (dir / "x.npy") + "," + (dir / "y.npy");
}

// Regression test: NaN in --data said "loss became nan ... (try a smaller --lr)".
TEST(TrainValues, NonFiniteDataIsNamedWithItsFileAndPosition) {
  TempDir dir("values_data");
  const std::string nan_inputs = write_data(dir, kNan, true);
  auto r = run_dpscope("train --model 2-8-3 --batch 4 --steps 2 --data " + nan_inputs);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output,
            "dpscope: error: " + (dir / "x.npy") + ": value [2, 1] is nan; inputs must be finite numbers\n");

  const std::string inf_targets = write_data(dir, -kInf, false, /*mse=*/true);
  r = run_dpscope("train --model 2-8-3 --loss mse --batch 4 --steps 2 --data " + inf_targets);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "dpscope: error: " + (dir / "y.npy") +
                          ": value [3, 2] is -inf; targets must be finite numbers\n");
}

// Regression test: NaN in --init weights said "loss became nan ... (try a smaller --lr)".
TEST(TrainValues, NonFiniteInitialWeightsAreNamedWithTheTensorAndPosition) {
  TempDir dir("values_init");
  const std::string good = "train --dataset spirals:64 --model 2-8-3 --batch 16 --steps 1 ";
  ASSERT_EQ(run_dpscope(good + "--save " + (dir / "w.safetensors")).exit_code, 0);
  NamedTensors w = load_safetensors(dir / "w.safetensors");
  ASSERT_EQ(w[2].first, "2.weight");
  w[2].second.f32()[7] = kNan;  // [3, 8]: row 0, column 7
  save_safetensors(dir / "bad.safetensors", w);
  const auto r = run_dpscope(good + "--init " + (dir / "bad.safetensors"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "dpscope: error: --init " + (dir / "bad.safetensors") +
                          ": tensor '2.weight' holds nan at [0, 7]; weights must be finite numbers\n");
}

// A FIFO as --init or --data blocked the run on open(); a directory is named as one.
TEST(TrainValues, InputsThatAreNotRegularFilesAreNamedNeverOpened) {
  TempDir dir("values_kinds");
  const std::string fifo = dir / "pipe.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string good = "train --dataset spirals:64 --model 2-8-3 --batch 16 --steps 1 ";
  auto r = run_dpscope(good + "--init " + fifo);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "dpscope: error: --init " + fifo + ": is a FIFO (named pipe), not a regular file\n");
  r = run_dpscope("train --model 2-8-3 --batch 4 --steps 1 --data " + dir.path().string() + "," + fifo);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "dpscope: error: --data " + dir.path().string() + ": is a directory\n");
}

}  // namespace
}  // namespace dpscope
