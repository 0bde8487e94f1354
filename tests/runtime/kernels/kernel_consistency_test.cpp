// Every kernel of the kernel layer on every device kind (cpu, sim, cuda), against the plain
// references of kernel_reference.hpp (in the style of ggml's test-backend-ops). Each op states its
// tolerance; sizes include 0, 1, odd and large. A new device kind joins by one line in
// device_cases(); the cuda case skips, printing why, on a machine without a GPU.
#include <gtest/gtest.h>

#include <tuple>

#include <algorithm>
#include <cmath>

#include "dpscope/kernels/kernels.hpp"
#include "kernel_reference.hpp"

namespace dpscope {
namespace {

using namespace kernel_test;

// Tolerances per op. The host kinds run the same code and match the references exactly where the
// reference does the same float arithmetic; the stated bounds are what any device must meet (a GPU
// may contract a*b+c into one FMA, or sum in another order).
constexpr Tolerance kMatmul{1e-5, 1e-5};       // relative to the sum of |terms|, see check_matmul
constexpr Tolerance kElementwise{1e-7, 1e-6};  // a few float roundings per element
constexpr Tolerance kLoss{1e-6, 1e-6};         // softmax, log-sum-exp, means over the batch
constexpr Tolerance kUpdate{1e-6, 1e-6};       // optimizer rules: sums of terms of size ~1 that cancel

const std::vector<int64_t> kLengths = {0, 1, 7, 1023, 65537};

class KernelConsistency : public OnEveryDevice {};

// |y - ref| <= tol.abs + tol.rel * sum|terms| per output, the bound of a float dot product.
void check_matmul(const std::vector<float>& got, const std::vector<double>& ref,
                  const std::vector<double>& magnitude, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - ref[i]), kMatmul.abs + kMatmul.rel * magnitude[i])
        << what << " [" << i << "]";
}

std::vector<float> abs_of(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::fabs(v[i]);
  return out;
}

struct MatmulShape {
  int64_t rows, in, out;
};
const std::vector<MatmulShape> kMatmulShapes = {
    {0, 3, 2}, {1, 1, 1}, {7, 5, 3}, {129, 33, 17}, {256, 784, 64}};

TEST_P(KernelConsistency, LinearForwardWithAndWithoutBias) {
  for (const MatmulShape s : kMatmulShapes) {
    for (bool with_bias : {false, true}) {
      const auto x = random_floats(static_cast<size_t>(s.rows * s.in), 1);
      const auto w = random_floats(static_cast<size_t>(s.out * s.in), 2);
      const auto b = random_floats(static_cast<size_t>(s.out), 3);
      Tensor y = Tensor::empty({s.rows, s.out}, device);
      const Tensor bias = with_bias ? on(device, b, {s.out}) : Tensor();
      kernels::linear_forward(on(device, x, {s.rows, s.in}), on(device, w, {s.out, s.in}), bias, y);
      const auto magnitude = ref_linear(abs_of(x), abs_of(w), with_bias ? &b : nullptr, s.rows, s.in, s.out);
      check_matmul(y.to_vector(), ref_linear(x, w, with_bias ? &b : nullptr, s.rows, s.in, s.out), magnitude,
                   fmt::format("linear_forward {}x{}x{} bias={}", s.rows, s.in, s.out, with_bias));
    }
  }
}

