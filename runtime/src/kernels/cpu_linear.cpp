// The Linear ops of the kernel layer: the dispatch by device kind (dispatch.hpp) and the host kernels,
// the three matrix products on OpenBLAS (cblas_sgemm, row-major) and the bias. Cuda tensors go to
// src/kernels/cuda/linear.cu (cuBLAS).
#include <cblas.h>

#include <algorithm>

#include "cuda/gpu_ops.hpp"
#include "dispatch.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::kernels {

namespace {

// Rows of a [..., features] tensor.
int64_t rows_of(const Tensor& t, int64_t features) { return features == 0 ? 0 : t.numel() / features; }

}  // namespace

void linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y) {
  if (detail::runs_on_cuda(x.device(), "linear_forward")) {
    if constexpr (detail::kCudaBuilt) return gpu::linear_forward(x, weight, bias, y);
  }
  const int64_t n_out = weight.size(0);
  const int64_t n_in = weight.size(1);
  const int64_t rows = rows_of(x, n_in);
  if (rows == 0) return;
  // y = b (broadcast over rows), then y += x W^T.
  float* out = y.f32();
  const bool has_bias = bias.defined();
  if (has_bias) {
    const float* b = bias.f32();
    for (int64_t r = 0; r < rows; ++r) std::copy(b, b + n_out, out + r * n_out);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(n_out),
              static_cast<int>(n_in), 1.0f, x.f32(), static_cast<int>(n_in), weight.f32(),
              static_cast<int>(n_in), has_bias ? 1.0f : 0.0f, out, static_cast<int>(n_out));
}

void linear_grad_weight(const Tensor& dy, const Tensor& x, Tensor& dweight, bool accumulate) {
  if (detail::runs_on_cuda(dy.device(), "linear_grad_weight")) {
    if constexpr (detail::kCudaBuilt) return gpu::linear_grad_weight(dy, x, dweight, accumulate);
  }
  const int n_out = static_cast<int>(dweight.size(0));
  const int n_in = static_cast<int>(dweight.size(1));
  const int rows = static_cast<int>(rows_of(x, n_in));
  if (rows == 0) return;
  // dW (+)= dy^T x : [out, rows] x [rows, in].
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_out, n_in, rows, 1.0f, dy.f32(), n_out, x.f32(),
              n_in, accumulate ? 1.0f : 0.0f, dweight.f32(), n_in);
}

void linear_grad_input(const Tensor& dy, const Tensor& weight, Tensor& dx) {
  if (detail::runs_on_cuda(dy.device(), "linear_grad_input")) {
    if constexpr (detail::kCudaBuilt) return gpu::linear_grad_input(dy, weight, dx);
  }
  const int n_out = static_cast<int>(weight.size(0));
  const int n_in = static_cast<int>(weight.size(1));
  const int rows = static_cast<int>(rows_of(dx, n_in));
  if (rows == 0) return;
  // dx = dy W : [rows, out] x [out, in].
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n_in, n_out, 1.0f, dy.f32(), n_out,
              weight.f32(), n_in, 0.0f, dx.f32(), n_in);
}

void warm_up(const Device& device) {
  if (device.kind() != DeviceKind::kCuda) return;
  const Tensor x = Tensor::zeros({1, 1}, device);
  Tensor y = Tensor::zeros({1, 1}, device);
  linear_forward(x, x, Tensor(), y);
  device.synchronize();
}

void bias_grad(const Tensor& dy, Tensor& dbias, bool accumulate, std::vector<float>& scratch) {
  if (detail::runs_on_cuda(dy.device(), "bias_grad")) {
    if constexpr (detail::kCudaBuilt) return gpu::bias_grad(dy, dbias, accumulate);
  }
  const int64_t n_out = dbias.numel();
  const int64_t rows = rows_of(dy, n_out);
  if (rows == 0) return;
  // Sum the rows of dy first and add the sum once (PyTorch: grad += dy.sum(0)); overwriting adds
  // onto db's own value (the caller's zeroed gradient). Rows are summed in blocks of
  // kBiasGradRowBlock, block sums then added in order: the GPU's order (cuda/linear.cu).
  const float* g = dy.f32();
  float* db = dbias.f32();
  const auto n = static_cast<size_t>(n_out);
  scratch.assign(2 * n, 0.0f);
  float* total = scratch.data();      // the sum of the blocks so far
  float* block = scratch.data() + n;  // one block's rows
  if (!accumulate) std::copy(db, db + n_out, total);
  for (int64_t first = 0; first < rows; first += kBiasGradRowBlock) {
    std::fill(block, block + n_out, 0.0f);
    const int64_t end = std::min(rows, first + kBiasGradRowBlock);
    for (int64_t r = first; r < end; ++r) reduce_range(block, g + r * n_out, Reduction::kSum, 0, n_out);
    reduce_range(total, block, Reduction::kSum, 0, n_out);
  }
  if (accumulate) {
    reduce_range(db, total, Reduction::kSum, 0, n_out);
  } else {
    std::copy(total, total + n_out, db);
  }
}

}  // namespace dpscope::kernels
