// Element-wise kernel bodies: plain functions over an element range [begin, end), shared by every
// device kind. The CPU kernels (src/kernels/cpu_elementwise.cpp) call them over the whole range;
// the CUDA kernels (src/kernels/cuda/elementwise.cu, optim.cu) call them over each thread's slice, so
// the arithmetic (operation order, float vs double, rounding) is written once and the CPU tests
// already exercise it.
//
// Rules for this header: no allocation, no exceptions, no std:: containers, only <cmath> functions
// CUDA also provides in device code; every function is DPS_HOST_DEVICE.
#pragma once

#include <cmath>
#include <cstdint>

#include "dpscope/kernels/host_device.hpp"

namespace dpscope::kernels {

// ---- activations ----

// y = max(x, 0), with y = 0 for x = -0 and NaN kept (x < 0 is false for NaN).
DPS_HOST_DEVICE inline void relu_forward_range(const float* x, float* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

// dx = dy where the forward output y was positive, else 0 (PyTorch's threshold_backward on y).
DPS_HOST_DEVICE inline void relu_backward_range(const float* y, const float* dy, float* dx, int64_t begin,
                                                int64_t end) {
  for (int64_t i = begin; i < end; ++i) dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
}

// ---- losses ----

// The sum of (x - t)^2 over [begin, end), each difference and the sum in double (MSE's numerator).
DPS_HOST_DEVICE inline double squared_error_sum_range(const float* x, const float* t, int64_t begin,
                                                      int64_t end) {
  double sum = 0.0;
  for (int64_t i = begin; i < end; ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(t[i]);
    sum += d * d;
  }
  return sum;
}

// d/dx mean((x - t)^2) * grad_output: dx = scale * (x - t) with scale = 2 * grad_output / n.
DPS_HOST_DEVICE inline void mse_backward_range(const float* x, const float* t, float scale, float* dx,
                                               int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) dx[i] = scale * (x[i] - t[i]);
}

// One row of the cross-entropy gradient: dx = scale * (p - onehot(target)), scale = grad_output / B.
DPS_HOST_DEVICE inline void cross_entropy_backward_row(const float* p, int64_t target, float scale, float* dx,
                                                       int64_t classes) {
  for (int64_t c = 0; c < classes; ++c) dx[c] = scale * p[c];
  dx[target] = scale * (p[target] - 1.0f);
}

// ---- copies, scaling, reductions ----

// The sum of squares of x[begin, end), accumulated in double (a traced value sample's norm).
DPS_HOST_DEVICE inline double sum_of_squares_range(const float* x, int64_t begin, int64_t end) {
  double sum = 0.0;
  for (int64_t i = begin; i < end; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

DPS_HOST_DEVICE inline void fill_range(float* dst, float value, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) dst[i] = value;
}

// dst = src * scale; `src` may equal `dst` (an in-place scale).
DPS_HOST_DEVICE inline void scale_copy_range(const float* src, float scale, float* dst, int64_t begin,
                                             int64_t end) {
  for (int64_t i = begin; i < end; ++i) dst[i] = src[i] * scale;
}

DPS_HOST_DEVICE inline void divide_range(float* data, float divisor, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) data[i] /= divisor;
}

// The combining operations of a reduction; kAvg is a kSum followed by divide_range.
enum class Reduction : uint8_t { kSum, kProduct, kMin, kMax };

// The bias gradient sums dy's rows in blocks of this many rows, each block's sum from zero in row
// order, then the block sums in block order: the same additions on the CPU and on a GPU, where the
// blocks run in parallel (a column's plain running sum over thousands of rows would leave a GPU
// with one thread per feature).
inline constexpr int64_t kBiasGradRowBlock = 64;

// dst = combine(dst, src) element by element, in index order; dst and src do not overlap.
template <typename T>
DPS_HOST_DEVICE inline void reduce_range(T* __restrict__ dst, const T* __restrict__ src, Reduction op,
                                         int64_t begin, int64_t end) {
  switch (op) {
    case Reduction::kSum:
      for (int64_t i = begin; i < end; ++i) dst[i] = dst[i] + src[i];
      break;
    case Reduction::kProduct:
      for (int64_t i = begin; i < end; ++i) dst[i] = dst[i] * src[i];
      break;
    case Reduction::kMin:
      for (int64_t i = begin; i < end; ++i) dst[i] = src[i] < dst[i] ? src[i] : dst[i];
      break;
    case Reduction::kMax:
      for (int64_t i = begin; i < end; ++i) dst[i] = dst[i] < src[i] ? src[i] : dst[i];
      break;
  }
}

// ---- fp16 ----

// A float rounded to the nearest IEEE binary16 value (ties to even) and back, as a cast to
// torch.float16 and back does. Overflow goes to infinity; NaN and infinities pass through.
DPS_HOST_DEVICE inline float round_to_fp16(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  if (a >= 65520.0f) return std::copysign(INFINITY, x);  // rounds past the largest half, 65504
  // Spacing of representable halves around |x|: 2^(e-10) for normals, 2^-24 for subnormals.
  int exponent = 0;
  std::frexp(a, &exponent);  // a = m * 2^exponent, m in [0.5, 1)
  const int e = exponent - 1 > -14 ? exponent - 1 : -14;
  const float ulp = std::ldexp(1.0f, e - 10);
  // nearbyint rounds half to even in the default rounding mode.
  return std::copysign(std::nearbyint(a / ulp) * ulp, x);
}

DPS_HOST_DEVICE inline void fp16_round_range(float* data, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) data[i] = round_to_fp16(data[i]);
}