TEST_P(KernelConsistency, LinearGradWeightOverwritesOrAccumulates) {
  for (const MatmulShape s : kMatmulShapes) {
    for (bool accumulate : {false, true}) {
      const auto dy = random_floats(static_cast<size_t>(s.rows * s.out), 4);
      const auto x = random_floats(static_cast<size_t>(s.rows * s.in), 5);
      const auto dw0 = random_floats(static_cast<size_t>(s.out * s.in), 6);
      Tensor dw = on(device, dw0, {s.out, s.in});
      kernels::linear_grad_weight(on(device, dy, {s.rows, s.out}), on(device, x, {s.rows, s.in}), dw,
                                  accumulate);
      // dW[o][i] = sum_r dy[r][o] x[r][i]: the forward reference with dyᵀ as x and xᵀ as w.
      std::vector<float> dy_t(dy.size()), x_t(x.size());
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t o = 0; o < s.out; ++o)
          dy_t[static_cast<size_t>(o * s.rows + r)] = dy[static_cast<size_t>(r * s.out + o)];
        for (int64_t i = 0; i < s.in; ++i)
          x_t[static_cast<size_t>(i * s.rows + r)] = x[static_cast<size_t>(r * s.in + i)];
      }
      auto ref = ref_linear(dy_t, x_t, nullptr, s.out, s.rows, s.in);
      auto magnitude = ref_linear(abs_of(dy_t), abs_of(x_t), nullptr, s.out, s.rows, s.in);
      if (accumulate)
        for (size_t k = 0; k < ref.size(); ++k) {
          ref[k] += dw0[k];
          magnitude[k] += std::fabs(dw0[k]);
        }
      // With no rows there is nothing to add: dW keeps its values either way (as the caller's
      // zeroed fresh gradient).
      if (s.rows == 0) ref = widen(dw0);
      check_matmul(dw.to_vector(), ref, magnitude,
                   fmt::format("linear_grad_weight {}x{}x{} accumulate={}", s.rows, s.in, s.out, accumulate));
    }
  }
}

TEST_P(KernelConsistency, LinearGradInput) {
  for (const MatmulShape s : kMatmulShapes) {
    const auto dy = random_floats(static_cast<size_t>(s.rows * s.out), 7);
    const auto w = random_floats(static_cast<size_t>(s.out * s.in), 8);
    Tensor dx = Tensor::zeros({s.rows, s.in}, device);
    kernels::linear_grad_input(on(device, dy, {s.rows, s.out}), on(device, w, {s.out, s.in}), dx);
    // dx[r][i] = sum_o dy[r][o] w[o][i]: the forward reference with wᵀ.
    std::vector<float> w_t(w.size());
    for (int64_t o = 0; o < s.out; ++o)
      for (int64_t i = 0; i < s.in; ++i)
        w_t[static_cast<size_t>(i * s.out + o)] = w[static_cast<size_t>(o * s.in + i)];
    check_matmul(dx.to_vector(), ref_linear(dy, w_t, nullptr, s.rows, s.out, s.in),
                 ref_linear(abs_of(dy), abs_of(w_t), nullptr, s.rows, s.out, s.in),
                 fmt::format("linear_grad_input {}x{}x{}", s.rows, s.in, s.out));
  }
}

TEST_P(KernelConsistency, BiasGradSumsRowsThenAccumulates) {
  std::vector<float> scratch;
  for (const MatmulShape s : kMatmulShapes) {
    for (bool accumulate : {false, true}) {
      const auto dy = random_floats(static_cast<size_t>(s.rows * s.out), 9);
      const auto db0 = accumulate ? random_floats(static_cast<size_t>(s.out), 10)
                                  : std::vector<float>(static_cast<size_t>(s.out), 0.0f);
      Tensor db = on(device, db0, {s.out});
      kernels::bias_grad(on(device, dy, {s.rows, s.out}), db, accumulate, scratch);
      std::vector<double> ref = widen(db0);
      std::vector<double> magnitude = widen(abs_of(db0));
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t o = 0; o < s.out; ++o) {
          ref[static_cast<size_t>(o)] += dy[static_cast<size_t>(r * s.out + o)];
          magnitude[static_cast<size_t>(o)] += std::fabs(dy[static_cast<size_t>(r * s.out + o)]);
        }
      check_matmul(db.to_vector(), ref, magnitude,
                   fmt::format("bias_grad rows={} out={} accumulate={}", s.rows, s.out, accumulate));
    }
  }
}

