// The loss ops of the kernel layer: the dispatch by device kind (dispatch.hpp) and the host kernels
// of MSE and cross-entropy (softmax through a stable log-sum-exp). Cuda tensors go to
// src/kernels/cuda/loss.cu.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda/gpu_ops.hpp"
#include "dispatch.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::kernels {

void mse_forward(const Tensor& x, const Tensor& target, Tensor& loss) {
  if (detail::runs_on_cuda(x.device(), "mse_forward")) {
    if constexpr (detail::kCudaBuilt) return gpu::mse_forward(x, target, loss);
  }
  const int64_t n = x.numel();
  const double sum = squared_error_sum_range(x.f32(), target.f32(), 0, n);
  loss.f32()[0] = static_cast<float>(sum / static_cast<double>(n));  // NaN for an empty input, as PyTorch
}

void mse_backward(const Tensor& x, const Tensor& target, float grad_output, Tensor& dx) {
  if (detail::runs_on_cuda(x.device(), "mse_backward")) {
    if constexpr (detail::kCudaBuilt) return gpu::mse_backward(x, target, grad_output, dx);
  }
  const int64_t n = x.numel();
  const float scale = static_cast<float>(2.0 * static_cast<double>(grad_output) / static_cast<double>(n));
  mse_backward_range(x.f32(), target.f32(), scale, dx.f32(), 0, n);
}

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& probs, Tensor& loss) {
  if (detail::runs_on_cuda(logits.device(), "cross_entropy_forward")) {
    if constexpr (detail::kCudaBuilt) return gpu::cross_entropy_forward(logits, targets, probs, loss);
  }
  const int64_t batch = logits.size(0);
  const int64_t classes = logits.size(1);
  const float* x = logits.f32();
  const int64_t* t = targets.i64();
  float* p = probs.f32();
  double total = 0.0;
  for (int64_t r = 0; r < batch; ++r) {
    const float* row = x + r * classes;
    float* prow = p + r * classes;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < classes; ++c) max = std::max(max, row[c]);
    // log-softmax = x - (max + log(sum(exp(x - max)))): no exp of a large positive number.
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) {
      prow[c] = std::exp(row[c] - max);
      sum += prow[c];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < classes; ++c) prow[c] *= inv_sum;
    const double log_sum_exp = static_cast<double>(max) + std::log(sum);
    total += log_sum_exp - static_cast<double>(row[t[r]]);
  }
  loss.f32()[0] = static_cast<float>(total / static_cast<double>(batch));  // NaN for an empty batch
}

void cross_entropy_backward(const Tensor& probs, const Tensor& targets, float grad_output, Tensor& dx) {
  if (detail::runs_on_cuda(probs.device(), "cross_entropy_backward")) {
    if constexpr (detail::kCudaBuilt) return gpu::cross_entropy_backward(probs, targets, grad_output, dx);
  }
  const int64_t batch = probs.size(0);
  const int64_t classes = probs.size(1);
  if (batch == 0) return;
  const float scale = static_cast<float>(static_cast<double>(grad_output) / static_cast<double>(batch));
  const float* p = probs.f32();
  const int64_t* t = targets.i64();
  float* out = dx.f32();
  for (int64_t r = 0; r < batch; ++r)
    cross_entropy_backward_row(p + r * classes, t[r], scale, out + r * classes, classes);
}

}  // namespace dpscope::kernels
