// CUDA against the CPU on the same inputs, op by op, with the tolerance each op is held to:
//  * element-wise ops, bias row sums and optimizer steps: bit-identical (the shared bodies of
//    kernels/elementwise.hpp, compiled for the GPU without FMA contraction, round as on the CPU);
//  * matrix products: 1e-5 relative to the sum of |terms| (cuBLAS sums in another order; TF32 off);
//  * losses: 1e-6 relative (two-pass reductions in double; the GPU's expf).
// Every test skips, printing the reason, on a machine without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "dpscope/core/cuda.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "kernel_reference.hpp"

namespace dpscope {
namespace {

using namespace kernel_test;

class CudaMatchesCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda_unavailable();
    if (!reason.empty()) GTEST_SKIP() << reason;
    gpu = cuda::make_devices({.count = 1}).front();
  }
  Device cpu = Device::new_cpu();
  Device gpu = Device::cpu();  // the cuda device, made in SetUp
};

// |gpu - cpu| <= rel * scale[i] per element.
void expect_within(const std::vector<float>& got, const std::vector<float>& want,
                   const std::vector<double>& scale, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), rel * scale[i]) << what << " [" << i << "]";
}

TEST_F(CudaMatchesCpu, MatrixProductsWithin1e5OfTheTermsWithTf32Off) {
  // 784 inputs: TF32's 10-bit mantissa would miss 1e-5 by orders of magnitude.
  const int64_t rows = 257, in = 784, out = 65;
  const auto x = random_floats(static_cast<size_t>(rows * in), 1);
  const auto w = random_floats(static_cast<size_t>(out * in), 2);
  const auto b = random_floats(static_cast<size_t>(out), 3);
  const auto dy = random_floats(static_cast<size_t>(rows * out), 4);
  std::vector<std::vector<float>> results[2];
  for (int k = 0; k < 2; ++k) {
    const Device& d = k == 0 ? cpu : gpu;
    Tensor y = Tensor::empty({rows, out}, d);
    kernels::linear_forward(on(d, x, {rows, in}), on(d, w, {out, in}), on(d, b, {out}), y);
    Tensor dw = on(d, w, {out, in});
    kernels::linear_grad_weight(on(d, dy, {rows, out}), on(d, x, {rows, in}), dw, true);
    Tensor dx = Tensor::zeros({rows, in}, d);
    kernels::linear_grad_input(on(d, dy, {rows, out}), on(d, w, {out, in}), dx);
    results[k] = {y.to_vector(), dw.to_vector(), dx.to_vector()};
  }
  // Terms are products of numbers in [-2, 2]: bound each output by its count of terms times 4.
  const auto bound = [](size_t n, double terms) { return std::vector<double>(n, 4.0 * terms + 2.0); };
  expect_within(results[1][0], results[0][0], bound(results[0][0].size(), in), 1e-5, "linear_forward");
  expect_within(results[1][1], results[0][1], bound(results[0][1].size(), rows), 1e-5, "linear_grad_weight");
  expect_within(results[1][2], results[0][2], bound(results[0][2].size(), out), 1e-5, "linear_grad_input");
}

TEST_F(CudaMatchesCpu, ElementwiseOpsAndBiasSumsAreBitIdentical) {
  const int64_t rows = 129, n_out = 33, n = rows * n_out;
  auto a = random_floats(static_cast<size_t>(n), 5, -70000.0f, 70000.0f);
  a[0] = -0.0f;
  a[1] = std::numeric_limits<float>::infinity();
  const auto b = random_floats(static_cast<size_t>(n), 6);
  const auto db0 = random_floats(static_cast<size_t>(n_out), 7);
  std::vector<std::vector<float>> results[2];
  std::vector<float> scratch;
  for (int k = 0; k < 2; ++k) {
    const Device& d = k == 0 ? cpu : gpu;
    Tensor relu = Tensor::empty({n}, d), drelu = Tensor::empty({n}, d), scaled = Tensor::empty({n}, d);
    kernels::relu_forward(on(d, a, {n}), relu);
    kernels::relu_backward(relu, on(d, b, {n}), drelu);
    kernels::scale_copy(on(d, b, {n}), 0.3f, scaled);
    kernels::accumulate(on(d, a, {n}), scaled);
    Tensor half = on(d, a, {n}), compressed = on(d, a, {n});
    kernels::fp16_round(half);
    kernels::fp16_compress(compressed, 3.0f);
    Tensor reduced = on(d, b, {n});
    const Tensor other = on(d, a, {n});
    kernels::reduce_into(d, reinterpret_cast<std::byte*>(reduced.f32()),
                         reinterpret_cast<const std::byte*>(other.f32()), n, kernels::Reduction::kProduct,
                         DType::kF32);
    kernels::divide(d, reinterpret_cast<std::byte*>(reduced.f32()), n, 7.0f);
    Tensor db = on(d, db0, {n_out});
    kernels::bias_grad(on(d, b, {rows, n_out}), db, true, scratch);
    Tensor dmse = Tensor::empty({n}, d);
    kernels::mse_backward(on(d, a, {n}), on(d, b, {n}), 0.7f, dmse);
    results[k] = {relu.to_vector(),       drelu.to_vector(),   scaled.to_vector(), half.to_vector(),
                  compressed.to_vector(), reduced.to_vector(), db.to_vector(),     dmse.to_vector()};
  }
  const char* names[] = {"relu_forward", "relu_backward", "scale_copy + accumulate",
                         "fp16_round",   "fp16_compress", "reduce_into + divide",
                         "bias_grad",    "mse_backward"};
  for (size_t op = 0; op < results[0].size(); ++op) EXPECT_EQ(results[1][op], results[0][op]) << names[op];
}