TEST_P(KernelConsistency, ReluForwardAndBackwardAreExact) {
  for (int64_t n : kLengths) {
    auto x = random_floats(static_cast<size_t>(n), 11);
    if (n > 1) x[1] = -0.0f;  // -0 is not positive: forward gives 0, backward blocks the gradient
    const auto dy = random_floats(static_cast<size_t>(n), 12);
    Tensor y = Tensor::empty({n}, device);
    kernels::relu_forward(on(device, x, {n}), y);
    std::vector<double> ref_y(static_cast<size_t>(n)), ref_dx(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) {
      ref_y[i] = x[i] > 0.0f ? x[i] : 0.0f;
      ref_dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    }
    expect_close(y.to_vector(), ref_y, kExact, fmt::format("relu_forward n={}", n));
    Tensor dx = Tensor::empty({n}, device);
    kernels::relu_backward(y, on(device, dy, {n}), dx);
    expect_close(dx.to_vector(), ref_dx, kExact, fmt::format("relu_backward n={}", n));
  }
}

TEST_P(KernelConsistency, MseForwardAndBackward) {
  for (int64_t n : kLengths) {
    const auto x = random_floats(static_cast<size_t>(n), 13);
    const auto t = random_floats(static_cast<size_t>(n), 14);
    Tensor loss = Tensor::empty({}, device);
    kernels::mse_forward(on(device, x, {n}), on(device, t, {n}), loss);
    double sum = 0.0;
    for (size_t i = 0; i < x.size(); ++i)
      sum += (static_cast<double>(x[i]) - t[i]) * (static_cast<double>(x[i]) - t[i]);
    const double mean = n == 0 ? std::numeric_limits<double>::quiet_NaN() : sum / static_cast<double>(n);
    expect_close(loss.to_vector(), {mean}, kLoss, fmt::format("mse_forward n={}", n));

    Tensor dx = Tensor::empty({n}, device);
    kernels::mse_backward(on(device, x, {n}), on(device, t, {n}), 0.5f, dx);
    std::vector<double> ref(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i)
      ref[i] = 2.0 * 0.5 * (static_cast<double>(x[i]) - t[i]) / static_cast<double>(n);
    expect_close(dx.to_vector(), ref, kElementwise, fmt::format("mse_backward n={}", n));
  }
}

TEST_P(KernelConsistency, CrossEntropyForwardIsStableAndBackwardIsSoftmaxMinusOneHot) {
  struct Case {
    int64_t batch, classes;
    float scale;  // logits up to ±scale: 1000 would overflow a naive exp
  };
  for (const Case c : {Case{0, 3, 1.0f}, Case{1, 1, 1.0f}, Case{7, 5, 4.0f}, Case{257, 10, 1000.0f}}) {
    const auto logits = random_floats(static_cast<size_t>(c.batch * c.classes), 15, -c.scale, c.scale);
    std::vector<int64_t> targets(static_cast<size_t>(c.batch));
    for (size_t r = 0; r < targets.size(); ++r)
      targets[r] = static_cast<int64_t>((r * 7 + 3) % static_cast<size_t>(c.classes));
    const Tensor t = Tensor::from_ints(targets, {c.batch}, device);
    Tensor probs = Tensor::empty({c.batch, c.classes}, device);
    Tensor loss = Tensor::empty({}, device);
    kernels::cross_entropy_forward(on(device, logits, {c.batch, c.classes}), t, probs, loss);

    std::vector<double> ref_p(logits.size());
    double total = 0.0;
    for (int64_t r = 0; r < c.batch; ++r) {
      const float* row = logits.data() + r * c.classes;
      const double max = *std::max_element(row, row + c.classes);
      double sum = 0.0;
      for (int64_t k = 0; k < c.classes; ++k) sum += std::exp(row[k] - max);
      for (int64_t k = 0; k < c.classes; ++k)
        ref_p[static_cast<size_t>(r * c.classes + k)] = std::exp(row[k] - max) / sum;
      total += max + std::log(sum) - row[targets[static_cast<size_t>(r)]];
    }
    const double mean =
        c.batch == 0 ? std::numeric_limits<double>::quiet_NaN() : total / static_cast<double>(c.batch);
    const std::string what = fmt::format("cross_entropy {}x{} scale {}", c.batch, c.classes, c.scale);
    expect_close(probs.to_vector(), ref_p, kLoss, what + " probs");
    expect_close(loss.to_vector(), {mean}, Tolerance{kLoss.abs, kLoss.rel * 10}, what + " loss");

    Tensor dx = Tensor::empty({c.batch, c.classes}, device);
    kernels::cross_entropy_backward(probs, t, 2.0f, dx);
    const std::vector<float> p = probs.to_vector();
    std::vector<double> ref_dx(p.size());
    for (int64_t r = 0; r < c.batch; ++r)
      for (int64_t k = 0; k < c.classes; ++k) {
        const size_t i = static_cast<size_t>(r * c.classes + k);
        const double onehot = k == targets[static_cast<size_t>(r)] ? 1.0 : 0.0;
        ref_dx[i] = 2.0 * (p[i] - onehot) / static_cast<double>(c.batch);
      }
    expect_close(dx.to_vector(), ref_dx, kElementwise, what + " backward");
  }
}

