// The raw CUDA launchers of the kernel layer: one function per __global__ kernel, on plain device
// pointers and a stream, defined in src/kernels/cuda/*.cu. Each enqueues its kernel and returns the
// launch's status (cudaGetLastError), which the Tensor-level code in gpu_ops.cpp / gpu_linear.cpp
// turns into a dpscope::Error. This header includes no Tensor and no fmt on purpose: nvcc's front end
// cannot compile fmt's compile-time format checks, so .cu files see only this and the shared
// element-wise bodies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "dpscope/kernels/elementwise.hpp"

namespace dpscope::kernels::gpu {

// ---- launch shapes ----
inline constexpr int kThreadsPerBlock = 256;
// Blocks for a grid-stride loop over `n` elements: enough to fill any GPU, at least 1.
inline unsigned blocks_for(int64_t n) {
  constexpr int64_t kMaxBlocks = 4096;
  const int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}
// Scratch doubles launch_sum_in_double needs for `n` terms.
inline int64_t sum_scratch_doubles(int64_t n) { return static_cast<int64_t>(blocks_for(n)) + 1; }

// ---- elementwise.cu (each a no-op returning cudaSuccess for n == 0) ----
cudaError_t launch_relu_forward(cudaStream_t stream, const float* x, float* y, int64_t n);
cudaError_t launch_relu_backward(cudaStream_t stream, const float* y, const float* dy, float* dx, int64_t n);
cudaError_t launch_fill(cudaStream_t stream, float* dst, float value, int64_t n);
cudaError_t launch_scale_copy(cudaStream_t stream, const float* src, float scale, float* dst, int64_t n);
cudaError_t launch_reduce(cudaStream_t stream, float* dst, const float* src, Reduction op, int64_t n);
cudaError_t launch_reduce(cudaStream_t stream, int64_t* dst, const int64_t* src, Reduction op, int64_t n);
cudaError_t launch_divide(cudaStream_t stream, float* data, float divisor, int64_t n);
cudaError_t launch_fp16_round(cudaStream_t stream, float* data, int64_t n);
cudaError_t launch_fp16_compress(cudaStream_t stream, float* data, float divisor, int64_t n);
// *total = the sum of squares of x[0, n) in double, deterministic (two passes). `scratch` holds
// sum_scratch_doubles(n) doubles; `total` may point into its last one.
cudaError_t launch_sum_of_squares(cudaStream_t stream, const float* x, int64_t n, double* scratch,
                                  double* total);

// ---- linear.cu ----
// y[r][o] = b[o] for rows x n_out (the bias before the product adds x·Wᵀ).
cudaError_t launch_broadcast_rows(cudaStream_t stream, const float* b, float* y, int64_t rows, int64_t n_out);
// db (+)= the sum of dy's rows, in the CPU's blocked order (see kernels::bias_grad); `partial`
// holds bias_grad_blocks(rows) x n_out floats of scratch.
int64_t bias_grad_blocks(int64_t rows);
cudaError_t launch_bias_grad(cudaStream_t stream, const float* dy, float* partial, float* db, int64_t rows,
                             int64_t n_out, bool accumulate);

// ---- loss.cu ----
// *loss = mean((x - t)^2) over n elements (NaN for n == 0); scratch as launch_sum_of_squares.
cudaError_t launch_mse_forward(cudaStream_t stream, const float* x, const float* t, int64_t n,
                               double* scratch, float* loss);
cudaError_t launch_mse_backward(cudaStream_t stream, const float* x, const float* t, float scale, float* dx,
                                int64_t n);
// probs = softmax(logits) by row and *loss = mean cross-entropy (NaN for batch == 0); `row_loss`
// holds max(batch, 1) doubles of scratch; batch < 2^31 (one block per row).
cudaError_t launch_cross_entropy_forward(cudaStream_t stream, const float* logits, const int64_t* targets,
                                         float* probs, int64_t batch, int64_t classes, double* row_loss,
                                         float* loss);
cudaError_t launch_cross_entropy_backward(cudaStream_t stream, const float* probs, const int64_t* targets,
                                          float scale, float* dx, int64_t batch, int64_t classes);

// ---- optim.cu: multi-tensor updates, one launch per batch ----
// A batch of tensors travels as the kernel's by-value argument (no host-to-device copy and no
// device allocation); 4 KiB of kernel parameters is the portable limit, hence 32 tensors a batch.
inline constexpr int kMaxTensorsPerLaunch = 32;

struct SgdArgs {
  float* param;
  const float* grad;
  float* momentum_buffer;  // nullptr without momentum
  int64_t numel;
  SgdStep step;
};
struct SgdBatch {
  SgdArgs tensors[kMaxTensorsPerLaunch];
  int count;
};

struct AdamArgs {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  float* max_exp_avg_sq;  // nullptr without amsgrad
  int64_t numel;
  AdamStep step;
};
struct AdamBatch {
  AdamArgs tensors[kMaxTensorsPerLaunch];
  int count;
};

static_assert(sizeof(SgdBatch) <= 4096, "SgdBatch must fit in the kernel parameter space");
static_assert(sizeof(AdamBatch) <= 4096, "AdamBatch must fit in the kernel parameter space");

// `largest_numel`: the largest tensor of the batch, which sizes the grid.
cudaError_t launch_sgd_multi(cudaStream_t stream, const SgdBatch& batch, int64_t largest_numel);
cudaError_t launch_adam_multi(cudaStream_t stream, const AdamBatch& batch, int64_t largest_numel);

}  // namespace dpscope::kernels::gpu