// DDP's fp16 compression hook before the all-reduce: cast to half, divide in half precision.
DPS_HOST_DEVICE inline void fp16_compress_range(float* data, float divisor, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) data[i] = round_to_fp16(round_to_fp16(data[i]) / divisor);
}

// ---- optimizer updates (torch.optim single-tensor rules; Python-float scalars act in float32) ----

struct SgdStep {
  float neg_lr = 0.0f;  // -lr, rounded to float once
  float momentum = 0.0f;
  float one_minus_dampening = 1.0f;
  float weight_decay = 0.0f;
  bool use_momentum = false;  // options.momentum != 0
  bool decay = false;         // options.weight_decay != 0
  bool nesterov = false;
  bool maximize = false;
  bool first = false;  // the momentum buffer is new: it starts as the gradient
};

// p -= lr * d_p with d_p = (maximize ? -g : g) (+ weight_decay * p), through the momentum buffer.
// `s` is taken by value: a local copy cannot alias the float arrays, so the compiler keeps its
// fields in registers and vectorizes the loop (by reference it reloads them every element).
DPS_HOST_DEVICE inline void sgd_update_range(float* p, const float* g, float* buf, SgdStep s, int64_t begin,
                                             int64_t end) {
  for (int64_t j = begin; j < end; ++j) {
    float d_p = s.maximize ? -g[j] : g[j];
    if (s.decay) d_p = d_p + s.weight_decay * p[j];
    if (s.use_momentum) {
      buf[j] = s.first ? d_p : buf[j] * s.momentum + s.one_minus_dampening * d_p;
      d_p = s.nesterov ? d_p + s.momentum * buf[j] : buf[j];
    }
    p[j] = p[j] + s.neg_lr * d_p;
  }
}

struct AdamStep {
  float beta1 = 0.0f;
  float beta2 = 0.0f;
  float one_minus_beta1 = 0.0f;
  float one_minus_beta2 = 0.0f;
  float neg_step_size = 0.0f;          // -lr / (1 - beta1^step)
  float bias_correction2_sqrt = 0.0f;  // sqrt(1 - beta2^step)
  float eps = 0.0f;
  float weight_decay = 0.0f;
  float decay_factor = 1.0f;     // 1 - lr * weight_decay (AdamW's decoupled decay)
  bool coupled_decay = false;    // Adam: grad += weight_decay * p
  bool decoupled_decay = false;  // AdamW: p *= decay_factor first
  bool maximize = false;
};

// One Adam/AdamW step; `max_exp_avg_sq` is nullptr unless amsgrad.
DPS_HOST_DEVICE inline void adam_update_range(float* p, const float* g, float* exp_avg, float* exp_avg_sq,
                                              float* max_exp_avg_sq, AdamStep s, int64_t begin, int64_t end) {
  for (int64_t j = begin; j < end; ++j) {
    float grad = s.maximize ? -g[j] : g[j];
    if (s.decoupled_decay) p[j] = p[j] * s.decay_factor;
    if (s.coupled_decay) grad = grad + s.weight_decay * p[j];
    exp_avg[j] = exp_avg[j] * s.beta1 + s.one_minus_beta1 * grad;
    exp_avg_sq[j] = exp_avg_sq[j] * s.beta2 + s.one_minus_beta2 * grad * grad;
    float second_moment = exp_avg_sq[j];
    if (max_exp_avg_sq != nullptr) {
      max_exp_avg_sq[j] = max_exp_avg_sq[j] < exp_avg_sq[j] ? exp_avg_sq[j] : max_exp_avg_sq[j];
      second_moment = max_exp_avg_sq[j];
    }
    const float denom = std::sqrt(second_moment) / s.bias_correction2_sqrt + s.eps;
    p[j] = p[j] + s.neg_step_size * exp_avg[j] / denom;
  }
}

}  // namespace dpscope::kernels