TEST_P(KernelConsistency, FillCopyScaleCopyAndAccumulate) {
  for (int64_t n : kLengths) {
    const auto a = random_floats(static_cast<size_t>(n), 16);
    const auto b = random_floats(static_cast<size_t>(n), 17);
    Tensor t = Tensor::empty({n}, device);
    kernels::fill(t, 1.5f);
    expect_close(t.to_vector(), std::vector<double>(static_cast<size_t>(n), 1.5), kExact,
                 fmt::format("fill n={}", n));
    kernels::copy(on(device, a, {n}), t);
    expect_close(t.to_vector(), widen(a), kExact, fmt::format("copy n={}", n));

    std::vector<double> scaled(static_cast<size_t>(n)), summed(static_cast<size_t>(n));
    for (size_t i = 0; i < a.size(); ++i) {
      scaled[i] = static_cast<double>(a[i]) * 0.25;  // a power of two: exact in float
      summed[i] = static_cast<double>(scaled[i]) + b[i];
    }
    Tensor out = Tensor::empty({n}, device);
    kernels::scale_copy(t, 0.25f, out);
    expect_close(out.to_vector(), scaled, kExact, fmt::format("scale_copy n={}", n));
    kernels::scale_copy(t, 0.25f, t);  // in place (a gradient that already is a bucket view)
    expect_close(t.to_vector(), scaled, kExact, fmt::format("scale_copy in place n={}", n));
    kernels::accumulate(on(device, b, {n}), t);
    expect_close(t.to_vector(), summed, Tolerance{0.0, 6e-8}, fmt::format("accumulate n={}", n));
  }
}

// The norm a traced value sample carries: sqrt of a double sum of squares, in index order.
TEST_P(KernelConsistency, L2NormAccumulatesInDouble) {
  for (int64_t n : kLengths) {
    const auto a = random_floats(static_cast<size_t>(n), 18);
    double sum = 0.0;
    for (float x : a) sum += static_cast<double>(x) * x;
    const double norm = kernels::l2_norm(on(device, a, {n}));
    EXPECT_NEAR(norm, std::sqrt(sum), 1e-12 * std::max(1.0, std::sqrt(sum))) << "l2_norm n=" << n;
  }
  const std::vector<float> three_four = {3.0f, 4.0f};
  EXPECT_EQ(kernels::l2_norm(on(device, three_four, {2})), 5.0);
}

