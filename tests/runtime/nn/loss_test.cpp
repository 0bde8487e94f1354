// ReLU, MSELoss and CrossEntropyLoss: values, gradients against double-precision finite
// differences, numerical stability, and the error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "dpscope/core/preset.hpp"
#include "dpscope/nn/activation.hpp"
#include "dpscope/nn/loss.hpp"
#include "runtime/nn/reference.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::finite_differences;
using testing::random_floats;
using testing::to_double;
using testing::Vec;

using testing::what_of;

TEST(ReLU, ForwardClampsNegativesAndKeepsNaN) {
  ReLU relu;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> y =
      relu.forward(Tensor::from_floats(std::vector<float>{-1.0f, 0.0f, 2.0f, nan}, {4})).to_vector();
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_TRUE(std::isnan(y[3]));
  // Like PyTorch's threshold_backward: the gradient passes where the output is not <= 0.
  const std::vector<float> dx = relu.backward(Tensor::full({4}, 3.0f)).to_vector();
  EXPECT_EQ(dx, (std::vector<float>{0.0f, 0.0f, 3.0f, 3.0f}));
}

TEST(ReLU, GradientMatchesFiniteDifferences) {
  const std::vector<float> x = random_floats(12, 21), c = random_floats(12, 22);
  ReLU relu;
  relu.forward(Tensor::from_floats(x, {3, 4}));
  const Vec got = to_double(relu.backward(Tensor::from_floats(c, {3, 4})));
  const Vec expected = finite_differences(Vec(x.begin(), x.end()), [&](const Vec& v) {
    const Vec y = testing::relu_ref(v);
    double s = 0.0;
    for (size_t i = 0; i < y.size(); ++i) s += c[i] * y[i];
    return s;
  });
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << i;
}

TEST(MSELoss, IsTheMeanOfSquaredErrorsAndItsGradient) {
  MSELoss mse;
  const Tensor loss = mse.forward(Tensor::from_floats(std::vector<float>{1, 2, 3, 4}, {2, 2}),
                                  Tensor::from_floats(std::vector<float>{0, 2, 5, 4}, {2, 2}));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_FLOAT_EQ(loss.item(), 1.25f);  // (1 + 0 + 4 + 0) / 4
  // 2 (x - t) / numel
  EXPECT_EQ(mse.backward().to_vector(), (std::vector<float>{0.5f, 0.0f, -1.0f, 0.0f}));
}

TEST(MSELoss, GradientMatchesFiniteDifferencesAndScalesWithGradOutput) {
  const std::vector<float> x = random_floats(15, 31), t = random_floats(15, 32);
  MSELoss mse;
  const Vec td(t.begin(), t.end());
  const float value = mse.forward(Tensor::from_floats(x, {5, 3}), Tensor::from_floats(t, {5, 3})).item();
  EXPECT_NEAR(value, testing::mse_ref(Vec(x.begin(), x.end()), td), 1e-6);
  const Vec got = to_double(mse.backward(2.0f));
  const Vec expected = finite_differences(Vec(x.begin(), x.end()),
                                          [&](const Vec& v) { return 2.0 * testing::mse_ref(v, td); });
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << i;
}

TEST(MSELoss, ShapeAndDtypeMismatchesAreErrors) {
  MSELoss mse;
  EXPECT_EQ(what_of([&] {
              mse.forward(Tensor::zeros({4, 2}), Tensor::zeros({4, 3}));
            }),
            "MSELoss: input shape [4, 2] and target shape [4, 3] differ");
  EXPECT_EQ(what_of([&] {
              mse.forward(Tensor::zeros({4}),
                          Tensor::zeros({4}, Device::cpu(), MemoryCategory::kActivations, DType::kI64));
            }),
            "MSELoss: expected float32 input and target, got float32 and int64");
  EXPECT_EQ(
      what_of([&] { mse.backward(); }),
      "MSELoss.backward: no forward() since the last backward(); saved tensors are freed by backward()");
}

TEST(CrossEntropyLoss, ValueIsTheMeanNegativeLogSoftmaxOfTheTarget) {
  CrossEntropyLoss ce;
  const Tensor loss = ce.forward(Tensor::from_floats(std::vector<float>{0, 0, 0, 1, 2, 3}, {2, 3}),
                                 Tensor::from_ints(std::vector<int64_t>{2, 0}, {2}));
  const double row0 = std::log(3.0);
  const double row1 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 1.0;
  EXPECT_NEAR(loss.item(), (row0 + row1) / 2.0, 1e-6);
}

TEST(CrossEntropyLoss, LargeLogitsStayFinite) {
  CrossEntropyLoss ce;
  const Tensor loss = ce.forward(Tensor::from_floats(std::vector<float>{1000.0f, 0.0f}, {1, 2}),
                                 Tensor::from_ints(std::vector<int64_t>{1}, {1}));
  EXPECT_FLOAT_EQ(loss.item(), 1000.0f);
  const std::vector<float> grad = ce.backward().to_vector();
  EXPECT_FLOAT_EQ(grad[0], 1.0f);   // softmax = (1, 0)
  EXPECT_FLOAT_EQ(grad[1], -1.0f);  // minus the one-hot target
}