TEST_F(CudaMatchesCpu, OptimizerStepsAreBitIdentical) {
  const int64_t n = 65537;
  const auto p0 = random_floats(static_cast<size_t>(n), 8);
  const auto g = random_floats(static_cast<size_t>(n), 9);
  const auto m0 = random_floats(static_cast<size_t>(n), 10, -0.1f, 0.1f);
  const auto v0 = random_floats(static_cast<size_t>(n), 11, 0.0f, 0.01f);
  const kernels::SgdStep sgd{.neg_lr = -0.05f,
                             .momentum = 0.8f,
                             .weight_decay = 0.01f,
                             .use_momentum = true,
                             .decay = true,
                             .nesterov = true};
  const kernels::AdamStep adamw{.beta1 = 0.9f,
                                .beta2 = 0.999f,
                                .one_minus_beta1 = 0.1f,
                                .one_minus_beta2 = 0.001f,
                                .neg_step_size = -0.003f,
                                .bias_correction2_sqrt = 0.05f,
                                .eps = 1e-8f,
                                .weight_decay = 0.01f,
                                .decay_factor = 0.99999f,
                                .decoupled_decay = true};
  std::vector<std::vector<float>> results[2];
  for (int k = 0; k < 2; ++k) {
    const Device& d = k == 0 ? cpu : gpu;
    Tensor p = on(d, p0, {n}), buf = on(d, m0, {n});
    kernels::sgd_update(p, on(d, g, {n}), buf, sgd);
    Tensor q = on(d, p0, {n}), m = on(d, m0, {n}), v = on(d, v0, {n}), vmax = on(d, v0, {n});
    kernels::adam_update(q, on(d, g, {n}), m, v, vmax, adamw);
    results[k] = {p.to_vector(), buf.to_vector(), q.to_vector(),
                  m.to_vector(), v.to_vector(),   vmax.to_vector()};
  }
  const char* names[] = {"sgd param", "sgd buffer", "adamw param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  for (size_t t = 0; t < results[0].size(); ++t) EXPECT_EQ(results[1][t], results[0][t]) << names[t];
}

TEST_F(CudaMatchesCpu, LossesWithin1e6AndNormsInDouble) {
  const int64_t batch = 4097, classes = 10;
  const auto logits = random_floats(static_cast<size_t>(batch * classes), 12, -30.0f, 30.0f);
  std::vector<int64_t> targets(static_cast<size_t>(batch));
  for (size_t r = 0; r < targets.size(); ++r) targets[r] = static_cast<int64_t>(r * 7 % classes);
  const auto t = random_floats(static_cast<size_t>(batch * classes), 13);
  std::vector<float> probs[2], mse[2], ce[2];
  double norm[2] = {0.0, 0.0};
  for (int k = 0; k < 2; ++k) {
    const Device& d = k == 0 ? cpu : gpu;
    Tensor p = Tensor::empty({batch, classes}, d), loss = Tensor::empty({}, d),
           mse_loss = Tensor::empty({}, d);
    kernels::cross_entropy_forward(on(d, logits, {batch, classes}), Tensor::from_ints(targets, {batch}, d), p,
                                   loss);
    kernels::mse_forward(on(d, logits, {batch * classes}), on(d, t, {batch * classes}), mse_loss);
    probs[k] = p.to_vector();
    ce[k] = loss.to_vector();
    mse[k] = mse_loss.to_vector();
    norm[k] = kernels::l2_norm(on(d, logits, {batch * classes}));
  }
  std::vector<double> prob_scale(probs[0].size());
  for (size_t i = 0; i < prob_scale.size(); ++i) prob_scale[i] = std::fabs(probs[0][i]) + 1e-30;
  expect_within(probs[1], probs[0], prob_scale, 1e-6, "softmax probs");
  expect_within(ce[1], ce[0], {std::fabs(ce[0][0])}, 1e-6, "cross_entropy loss");
  expect_within(mse[1], mse[0], {std::fabs(mse[0][0])}, 1e-6, "mse loss");
  EXPECT_NEAR(norm[1], norm[0], 1e-12 * norm[0]) << "l2_norm";
}

}  // namespace
}  // namespace dpscope