TEST_P(KernelConsistency, ValuesSnapshotsKeepTheNumbersOfTheMomentTheyWereTaken) {
  for (const size_t count : {size_t{4}, size_t{3}, size_t{0}}) {
    const auto a = random_floats(1000, 21);
    Tensor t = on(device, a, {1000});
    kernels::ValuesSnapshot snapshot = kernels::snapshot_values(t, count);
    kernels::fill(t, 7.0f);  // after the snapshot, in stream order: not seen by it
    snapshot.read();
    ASSERT_EQ(snapshot.values.size(), count);
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(snapshot.values[i], a[i]) << i;
    double sum = 0.0;
    for (float v : a) sum += static_cast<double>(v) * v;
    EXPECT_NEAR(snapshot.norm, std::sqrt(sum), 1e-12 * std::sqrt(sum)) << "count " << count;
  }
  const std::vector<float> two{3.0f, 4.0f};
  kernels::ValuesSnapshot few = kernels::snapshot_values(on(device, two, {2}), 4);  // fewer than asked
  few.read();
  EXPECT_EQ(few.values, two);
  EXPECT_EQ(few.norm, 5.0);
  // Strided: elements 0, stride, 2 * stride, ... (what traced gradients sample), never past the end.
  const auto a = random_floats(1000, 22);
  for (const auto& [count, stride, expect] :
       {std::tuple{size_t{32}, int64_t{31}, size_t{32}}, std::tuple{size_t{32}, int64_t{100}, size_t{10}},
        std::tuple{size_t{32}, int64_t{999}, size_t{2}}, std::tuple{size_t{5}, int64_t{1000}, size_t{1}}}) {
    kernels::ValuesSnapshot strided = kernels::snapshot_values(on(device, a, {1000}), count, stride);
    strided.read();
    ASSERT_EQ(strided.values.size(), expect) << "stride " << stride;
    for (size_t i = 0; i < expect; ++i)
      EXPECT_EQ(strided.values[i], a[i * static_cast<size_t>(stride)]) << "stride " << stride << " i " << i;
  }
  EXPECT_THROW(kernels::snapshot_values(on(device, a, {1000}), 4, 0), Error);
}

TEST_P(KernelConsistency, Fp16RoundingMatchesTheNearestHalf) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               1.0f + 1.0f / 2048,  // a tie: to even (1.0)
                               1.0f + 3.0f / 2048,
                               65504.0f,
                               65519.0f,
                               65520.0f,
                               -70000.0f,
                               5.96e-8f,
                               2.98e-8f,
                               1e-10f,
                               0.1f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  for (float v : random_floats(65537, 18, -70000.0f, 70000.0f)) values.push_back(v);
  for (float v : random_floats(4097, 19, -1e-4f, 1e-4f)) values.push_back(v);  // subnormal halves
  const auto n = static_cast<int64_t>(values.size());
  std::vector<double> rounded(values.size()), compressed(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    rounded[i] = ref_fp16(values[i]);
    compressed[i] = ref_fp16(ref_fp16(values[i]) / 4.0f);
  }
  Tensor t = on(device, values, {n});
  kernels::fp16_round(t);
  expect_close(t.to_vector(), rounded, kExact, "fp16_round");
  Tensor c = on(device, values, {n});
  kernels::fp16_compress(c, 4.0f);
  expect_close(c.to_vector(), compressed, kExact, "fp16_compress");
  for (int64_t empty_n : {0}) {
    Tensor e = Tensor::empty({empty_n}, device);
    kernels::fp16_round(e);
    EXPECT_EQ(e.numel(), 0);
  }
}

// torch.optim.SGD, written out in double from its documented rule.
TEST_P(KernelConsistency, SgdUpdateFollowsTorchRule) {
  struct Case {
    double lr, momentum, dampening, weight_decay;
    bool nesterov, maximize, first;
  };
  for (const Case c :
       {Case{0.1, 0.0, 0.0, 0.0, false, false, false}, Case{0.01, 0.9, 0.0, 1e-4, false, false, true},
        Case{0.01, 0.9, 0.1, 0.0, false, true, false}, Case{0.05, 0.8, 0.0, 0.01, true, false, false}}) {
    for (int64_t n : kLengths) {
      const auto p0 = random_floats(static_cast<size_t>(n), 20);
      const auto g = random_floats(static_cast<size_t>(n), 21);
      const auto buf0 = random_floats(static_cast<size_t>(n), 22);
      std::vector<double> ref_p(p0.size()), ref_buf(p0.size());
      for (size_t i = 0; i < p0.size(); ++i) {
        double d = c.maximize ? -g[i] : g[i];
        d += c.weight_decay * p0[i];
        double buf = buf0[i];
        if (c.momentum != 0.0) {
          buf = c.first ? d : buf * c.momentum + (1.0 - c.dampening) * d;
          d = c.nesterov ? d + c.momentum * buf : buf;
        }
        ref_buf[i] = buf;
        ref_p[i] = p0[i] - c.lr * d;
      }
      Tensor p = on(device, p0, {n});
      Tensor buf = on(device, buf0, {n});
      const kernels::SgdStep step{.neg_lr = static_cast<float>(-c.lr),
                                  .momentum = static_cast<float>(c.momentum),
                                  .one_minus_dampening = static_cast<float>(1.0 - c.dampening),
                                  .weight_decay = static_cast<float>(c.weight_decay),
                                  .use_momentum = c.momentum != 0.0,
                                  .decay = c.weight_decay != 0.0,
                                  .nesterov = c.nesterov,
                                  .maximize = c.maximize,
                                  .first = c.first};
      kernels::sgd_update(p, on(device, g, {n}), buf, step);
      const std::string what = fmt::format("sgd lr={} momentum={} n={}", c.lr, c.momentum, n);
      // buf * momentum + (1 - dampening) * d cancels: bound the error by the terms' size (about 1).
      expect_close(p.to_vector(), ref_p, kUpdate, what);
      if (c.momentum != 0.0) expect_close(buf.to_vector(), ref_buf, kUpdate, what + " buffer");
    }
  }
}

