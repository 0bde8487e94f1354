// Linear: parameters, initialisation, forward values, gradients against finite differences,
// accumulation, timing-only tensors, clone/to and the errors a user meets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "dpscope/core/preset.hpp"
#include "dpscope/nn/linear.hpp"
#include "runtime/nn/reference.hpp"

namespace dpscope {
namespace {

using testing::finite_differences;
using ::testing::HasSubstr;
using testing::linear_ref;
using testing::random_floats;
using testing::to_double;
using testing::Vec;

Device sim_device(int index = 0) { return Device::sim(index, find_preset("h100-sxm")); }

// A Linear whose parameters are set to the given values.
std::unique_ptr<Linear> linear_with(int64_t in, int64_t out, const std::vector<float>& w,
                                    const std::vector<float>& b, const Device& device = Device::cpu()) {
  std::mt19937 gen(0);
  auto layer = std::make_unique<Linear>(in, out, device, gen);
  layer->load_state_dict(
      {{"weight", Tensor::from_floats(w, {out, in})}, {"bias", Tensor::from_floats(b, {out})}});
  return layer;
}

TEST(Linear, ParametersAreWeightThenBiasWithPyTorchShapes) {
  const Device dev = sim_device();
  std::mt19937 gen(0);
  Linear layer(3, 2, dev, gen);
  const std::vector<Parameter*> params = layer.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[0]->index, 0);
  EXPECT_EQ(params[0]->data.shape(), (Shape{2, 3}));
  EXPECT_EQ(params[1]->name, "bias");
  EXPECT_EQ(params[1]->index, 1);
  EXPECT_EQ(params[1]->data.shape(), (Shape{2}));
  EXPECT_FALSE(params[0]->grad.defined());
  EXPECT_EQ(layer.parameter_numel(), 8);
  EXPECT_EQ(dev.memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 8u * 4u);
}

TEST(Linear, WithoutBiasHasOnlyAWeight) {
  std::mt19937 gen(0);
  Linear layer(3, 2, Device::cpu(), gen, /*bias=*/false);
  ASSERT_EQ(layer.parameters().size(), 1u);
  EXPECT_EQ(layer.bias(), nullptr);
  auto no_bias = std::make_unique<Linear>(2, 1, Device::cpu(), gen, false);
  no_bias->load_state_dict({{"weight", Tensor::from_floats(std::vector<float>{2.0f, -1.0f}, {1, 2})}});
  const Tensor y = no_bias->forward(Tensor::from_floats(std::vector<float>{3.0f, 4.0f}, {1, 2}));
  EXPECT_EQ(y.to_vector(), std::vector<float>{2.0f});
}

TEST(Linear, InitIsUniformWithinOneOverSqrtFanInAndDeterministic) {
  std::mt19937 gen_a(42), gen_b(42), gen_c(43);
  Linear a(16, 8, Device::cpu(), gen_a), b(16, 8, Device::cpu(), gen_b), c(16, 8, Device::cpu(), gen_c);
  const float bound = 1.0f / 4.0f;
  for (const Parameter* p : a.parameters())
    for (float v : p->data.to_vector()) {
      EXPECT_LE(std::abs(v), bound);
    }
  EXPECT_EQ(a.weight().data.to_vector(), b.weight().data.to_vector());
  EXPECT_EQ(a.bias()->data.to_vector(), b.bias()->data.to_vector());
  EXPECT_NE(a.weight().data.to_vector(), c.weight().data.to_vector());
  // 128 weights spread over the interval: both halves are used.
  const std::vector<float> w = a.weight().data.to_vector();
  EXPECT_GT(*std::max_element(w.begin(), w.end()), bound / 2);
  EXPECT_LT(*std::min_element(w.begin(), w.end()), -bound / 2);
}

TEST(Linear, ForwardComputesXTimesWeightTransposedPlusBias) {
  auto layer = linear_with(3, 2, {1, 2, 3, 4, 5, 6}, {0.5f, -1.0f});
  const Tensor x = Tensor::from_floats(std::vector<float>{1, 0, -1, 2, 1, 0}, {2, 3});
  const Tensor y = layer->forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_vector(), (std::vector<float>{-1.5f, -3.0f, 4.5f, 12.0f}));
  EXPECT_TRUE(layer->weight().used_in_last_forward);
  EXPECT_TRUE(layer->bias()->used_in_last_forward);
}

