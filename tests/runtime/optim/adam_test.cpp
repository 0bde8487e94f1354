// Adam and AdamW: PyTorch 1.13's update (bias corrections, eps outside the square root, coupled
// vs decoupled weight decay, amsgrad), checked against closed forms and a double recurrence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "dpscope/core/preset.hpp"
#include "dpscope/optim/adam.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::what_of;

Parameter make_param(const std::vector<float>& values, const std::string& name = "w") {
  Parameter p;
  p.name = name;
  p.data = Tensor::from_floats(values, {static_cast<int64_t>(values.size())}, Device::cpu(),
                               MemoryCategory::kParameters);
  return p;
}

// The textbook recurrence in double, step by step, as torch/optim/adam.py and adamw.py write it.
struct AdamReference {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, decoupled;
  std::vector<double> param, m, v, v_max;
  int t = 0;

  void step(const std::vector<double>& grad) {
    ++t;
    const double bc1 = 1.0 - std::pow(beta1, t), bc2 = 1.0 - std::pow(beta2, t);
    for (size_t j = 0; j < param.size(); ++j) {
      double g = grad[j];
      if (decoupled) {
        param[j] *= 1.0 - lr * weight_decay;
      } else {
        g += weight_decay * param[j];
      }
      m[j] = beta1 * m[j] + (1.0 - beta1) * g;
      v[j] = beta2 * v[j] + (1.0 - beta2) * g * g;
      v_max[j] = std::max(v_max[j], v[j]);
      const double denom = std::sqrt(amsgrad ? v_max[j] : v[j]) / std::sqrt(bc2) + eps;
      param[j] -= lr / bc1 * m[j] / denom;
    }
  }
};

TEST(Adam, ConstantGradientMovesEachStepByLrTimesGOverAbsGPlusEps) {
  // With g constant, exp_avg = (1 - beta1^t) g and exp_avg_sq = (1 - beta2^t) g^2, so the bias
  // corrections cancel: every step subtracts lr * g / (|g| + eps).
  Parameter p = make_param({1.0f, -2.0f});
  Adam adam({&p}, {.lr = 0.01});
  const double g0 = 0.5, g1 = -0.001;
  for (int t = 1; t <= 3; ++t) {
    p.grad = Tensor::from_floats(std::vector<float>{static_cast<float>(g0), static_cast<float>(g1)}, {2});
    adam.step();
    const std::vector<float> got = p.data.to_vector();
    EXPECT_NEAR(got[0], 1.0 - t * 0.01 * g0 / (std::abs(g0) + 1e-8), 1e-6) << "step " << t;
    EXPECT_NEAR(got[1], -2.0 - t * 0.01 * g1 / (std::abs(g1) + 1e-8), 1e-6) << "step " << t;
  }
}

void expect_matches_reference(Adam& optimizer, Parameter& p, AdamReference ref) {
  for (int t = 1; t <= 3; ++t) {
    std::vector<float> grad(ref.param.size());
    std::vector<double> grad_d(ref.param.size());
    for (size_t j = 0; j < grad.size(); ++j) {
      grad[j] = static_cast<float>(std::sin(1.0 + static_cast<double>(j) * 0.7 + t * 1.3));
      grad_d[j] = grad[j];
    }
    p.grad = Tensor::from_floats(grad, {static_cast<int64_t>(grad.size())});
    optimizer.step();
    ref.step(grad_d);
    const std::vector<float> got = p.data.to_vector();
    for (size_t j = 0; j < got.size(); ++j)
      EXPECT_NEAR(got[j], ref.param[j], 2e-6) << "step " << t << " [" << j << "]";
  }
}

const std::vector<float> kInit{0.5f, -0.25f, 1.5f, 0.0f, -3.0f};

AdamReference reference(double lr, double wd, bool amsgrad, bool decoupled) {
  const std::vector<double> init(kInit.begin(), kInit.end());
  return {lr,
          0.8,
          0.95,
          1e-6,
          wd,
          amsgrad,
          decoupled,
          init,
          std::vector<double>(init.size()),
          std::vector<double>(init.size()),
          std::vector<double>(init.size())};
}

TEST(Adam, WeightDecayIsAddedToTheGradient) {
  Parameter p = make_param(kInit);
  Adam adam({&p}, {.lr = 0.1, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.2});
  expect_matches_reference(adam, p, reference(0.1, 0.2, false, false));
}

TEST(Adam, AmsgradUsesTheRunningMaximumOfTheSecondMoment) {
  Parameter p = make_param(kInit);
  Adam adam({&p}, {.lr = 0.1, .betas = {0.8, 0.95}, .eps = 1e-6, .amsgrad = true});
  expect_matches_reference(adam, p, reference(0.1, 0.0, true, false));
}