// torch.optim.Adam / AdamW (and amsgrad), written out in double from the documented rule.
TEST_P(KernelConsistency, AdamUpdateFollowsTorchRule) {
  struct Case {
    double lr, weight_decay;
    bool decoupled, amsgrad, maximize;
    int step;
  };
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  for (const Case c : {Case{1e-3, 0.0, false, false, false, 1}, Case{1e-2, 0.01, false, true, false, 3},
                       Case{1e-3, 0.01, true, false, true, 10}}) {
    for (int64_t n : kLengths) {
      const auto p0 = random_floats(static_cast<size_t>(n), 23);
      const auto g = random_floats(static_cast<size_t>(n), 24);
      const auto m0 = random_floats(static_cast<size_t>(n), 25, -0.1f, 0.1f);
      const auto v0 = random_floats(static_cast<size_t>(n), 26, 0.0f, 0.01f);
      const auto vmax0 = random_floats(static_cast<size_t>(n), 27, 0.0f, 0.01f);
      const double bc1 = 1.0 - std::pow(beta1, c.step);
      const double bc2 = 1.0 - std::pow(beta2, c.step);
      std::vector<double> ref_p(p0.size()), ref_m(p0.size()), ref_v(p0.size());
      for (size_t i = 0; i < p0.size(); ++i) {
        double p = p0[i];
        double grad = c.maximize ? -g[i] : g[i];
        if (c.decoupled)
          p *= 1.0 - c.lr * c.weight_decay;
        else
          grad += c.weight_decay * p;
        const double m = beta1 * m0[i] + (1.0 - beta1) * grad;
        const double v = beta2 * v0[i] + (1.0 - beta2) * grad * grad;
        const double second = c.amsgrad ? std::max<double>(vmax0[i], static_cast<float>(v)) : v;
        ref_p[i] = p - c.lr / bc1 * m / (std::sqrt(second) / std::sqrt(bc2) + eps);
        ref_m[i] = m;
        ref_v[i] = v;
      }
      Tensor p = on(device, p0, {n});
      Tensor m = on(device, m0, {n});
      Tensor v = on(device, v0, {n});
      Tensor vmax = c.amsgrad ? on(device, vmax0, {n}) : Tensor();
      const kernels::AdamStep step{.beta1 = static_cast<float>(beta1),
                                   .beta2 = static_cast<float>(beta2),
                                   .one_minus_beta1 = static_cast<float>(1.0 - beta1),
                                   .one_minus_beta2 = static_cast<float>(1.0 - beta2),
                                   .neg_step_size = static_cast<float>(-(c.lr / bc1)),
                                   .bias_correction2_sqrt = static_cast<float>(std::sqrt(bc2)),
                                   .eps = static_cast<float>(eps),
                                   .weight_decay = static_cast<float>(c.weight_decay),
                                   .decay_factor = static_cast<float>(1.0 - c.lr * c.weight_decay),
                                   .coupled_decay = !c.decoupled && c.weight_decay != 0.0,
                                   .decoupled_decay = c.decoupled,
                                   .maximize = c.maximize};
      kernels::adam_update(p, on(device, g, {n}), m, v, vmax, step);
      const std::string what =
          fmt::format("adam lr={} decoupled={} amsgrad={} n={}", c.lr, c.decoupled, c.amsgrad, n);
      // The update divides by sqrt(v) + eps: float rounding of v is amplified where v is tiny.
      expect_close(p.to_vector(), ref_p, Tolerance{1e-6, 1e-5}, what);
      expect_close(m.to_vector(), ref_m, kElementwise, what + " exp_avg");
      expect_close(v.to_vector(), ref_v, Tolerance{1e-9, 1e-5}, what + " exp_avg_sq");
    }
  }
}