TEST(Linear, GradientsOfWeightBiasAndInputMatchFiniteDifferences) {
  constexpr int64_t kRows = 4, kIn = 5, kOut = 3;
  const std::vector<float> w = random_floats(kOut * kIn, 1), b = random_floats(kOut, 2),
                           x = random_floats(kRows * kIn, 3), c = random_floats(kRows * kOut, 4);
  auto layer = linear_with(kIn, kOut, w, b);
  layer->forward(Tensor::from_floats(x, {kRows, kIn}));
  // With loss = sum(c * y), dloss/dy = c.
  const Tensor grad_input = layer->backward(Tensor::from_floats(c, {kRows, kOut}));

  const Vec wd(w.begin(), w.end()), bd(b.begin(), b.end()), xd(x.begin(), x.end()), cd(c.begin(), c.end());
  auto loss = [&](const Vec& wv, const Vec& bv, const Vec& xv) {
    const Vec y = linear_ref(xv, wv, bv, kRows, kIn, kOut);
    double s = 0.0;
    for (size_t i = 0; i < y.size(); ++i) s += cd[i] * y[i];
    return s;
  };
  const Vec dw = finite_differences(wd, [&](const Vec& v) { return loss(v, bd, xd); });
  const Vec db = finite_differences(bd, [&](const Vec& v) { return loss(wd, v, xd); });
  const Vec dx = finite_differences(xd, [&](const Vec& v) { return loss(wd, bd, v); });
  const Vec got_w = to_double(layer->weight().grad), got_b = to_double(layer->bias()->grad),
            got_x = to_double(grad_input);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(got_w[i], dw[i], 1e-5) << "weight " << i;
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(got_b[i], db[i], 1e-5) << "bias " << i;
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(got_x[i], dx[i], 1e-5) << "input " << i;
}

TEST(Linear, LeadingDimensionsAreFlattenedIntoRows) {
  const std::vector<float> w = random_floats(3 * 4, 5), b = random_floats(3, 6),
                           x = random_floats(2 * 5 * 4, 7);
  auto layer = linear_with(4, 3, w, b);
  const Tensor y3 = layer->forward(Tensor::from_floats(x, {2, 5, 4}));
  EXPECT_EQ(y3.shape(), (Shape{2, 5, 3}));
  const Tensor y2 = layer->forward(Tensor::from_floats(x, {10, 4}));
  EXPECT_EQ(y3.to_vector(), y2.to_vector());
}

TEST(Linear, BackwardAccumulatesIntoExistingGradients) {
  const std::vector<float> x = random_floats(6 * 4, 8), g = random_floats(6 * 3, 9);
  std::mt19937 gen(1);
  Linear layer(4, 3, Device::cpu(), gen);
  layer.forward(Tensor::from_floats(x, {6, 4}));
  layer.backward(Tensor::from_floats(g, {6, 3}));
  const std::vector<float> w1 = layer.weight().grad.to_vector(), b1 = layer.bias()->grad.to_vector();
  layer.forward(Tensor::from_floats(x, {6, 4}));
  layer.backward(Tensor::from_floats(g, {6, 3}));
  const std::vector<float> w2 = layer.weight().grad.to_vector(), b2 = layer.bias()->grad.to_vector();
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_FLOAT_EQ(w2[i], 2.0f * w1[i]);
  for (size_t i = 0; i < b1.size(); ++i) EXPECT_FLOAT_EQ(b2[i], 2.0f * b1[i]);
}

TEST(Linear, GradientsAreAccountedAsGradientsOnTheParameterDevice) {
  const Device dev = sim_device();
  std::mt19937 gen(1);
  Linear layer(4, 3, dev, gen);
  layer.forward(Tensor::zeros({2, 4}, dev));
  layer.backward(Tensor::zeros({2, 3}, dev));
  EXPECT_EQ(layer.weight().grad.device(), dev);
  EXPECT_EQ(layer.weight().grad.category(), MemoryCategory::kGradients);
  EXPECT_EQ(dev.memory().bytes[static_cast<int>(MemoryCategory::kGradients)], (12u + 3u) * 4u);
}

TEST(Linear, SavedInputIsFreedByBackward) {
  const Device dev = sim_device();
  std::mt19937 gen(1);
  Linear layer(4, 3, dev, gen);
  const int kActivations = static_cast<int>(MemoryCategory::kActivations);
  {
    const Tensor y = layer.forward(Tensor::zeros({2, 4}, dev));
    EXPECT_EQ(dev.memory().bytes[kActivations], (8u + 6u) * 4u);  // the saved input and the output
    layer.backward(Tensor::zeros({2, 3}, dev));
  }
  EXPECT_EQ(dev.memory().bytes[kActivations], 0u);
}

