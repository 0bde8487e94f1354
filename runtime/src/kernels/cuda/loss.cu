// CUDA kernels of the losses (mean reduction), launched from gpu_ops.cpp (see launch.hpp).
//  * MSE: the squared errors summed in double as the CPU does (the shared body per element), in a
//    deterministic two-pass reduction (cuda_common.cuh): only the order of additions differs.
//  * Cross-entropy: one block per row. The block finds the row's max, writes exp(x - max) (float,
//    as the CPU) and sums it in double, normalises the row into probs and writes the row's loss
//    max + log(sum) - x[target] in double to scratch; one more block sums the rows' losses.
//    Subtracting the max first means no exp of a large positive number (logits of ±1000 work).
//  * The backward passes run the shared bodies (one thread per element; one per row).
#include <cmath>

#include "cuda_common.cuh"

namespace dpscope::kernels::gpu {

namespace {

struct SquaredErrorTerm {
  const float* x;
  const float* t;
  __device__ double operator()(int64_t i) const { return squared_error_sum_range(x, t, i, i + 1); }
};

// loss = total / count in float; 0 / 0 is NaN for an empty input, as PyTorch.
struct StoreMean {
  float* loss;
  int64_t count;
  __device__ void operator()(double total, double* /*spare*/) const {
    *loss = static_cast<float>(total / static_cast<double>(count));
  }
};

__global__ void mse_backward_kernel(const float* x, const float* t, float scale, float* dx, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) mse_backward_range(x, t, scale, dx, i, i + 1);
}

// Block r: probs[r] = softmax(logits[r]) and row_loss[r] = logsumexp(logits[r]) - logits[r][target].
__global__ void softmax_rows_kernel(const float* logits, const int64_t* targets, float* probs,
                                    double* row_loss, int64_t classes) {
  __shared__ float shared_max[kThreadsPerBlock];
  __shared__ double shared_sum[kThreadsPerBlock];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * classes;
  float* prow = probs + r * classes;
  float max = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) max = max < row[c] ? row[c] : max;
  max = block_max(max, shared_max);
  double sum = 0.0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    prow[c] = expf(row[c] - max);
    sum += prow[c];
  }
  sum = block_sum(sum, shared_sum);
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) prow[c] *= inv_sum;
  if (threadIdx.x == 0)
    row_loss[r] = static_cast<double>(max) + log(sum) - static_cast<double>(row[targets[r]]);
}

// One thread per row: the shared row body.
__global__ void cross_entropy_backward_kernel(const float* p, const int64_t* t, float scale, float* dx,
                                              int64_t batch, int64_t classes) {
  for (int64_t r = first_index(); r < batch; r += grid_stride())
    cross_entropy_backward_row(p + r * classes, t[r], scale, dx + r * classes, classes);
}

}  // namespace

cudaError_t launch_mse_forward(cudaStream_t stream, const float* x, const float* t, int64_t n,
                               double* scratch, float* loss) {
  return launch_sum_in_double(stream, SquaredErrorTerm{x, t}, n, StoreMean{loss, n}, scratch);
}

cudaError_t launch_mse_backward(cudaStream_t stream, const float* x, const float* t, float scale, float* dx,
                                int64_t n) {
  return launch_over(stream, n, mse_backward_kernel, x, t, scale, dx, n);
}

cudaError_t launch_cross_entropy_forward(cudaStream_t stream, const float* logits, const int64_t* targets,
                                         float* probs, int64_t batch, int64_t classes, double* row_loss,
                                         float* loss) {
  if (batch > 0 && classes > 0) {
    softmax_rows_kernel<<<static_cast<unsigned>(batch), kThreadsPerBlock, 0, stream>>>(logits, targets, probs,
                                                                                       row_loss, classes);
    if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  }
  finish_sum_kernel<<<1, kThreadsPerBlock, 0, stream>>>(row_loss, batch, StoreMean{loss, batch}, row_loss);
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_backward(cudaStream_t stream, const float* probs, const int64_t* targets,
                                          float scale, float* dx, int64_t batch, int64_t classes) {
  return launch_over(stream, batch, cross_entropy_backward_kernel, probs, targets, scale, dx, batch, classes);
}

}  // namespace dpscope::kernels::gpu
