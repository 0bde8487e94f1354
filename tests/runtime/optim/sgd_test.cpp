// SGD: PyTorch 1.13's update rule for plain, momentum, dampening, Nesterov, weight decay and
// maximize, checked against values worked out by hand and a double-precision recurrence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "dpscope/optim/sgd.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using ::testing::ElementsAre;

using testing::what_of;

Parameter scalar_param(float value) {
  Parameter p;
  p.name = "w";
  p.index = 0;
  p.data = Tensor::from_floats(std::vector<float>{value}, {1}, Device::cpu(), MemoryCategory::kParameters);
  return p;
}

// Three steps with gradient 0.5 each time, starting from 1.0; returns the parameter after each.
std::vector<float> three_steps(const SgdOptions& options) {
  Parameter p = scalar_param(1.0f);
  SGD sgd({&p}, options);
  std::vector<float> values;
  for (int t = 0; t < 3; ++t) {
    p.grad = Tensor::full({1}, 0.5f);
    sgd.step();
    values.push_back(p.data.item());
  }
  return values;
}

TEST(SGD, PlainStepIsParamMinusLrTimesGrad) {
  EXPECT_THAT(three_steps({.lr = 0.1}),
              ElementsAre(::testing::FloatEq(0.95f), ::testing::FloatEq(0.9f), ::testing::FloatEq(0.85f)));
}

TEST(SGD, MomentumBufferStartsAsACopyOfTheGradient) {
  // buf: 0.5, 0.9*0.5+0.5 = 0.95, 0.9*0.95+0.5 = 1.355
  EXPECT_THAT(
      three_steps({.lr = 0.1, .momentum = 0.9}),
      ElementsAre(::testing::FloatEq(0.95f), ::testing::FloatEq(0.855f), ::testing::FloatEq(0.7195f)));
}

TEST(SGD, DampeningIsNotAppliedOnTheFirstStep) {
  // buf: 0.5 (no dampening), 0.45+0.5*0.5 = 0.7, 0.63+0.25 = 0.88
  EXPECT_THAT(three_steps({.lr = 0.1, .momentum = 0.9, .dampening = 0.5}),
              ElementsAre(::testing::FloatEq(0.95f), ::testing::FloatEq(0.88f), ::testing::FloatEq(0.792f)));
}

TEST(SGD, NesterovAddsMomentumTimesTheBufferToTheGradient) {
  // d = g + 0.9 buf: 0.95, 1.355, 1.7195
  EXPECT_THAT(
      three_steps({.lr = 0.1, .momentum = 0.9, .nesterov = true}),
      ElementsAre(::testing::FloatEq(0.905f), ::testing::FloatEq(0.7695f), ::testing::FloatEq(0.59755f)));
}

TEST(SGD, WeightDecayAddsDecayTimesParamToTheGradient) {
  // d = 0.5 + 0.1 p: p = 1 - 0.1*0.6, 0.94 - 0.1*0.594, 0.8806 - 0.1*0.58806
  EXPECT_THAT(
      three_steps({.lr = 0.1, .weight_decay = 0.1}),
      ElementsAre(::testing::FloatEq(0.94f), ::testing::FloatEq(0.8806f), ::testing::FloatEq(0.821794f)));
}

TEST(SGD, MaximizeAscendsTheGradient) {
  EXPECT_THAT(three_steps({.lr = 0.1, .maximize = true}),
              ElementsAre(::testing::FloatEq(1.05f), ::testing::FloatEq(1.1f), ::testing::FloatEq(1.15f)));
}

TEST(SGD, AllOptionsTogetherMatchADoublePrecisionRecurrence) {
  const SgdOptions options{
      .lr = 0.05, .momentum = 0.8, .dampening = 0.0, .weight_decay = 0.01, .nesterov = true};
  const std::vector<float> init{0.3f, -1.2f, 2.0f, 0.0f};
  Parameter p;
  p.name = "0.weight";
  p.data = Tensor::from_floats(init, {2, 2}, Device::cpu(), MemoryCategory::kParameters);
  SGD sgd({&p}, options);
  std::vector<double> param(init.begin(), init.end()), buf(4);
  for (int t = 1; t <= 3; ++t) {
    std::vector<float> grad(4);
    for (size_t j = 0; j < 4; ++j) grad[j] = static_cast<float>(0.1 * t * (static_cast<double>(j) - 1.5));
    p.grad = Tensor::from_floats(grad, {2, 2});
    sgd.step();
    for (size_t j = 0; j < 4; ++j) {
      double d = grad[j] + options.weight_decay * param[j];
      buf[j] = t == 1 ? d : options.momentum * buf[j] + (1.0 - options.dampening) * d;
      d = d + options.momentum * buf[j];
      param[j] -= options.lr * d;
    }
    const std::vector<float> got = p.data.to_vector();
    for (size_t j = 0; j < 4; ++j) EXPECT_NEAR(got[j], param[j], 1e-6) << "step " << t << " element " << j;
  }
}

TEST(SGD, ParametersWithoutGradientsAreSkipped) {
  Parameter a = scalar_param(1.0f), b = scalar_param(2.0f);
  b.name = "v";
  SGD sgd({&a, &b}, {.lr = 0.1, .momentum = 0.9});
  a.grad = Tensor::full({1}, 1.0f);
  sgd.step();
  EXPECT_FLOAT_EQ(a.data.item(), 0.9f);
  EXPECT_FLOAT_EQ(b.data.item(), 2.0f);
  const StateDict state = sgd.state_tensors();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "w.momentum_buffer");
}

TEST(SGD, InvalidOptionsAreRejectedWithPyTorchMessages) {
  Parameter p = scalar_param(1.0f);
  EXPECT_EQ(what_of([&] { SGD({&p}, {.lr = -0.1}); }), "Invalid learning rate: -0.1");
  EXPECT_EQ(what_of([&] { SGD({&p}, {.lr = 0.1, .momentum = -1.0}); }), "Invalid momentum value: -1.0");
  EXPECT_EQ(what_of([&] { SGD({&p}, {.lr = 0.1, .weight_decay = -0.5}); }),
            "Invalid weight_decay value: -0.5");
  EXPECT_EQ(what_of([&] { SGD({&p}, {.lr = 0.1, .nesterov = true}); }),
            "Nesterov momentum requires a momentum and zero dampening");
  EXPECT_EQ(what_of([&] { SGD({&p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); }),
            "Nesterov momentum requires a momentum and zero dampening");
  EXPECT_EQ(what_of([&] { SGD({&p}, SgdOptions{}); }), "SGD: a learning rate is required (SgdOptions::lr)");
  EXPECT_EQ(what_of([&] { SGD({}, {.lr = 0.1}); }), "optimizer got an empty parameter list");
  EXPECT_EQ(what_of([&] { SGD({&p, &p}, {.lr = 0.1}); }), "optimizer got parameter w more than once");
  try {
    SGD({&p}, {.lr = -1.0});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

TEST(SGD, ZeroGradClearsOrZeroesTheGradients) {
  Parameter p = scalar_param(1.0f);
  SGD sgd({&p}, {.lr = 0.1});
  p.grad = Tensor::full({1}, 3.0f);
  sgd.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(p.grad.item(), 0.0f);
  sgd.zero_grad();
  EXPECT_FALSE(p.grad.defined());
}

}  // namespace
}  // namespace dpscope