TEST(Linear, BackwardWithoutForwardFails) {
  std::mt19937 gen(1);
  Linear layer(4, 3, Device::cpu(), gen);
  layer.forward(Tensor::zeros({2, 4}));
  layer.backward(Tensor::zeros({2, 3}));
  try {
    layer.backward(Tensor::zeros({2, 3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("Linear.backward: no forward() since the last backward()"));
  }
}

TEST(Linear, InputWithWrongFeatureCountNamesBothShapes) {
  std::mt19937 gen(1);
  Linear layer(3, 2, Device::cpu(), gen);
  try {
    layer.forward(Tensor::zeros({4, 5}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(
        e.what(),
        "Linear: input of shape [4, 5] does not end in in_features 3 (mat1 and mat2 shapes cannot be "
        "multiplied (4x5 and 3x2))");
  }
}

TEST(Linear, GradOutputOfWrongShapeIsRejected) {
  std::mt19937 gen(1);
  Linear layer(3, 2, Device::cpu(), gen);
  layer.forward(Tensor::zeros({4, 3}));
  EXPECT_THAT(
      [&] {
        layer.backward(Tensor::zeros({4, 3}));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("expected grad_output of shape [4, 2], got [4, 3]")));
}

TEST(Linear, InputOnAnotherDeviceFailsLikePyTorch) {
  const Device dev = sim_device();
  std::mt19937 gen(1);
  Linear layer(3, 2, dev, gen);
  try {
    layer.forward(Tensor::zeros({4, 3}, Device::cpu()));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDevice);
    EXPECT_STREQ(
        e.what(),
        "Expected all tensors to be on the same device, but found at least two devices, sim:0 and cpu!");
  }
}

TEST(Linear, NonPositiveSizesAreRejected) {
  std::mt19937 gen(1);
  EXPECT_THAT([&] { Linear(0, 3, Device::cpu(), gen); },
              ::testing::ThrowsMessage<Error>(
                  ::testing::StrEq("Linear: in_features and out_features must be positive, got 0 and 3")));
}

TEST(Linear, TimingOnlyLayerProducesShapesWithoutData) {
  const Device dev = sim_device();
  auto layer = Linear::timing_only(1024, 4096, dev);
  EXPECT_FALSE(layer->weight().data.has_data());
  EXPECT_EQ(dev.memory().bytes[static_cast<int>(MemoryCategory::kParameters)], (1024u * 4096u + 4096u) * 4u);
  const Tensor y = layer->forward(Tensor::meta({64, 1024}, dev));
  EXPECT_EQ(y.shape(), (Shape{64, 4096}));
  EXPECT_FALSE(y.has_data());
  const Tensor dx = layer->backward(Tensor::meta({64, 4096}, dev));
  EXPECT_EQ(dx.shape(), (Shape{64, 1024}));
  EXPECT_FALSE(layer->weight().grad.has_data());
  EXPECT_EQ(layer->weight().grad.category(), MemoryCategory::kGradients);
  EXPECT_GT(dev.clock_ns(StreamKind::kCompute), 0);
}

TEST(Linear, CloneIsADeepCopyWithoutGradients) {
  auto layer = linear_with(2, 1, {1, 2}, {3});
  layer->forward(Tensor::zeros({1, 2}));
  layer->backward(Tensor::full({1, 1}, 1.0f));
  std::unique_ptr<Module> copy = layer->clone();
  const std::vector<Parameter*> params = copy->parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->data.to_vector(), (std::vector<float>{1, 2}));
  EXPECT_FALSE(params[0]->grad.defined());
  params[0]->data.fill(7.0f);
  EXPECT_EQ(layer->weight().data.to_vector(), (std::vector<float>{1, 2}));
}

TEST(Linear, CloneToAnotherDeviceAndToMoveParametersAndGradients) {
  const Device dev = sim_device();
  auto layer = linear_with(2, 1, {1, 2}, {3});
  std::unique_ptr<Module> replica = layer->clone(dev);
  EXPECT_EQ(replica->parameters()[0]->data.device(), dev);
  EXPECT_EQ(replica->parameters()[0]->data.to_vector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(dev.memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 12u);

  layer->forward(Tensor::zeros({1, 2}));
  layer->backward(Tensor::full({1, 1}, 1.0f));
  const Device dev2 = sim_device(1);
  layer->to(dev2);
  EXPECT_EQ(layer->weight().data.device(), dev2);
  EXPECT_EQ(layer->bias()->grad.device(), dev2);
  EXPECT_EQ(layer->bias()->grad.to_vector(), std::vector<float>{1.0f});
  EXPECT_EQ(dev2.memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 12u);
  EXPECT_EQ(dev2.memory().bytes[static_cast<int>(MemoryCategory::kGradients)], 12u);
  // The host-to-device copies were charged to the simulated clock.
  EXPECT_GT(dev2.clock_ns(StreamKind::kCompute), 0);
}

TEST(Linear, ZeroGradSetsToNoneOrToZero) {
  auto layer = linear_with(2, 1, {1, 2}, {3});
  layer->forward(Tensor::full({1, 2}, 1.0f));
  layer->backward(Tensor::full({1, 1}, 1.0f));
  layer->zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(layer->weight().grad.to_vector(), (std::vector<float>{0, 0}));
  layer->zero_grad();
  EXPECT_FALSE(layer->weight().grad.defined());
}

}  // namespace
}  // namespace dpscope
