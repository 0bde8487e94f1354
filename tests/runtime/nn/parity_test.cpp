// Parity with PyTorch 1.13 (skipped without torch): the seeded initialisation is bit-identical to
// torch.manual_seed + nn.Sequential, and 5 training steps of a 3-layer MLP with SGD(momentum),
// Adam and AdamW under cross-entropy and MSE give the same losses, gradients and weights
// within 1e-5. The reference is tests/parity/nn_reference.py, run with testing::python3().
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/adam.hpp"
#include "dpscope/optim/sgd.hpp"
#include "runtime/nn/reference.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

using nlohmann::json;

const std::string kPython = testing::python3();
const std::vector<int64_t> kSizes{6, 8, 5, 3};
constexpr const char* kSpec = "6-8-5-3";
constexpr int64_t kBatch = 7;
constexpr int kSteps = 5;
constexpr uint64_t kSeed = 1234;

bool torch_available() {
  static const bool available =
      std::system(fmt::format("{} -c 'import torch' >/dev/null 2>&1", kPython).c_str()) == 0;
  return available;
}

// Runs nn_reference.py on `spec`; fails the test (returns null) when it does not succeed.
json run_reference(const json& spec) {
  const std::filesystem::path input =
      std::filesystem::temp_directory_path() / fmt::format("dpscope_nn_parity_{}.json", ::getpid());
  std::ofstream(input) << spec.dump();
  const std::string command = fmt::format("{} {}/tests/parity/nn_reference.py < {} 2>&1", kPython,
                                          DPSCOPE_SOURCE_DIR, input.string());
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return nullptr;
  }
  std::string output;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  const int status = ::pclose(pipe);
  std::filesystem::remove(input);
  if (status != 0) {
    ADD_FAILURE() << "nn_reference.py failed: " << output;
    return nullptr;
  }
  return json::parse(output);
}

void expect_near(const std::vector<float>& got, const json& expected, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i].get<double>(), tolerance) << what << "[" << i << "]";
}

TEST(PyTorchParity, SeededMlpInitialisationIsBitIdentical) {
  if (!torch_available()) GTEST_SKIP() << "PyTorch not importable by " << kPython << "; parity not checked";
  const json reference = run_reference({{"sizes", kSizes}, {"seed", kSeed}});
  ASSERT_FALSE(reference.is_null());
  auto model = Sequential::mlp(kSpec, Device::cpu(), kSeed);
  for (const Parameter* p : model->parameters()) {
    const std::vector<float> expected = reference["initial"][p->name].get<std::vector<float>>();
    EXPECT_EQ(p->data.to_vector(), expected) << p->name;
  }
}

struct Case {
  std::string loss;  // "ce" or "mse"
  json optimizer;    // as torch.optim keyword arguments, plus "name"
};

std::unique_ptr<Optimizer> make_optimizer(const json& o, std::vector<Parameter*> params) {
  const std::string name = o["name"];
  if (name == "sgd") {
    return std::make_unique<SGD>(params, SgdOptions{.lr = o["lr"],
                                                    .momentum = o.value("momentum", 0.0),
                                                    .dampening = o.value("dampening", 0.0),
                                                    .weight_decay = o.value("weight_decay", 0.0),
                                                    .nesterov = o.value("nesterov", false)});
  }
  const std::pair<double, double> betas{o["betas"][0], o["betas"][1]};
  if (name == "adam") {
    return std::make_unique<Adam>(params, AdamOptions{.lr = o["lr"],
                                                      .betas = betas,
                                                      .eps = o.value("eps", 1e-8),
                                                      .weight_decay = o.value("weight_decay", 0.0),
                                                      .amsgrad = o.value("amsgrad", false)});
  }
  return std::make_unique<AdamW>(params, AdamWOptions{.lr = o["lr"],
                                                      .betas = betas,
                                                      .eps = o.value("eps", 1e-8),
                                                      .weight_decay = o.value("weight_decay", 1e-2),
                                                      .amsgrad = o.value("amsgrad", false)});
}