TEST(CrossEntropyLoss, GradientMatchesFiniteDifferences) {
  constexpr int64_t kBatch = 4, kClasses = 5;
  const std::vector<float> x = random_floats(kBatch * kClasses, 41, -3.0f, 3.0f);
  const std::vector<int64_t> targets{4, 0, 2, 2};
  CrossEntropyLoss ce;
  const float value =
      ce.forward(Tensor::from_floats(x, {kBatch, kClasses}), Tensor::from_ints(targets, {kBatch})).item();
  EXPECT_NEAR(value, testing::cross_entropy_ref(Vec(x.begin(), x.end()), targets, kClasses), 1e-6);
  const Vec got = to_double(ce.backward());
  const Vec expected = finite_differences(Vec(x.begin(), x.end()), [&](const Vec& v) {
    return testing::cross_entropy_ref(v, targets, kClasses);
  });
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << i;
}

TEST(CrossEntropyLoss, OutOfRangeTargetNamesTheIndexAndTheClassCount) {
  CrossEntropyLoss ce;
  const Tensor logits = Tensor::zeros({2, 10});
  EXPECT_EQ(what_of([&] {
              ce.forward(logits, Tensor::from_ints(std::vector<int64_t>{3, 12}, {2}));
            }),
            "CrossEntropyLoss: Target 12 is out of bounds (class indices must be in [0, 10), at row 1).");
  EXPECT_EQ(what_of([&] {
              ce.forward(logits, Tensor::from_ints(std::vector<int64_t>{-1, 0}, {2}));
            }),
            "CrossEntropyLoss: Target -1 is out of bounds (class indices must be in [0, 10), at row 0).");
}

// Without the host-side check (a step captured as a CUDA graph), valid targets give the same loss.
TEST(CrossEntropyLoss, WithoutTheTargetCheckValidTargetsGiveTheSameLoss) {
  const Tensor logits = Tensor::from_floats(std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f, 0.0f, -0.75f}, {2, 3});
  const Tensor targets = Tensor::from_ints(std::vector<int64_t>{2, 0}, {2});
  CrossEntropyLoss checked;
  CrossEntropyLoss unchecked;
  unchecked.set_check_targets(false);
  const float expected = checked.forward(logits, targets).item();
  EXPECT_EQ(unchecked.forward(logits, targets).item(), expected);
  EXPECT_NEAR(expected, testing::cross_entropy_ref({0.5, -1.0, 2.0, 0.25, 0.0, -0.75}, {2, 0}, 3), 1e-6);
}

TEST(CrossEntropyLoss, ShapeAndDtypeErrors) {
  CrossEntropyLoss ce;
  EXPECT_EQ(what_of([&] {
              ce.forward(Tensor::zeros({4, 10}), Tensor::from_ints(std::vector<int64_t>(5, 0), {5}));
            }),
            "CrossEntropyLoss: Expected input batch_size (4) to match target batch_size (5).");
  EXPECT_EQ(what_of([&] {
              ce.forward(Tensor::zeros({4, 10}), Tensor::zeros({4}));
            }),
            "CrossEntropyLoss: expected int64 class indices of shape [batch], got float32 [4]");
  EXPECT_EQ(
      what_of([&] { ce.forward(Tensor::zeros({10}), Tensor::from_ints(std::vector<int64_t>{0}, {1})); }),
      "CrossEntropyLoss: expected float32 logits of shape [batch, classes], got float32 [10]");
}

TEST(CrossEntropyLoss, TargetsOnAnotherDeviceFailLikePyTorch) {
  const Device dev = Device::sim(0, find_preset("h100-sxm"));
  CrossEntropyLoss ce;
  try {
    ce.forward(Tensor::zeros({2, 3}, dev), Tensor::from_ints(std::vector<int64_t>{0, 1}, {2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDevice);
    EXPECT_STREQ(
        e.what(),
        "Expected all tensors to be on the same device, but found at least two devices, sim:0 and cpu!");
  }
}

TEST(CrossEntropyLoss, SavedProbabilitiesAreFreedByBackward) {
  const Device dev = Device::sim(0, find_preset("h100-sxm"));
  CrossEntropyLoss ce;
  const int kActivations = static_cast<int>(MemoryCategory::kActivations);
  {
    const Tensor logits = Tensor::zeros({4, 8}, dev);
    const Tensor targets = Tensor::from_ints(std::vector<int64_t>{0, 1, 2, 3}, {4}, dev);
    const uint64_t inputs = dev.memory().bytes[kActivations];
    ce.forward(logits, targets);
    EXPECT_EQ(dev.memory().bytes[kActivations], inputs + 4u * 8u * 4u);  // the saved softmax
    ce.backward();
  }
  EXPECT_EQ(dev.memory().bytes[kActivations], 0u);
}

}  // namespace
}  // namespace dpscope