TEST_P(KernelConsistency, ReduceIntoEveryOpAndDtype) {
  const struct {
    kernels::Reduction op;
    const char* name;
  } ops[] = {{kernels::Reduction::kSum, "sum"},
             {kernels::Reduction::kProduct, "product"},
             {kernels::Reduction::kMin, "min"},
             {kernels::Reduction::kMax, "max"}};
  for (const auto& [op, name] : ops) {
    for (int64_t n : kLengths) {
      const auto a = random_floats(static_cast<size_t>(n), 28);
      const auto b = random_floats(static_cast<size_t>(n), 29);
      std::vector<double> ref(a.size());
      std::vector<int64_t> ia(a.size()), ib(a.size()), iref(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ia[i] = static_cast<int64_t>(i) * 31 - 7;
        ib[i] = 5 - static_cast<int64_t>(i % 13);
        switch (op) {
          case kernels::Reduction::kSum:
            ref[i] = static_cast<double>(a[i]) + b[i];
            iref[i] = ia[i] + ib[i];
            break;
          case kernels::Reduction::kProduct:
            ref[i] = static_cast<double>(a[i]) * b[i];
            iref[i] = ia[i] * ib[i];
            break;
          case kernels::Reduction::kMin:
            ref[i] = std::min(a[i], b[i]);
            iref[i] = std::min(ia[i], ib[i]);
            break;
          case kernels::Reduction::kMax:
            ref[i] = std::max(a[i], b[i]);
            iref[i] = std::max(ia[i], ib[i]);
            break;
        }
      }
      Tensor dst = on(device, a, {n});
      const Tensor src = on(device, b, {n});
      kernels::reduce_into(device, reinterpret_cast<std::byte*>(dst.f32()),
                           reinterpret_cast<const std::byte*>(src.f32()), n, op, DType::kF32);
      // One float rounding of an exact double result.
      expect_close(dst.to_vector(), ref, Tolerance{0.0, 6e-8},
                   fmt::format("reduce_into f32 {} n={}", name, n));
      Tensor idst = Tensor::from_ints(ia, {n}, device);
      const Tensor isrc = Tensor::from_ints(ib, {n}, device);
      kernels::reduce_into(device, reinterpret_cast<std::byte*>(idst.i64()),
                           reinterpret_cast<const std::byte*>(isrc.i64()), n, op, DType::kI64);
      EXPECT_EQ(idst.to_ints(), iref) << "reduce_into i64 " << name << " n=" << n;
    }
  }
}

TEST_P(KernelConsistency, DivideIsTheLastStepOfAnAverage) {
  for (int64_t n : kLengths) {
    const auto a = random_floats(static_cast<size_t>(n), 30);
    std::vector<double> ref(a.size());
    for (size_t i = 0; i < a.size(); ++i) ref[i] = static_cast<double>(a[i]) / 3.0;
    Tensor t = on(device, a, {n});
    kernels::divide(device, reinterpret_cast<std::byte*>(t.f32()), n, 3.0f);
    expect_close(t.to_vector(), ref, Tolerance{0.0, 6e-8}, fmt::format("divide n={}", n));
  }
}

// Test names end in the device kind: KernelConsistency/.../cpu, .../sim, .../cuda.
std::string device_case_name(const ::testing::TestParamInfo<DeviceCase>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(AllDevices, KernelConsistency, ::testing::ValuesIn(device_cases()),
                         device_case_name);

}  // namespace
}  // namespace dpscope
