// `dpscope train` against PyTorch: same initial state_dict (safetensors), same .npy data, no
// shuffling — the weights after several steps must equal PyTorch's within 1e-5. Skips (visibly)
// when python3 (testing::python3()) has no torch.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>

#include "dpscope/io/safetensors.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

using testing::run_command;
using testing::run_dpscope;
using testing::TempDir;

struct ParityCase {
  const char* name;
  const char* model;
  const char* loss;
  const char* optim;
  double lr;
  double momentum;
  double weight_decay;
  int batch;
  int steps;
  int samples;
};

// How GoogleTest (and so ctest) names a case: its name, not its bytes.
void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.name; }

class TrainParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(TrainParity, WeightsMatchPyTorchAfterSeveralSteps) {
  if (!testing::torch_available()) GTEST_SKIP() << "python3-torch not installed: PyTorch parity not checked";
  const ParityCase& p = GetParam();
  TempDir dir(std::string("parity_") + p.name);
  const std::string script = std::string(DPSCOPE_SOURCE_DIR) + "/tests/parity/train_reference.py";
  const auto ref = run_command(fmt::format("{} {} {} {} {} {} {} {} {} {} {} 0 {}", testing::python3(),
                                           script, dir.path().string(), p.model, p.loss, p.optim, p.lr,
                                           p.momentum, p.weight_decay, p.batch, p.steps, p.samples));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;

  const auto ours = run_dpscope(
      fmt::format("train --mode single --device sim --model {} --loss {} --optim {} --lr {} --momentum {} "
                  "--weight-decay {} "
                  "--batch {} --steps {} --data {},{} --no-shuffle --init {} --save {}",
                  p.model, p.loss, p.optim, p.lr, p.momentum, p.weight_decay, p.batch, p.steps, dir / "x.npy",
                  dir / "y.npy", dir / "init.safetensors", dir / "ours.safetensors"));
  ASSERT_EQ(ours.exit_code, 0) << ours.output;

  const NamedTensors expected = load_safetensors(dir / "expected.safetensors");
  const NamedTensors actual = load_safetensors(dir / "ours.safetensors");
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [name, want] : expected) {
    const Tensor& got = find_tensor(actual, name);
    ASSERT_EQ(got.shape(), want.shape()) << name;
    const std::vector<float> a = got.to_vector(), b = want.to_vector();
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LE(worst, 1e-5f) << name << " differs from PyTorch by " << worst;
  }
}

INSTANTIATE_TEST_SUITE_P(
    PyTorch, TrainParity,
    ::testing::Values(
        ParityCase{"ce_sgd_momentum", "20-32-16-5", "ce", "sgd", 0.1, 0.9, 0.0, 16, 8, 64},
        ParityCase{"mse_sgd_momentum_wd", "12-24-24-3", "mse", "sgd", 0.05, 0.9, 1e-3, 10, 7, 45},
        ParityCase{"ce_adam", "16-32-4", "ce", "adam", 1e-3, 0.0, 0.0, 8, 6, 40},
        ParityCase{"mse_adamw_deep", "8-16-16-16-2", "mse", "adamw", 1e-2, 0.0, 0.0, 12, 5, 48}),
    [](const ::testing::TestParamInfo<ParityCase>& case_info) { return std::string(case_info.param.name); });

TEST(DdpParity, WeightsMatchPyTorchGlooDdp) {
  if (!testing::torch_available())
    GTEST_SKIP() << "python3-torch not installed: PyTorch DDP parity not checked";
  TempDir dir("ddp_parity");
  const std::string parity = std::string(DPSCOPE_SOURCE_DIR) + "/tests/parity/";
  // Data and initial weights from the single-device reference (0 steps), then gloo DDP on 3 ranks.
  ASSERT_EQ(run_command(fmt::format("{} {}train_reference.py {} 10-16-4 ce sgd 0.1 0 0 6 0 0 42",
                                    testing::python3(), parity, dir.path().string()))
                .exit_code,
            0);
  const auto ref = run_command(fmt::format("{} {}ddp_reference.py {} 3 10-16-4 ce 0.1 0.9 6 5",
                                           testing::python3(), parity, dir.path().string()));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto ours = run_dpscope(fmt::format(
      "train --mode ddp --devices 3 --model 10-16-4 --loss ce --optim sgd --lr 0.1 --momentum 0.9 --batch 6 "
      "--steps 5 --no-shuffle --data {},{} --init {} --save {}",
      dir / "x.npy", dir / "y.npy", dir / "init.safetensors", dir / "ours.safetensors"));
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  const NamedTensors expected = load_safetensors(dir / "ddp_expected.safetensors");
  const NamedTensors actual = load_safetensors(dir / "ours.safetensors");
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [name, want] : expected) {
    const std::vector<float> a = find_tensor(actual, name).to_vector(), b = want.to_vector();
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LE(worst, 1e-5f) << name << " differs from PyTorch DDP by " << worst;
  }
}

}  // namespace
}  // namespace dpscope