class TrainingParity : public ::testing::TestWithParam<Case> {};

TEST_P(TrainingParity, FiveStepsMatchPyTorchWithin1e5) {
  if (!torch_available()) GTEST_SKIP() << "PyTorch not importable by " << kPython << "; parity not checked";
  const Case& c = GetParam();
  const std::vector<float> x = testing::random_floats(kBatch * kSizes.front(), 77, -2.0f, 2.0f);
  json spec = {{"sizes", kSizes},          {"seed", kSeed},  {"batch", kBatch}, {"x", x}, {"loss", c.loss},
               {"optimizer", c.optimizer}, {"steps", kSteps}};
  Tensor target;
  if (c.loss == "ce") {
    std::vector<int64_t> y(kBatch);
    for (int64_t i = 0; i < kBatch; ++i) y[static_cast<size_t>(i)] = (i * 2 + 1) % kSizes.back();
    spec["y"] = y;
    target = Tensor::from_ints(y, {kBatch});
  } else {
    const std::vector<float> y = testing::random_floats(kBatch * kSizes.back(), 78);
    spec["y"] = y;
    target = Tensor::from_floats(y, {kBatch, kSizes.back()});
  }
  const json reference = run_reference(spec);
  ASSERT_FALSE(reference.is_null());
  ASSERT_EQ(reference["steps"].size(), static_cast<size_t>(kSteps));

  auto model = Sequential::mlp(kSpec, Device::cpu(), kSeed);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(c.optimizer, model->parameters());
  std::unique_ptr<Loss> loss_fn;
  if (c.loss == "ce") {
    loss_fn = std::make_unique<CrossEntropyLoss>();
  } else {
    loss_fn = std::make_unique<MSELoss>();
  }
  const Tensor input = Tensor::from_floats(x, {kBatch, kSizes.front()});
  for (int step = 0; step < kSteps; ++step) {
    const json& expected = reference["steps"][static_cast<size_t>(step)];
    optimizer->zero_grad();
    const float loss = loss_fn->forward(model->forward(input), target).item();
    model->backward(loss_fn->backward());
    EXPECT_NEAR(loss, expected["loss"].get<double>(), 1e-5) << "loss at step " << step;
    for (const Parameter* p : model->parameters())
      expect_near(p->grad.to_vector(), expected["grads"][p->name], 1e-5,
                  fmt::format("grad {} at step {}", p->name, step));
    optimizer->step();
    for (const Parameter* p : model->parameters())
      expect_near(p->data.to_vector(), expected["params"][p->name], 1e-5,
                  fmt::format("{} after step {}", p->name, step));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, TrainingParity,
    ::testing::Values(
        Case{"ce", {{"name", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}}},
        Case{"mse", {{"name", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}}},
        Case{"ce",
             {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}, {"nesterov", true}, {"weight_decay", 0.01}}},
        Case{"mse", {{"name", "sgd"}, {"lr", 0.05}, {"momentum", 0.5}, {"dampening", 0.3}}},
        Case{"ce", {{"name", "adam"}, {"lr", 0.01}, {"betas", {0.9, 0.999}}}},
        Case{"mse", {{"name", "adam"}, {"lr", 0.01}, {"betas", {0.9, 0.999}}}},
        Case{"ce",
             {{"name", "adam"},
              {"lr", 0.01},
              {"betas", {0.8, 0.99}},
              {"weight_decay", 0.1},
              {"amsgrad", true}}},
        Case{"mse", {{"name", "adamw"}, {"lr", 0.01}, {"betas", {0.9, 0.999}}, {"weight_decay", 0.1}}}),
    [](const ::testing::TestParamInfo<Case>& param_info) {
      return fmt::format("{}_{}_{}", param_info.index, param_info.param.loss,
                         param_info.param.optimizer["name"].get<std::string>());
    });

}  // namespace
}  // namespace dpscope