TEST(AdamW, WeightDecayScalesTheParameterBeforeTheUpdate) {
  Parameter p = make_param(kInit);
  AdamW adamw({&p}, {.lr = 0.1, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.2});
  EXPECT_STREQ(adamw.type_name(), "AdamW");
  expect_matches_reference(adamw, p, reference(0.1, 0.2, false, true));
}

TEST(AdamW, DefaultsDifferFromAdamOnlyInWeightDecay) {
  const AdamWOptions w;
  const AdamOptions a;
  EXPECT_EQ(w.weight_decay, 1e-2);
  EXPECT_EQ(a.weight_decay, 0.0);
  EXPECT_EQ(w.lr, a.lr);
  EXPECT_EQ(w.betas, a.betas);
  EXPECT_EQ(w.eps, a.eps);
}

TEST(Adam, MaximizeAscends) {
  Parameter p = make_param({1.0f});
  Adam adam({&p}, {.lr = 0.1, .maximize = true});
  p.grad = Tensor::full({1}, 2.0f);
  adam.step();
  EXPECT_NEAR(p.data.item(), 1.1, 1e-6);
}

TEST(Adam, StateHoldsAStepCounterAndBothMoments) {
  Parameter p = make_param({1.0f, 2.0f});
  Adam adam({&p}, {.lr = 0.1, .amsgrad = true});
  for (int t = 0; t < 3; ++t) {
    p.grad = Tensor::full({2}, 1.0f);
    adam.step();
  }
  const StateDict state = adam.state_tensors();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : state) names.push_back(name);
  EXPECT_THAT(names, ::testing::ElementsAre("w.step", "w.exp_avg", "w.exp_avg_sq", "w.max_exp_avg_sq"));
  EXPECT_EQ(state[0].second.dim(), 0);
  EXPECT_EQ(state[0].second.item(), 3.0f);
  EXPECT_EQ(state[1].second.category(), MemoryCategory::kOptimizerState);
  EXPECT_NEAR(state[1].second.to_vector()[0], 1.0 - std::pow(0.9, 3), 1e-6);
}

TEST(Adam, InvalidOptionsAreRejectedWithPyTorchMessages) {
  Parameter p = make_param({1.0f});
  EXPECT_EQ(what_of([&] { Adam({&p}, {.lr = -0.1}); }), "Invalid learning rate: -0.1");
  EXPECT_EQ(what_of([&] { Adam({&p}, {.eps = -1e-8}); }), "Invalid epsilon value: -1e-08");
  EXPECT_EQ(what_of([&] { Adam({&p}, {.betas = {1.0, 0.999}}); }), "Invalid beta parameter at index 0: 1.0");
  EXPECT_EQ(what_of([&] { Adam({&p}, {.betas = {0.9, -0.5}}); }), "Invalid beta parameter at index 1: -0.5");
  EXPECT_EQ(what_of([&] { Adam({&p}, {.weight_decay = -1.0}); }), "Invalid weight_decay value: -1.0");
  EXPECT_EQ(what_of([&] { AdamW({&p}, {.lr = -2.0}); }), "Invalid learning rate: -2.0");
}

// The step count of a parameter on an accelerator stays a 0-d tensor on the host (read and written
// there, never in device memory), and a checkpoint carries it as before.
TEST(Adam, TheStepCountOfADeviceParameterLivesOnTheHost) {
  const Device dev = Device::sim(0, find_preset("h100-sxm"));
  Parameter p{.name = "w", .data = Tensor::from_floats(std::vector<float>{1.0f, 2.0f}, {2}, dev)};
  Adam adam({&p}, {.lr = 0.1});
  for (int t = 0; t < 2; ++t) {
    p.grad = Tensor::full({2}, 1.0f, dev);
    adam.step();
  }
  const StateDict state = adam.state_tensors();
  ASSERT_EQ(state[0].first, "w.step");
  EXPECT_EQ(state[0].second.device().kind(), DeviceKind::kCpu);
  EXPECT_EQ(state[0].second.item(), 2.0f);
  EXPECT_EQ(state[1].second.device(), dev);  // the moments live with the parameter

  Parameter q{.name = "w", .data = p.data.clone()};
  Adam resumed({&q}, {.lr = 0.1});
  resumed.load_state_tensors(state);
  EXPECT_EQ(resumed.state_tensors()[0].second.device().kind(), DeviceKind::kCpu);
  p.grad = Tensor::full({2}, 1.0f, dev);
  q.grad = Tensor::full({2}, 1.0f, dev);
  adam.step();
  resumed.step();
  EXPECT_EQ(resumed.state_tensors()[0].second.item(), 3.0f);
  EXPECT_EQ(q.data.to_vector(), p.data.to_vector());
}

}  // namespace
}  // namespace dpscope
