// CUDA kernels of Linear's bias: the broadcast over rows before the forward product, and the row
// sums of the bias gradient. The matrix products themselves are cuBLAS calls (gpu_linear.cpp).
#include <algorithm>

#include "cuda_common.cuh"

namespace dpscope::kernels::gpu {

namespace {

// y[r][o] = b[o]: the bias broadcast over rows, before the product adds x·Wᵀ (beta = 1), as the CPU.
__global__ void broadcast_rows_kernel(const float* b, float* y, int64_t rows, int64_t n_out) {
  const int64_t n = rows * n_out;
  for (int64_t i = first_index(); i < n; i += grid_stride()) fill_range(y, b[i % n_out], i, i + 1);
}

// One thread per output feature sums dy's rows in row order with the shared reduce body, exactly
// as the CPU does row by row: overwriting adds onto db's own value (the caller's zeroed gradient);
// accumulating sums the rows first and adds the sum once (PyTorch's grad += dy.sum(0)).
//
// The additions must stay in row order (bit-identical to the CPU), so a feature's sum cannot be
// split across threads; what makes it fast is having many loads in flight: each thread loads
// kBiasRowsAhead rows into registers before adding them in order (loads of a warp are coalesced,
// 32 consecutive features), and small blocks spread the features over more SMs.
constexpr int kBiasRowsAhead = 32;
constexpr int kBiasThreadsPerBlock = 32;

__global__ void bias_grad_kernel(const float* dy, float* db, int64_t rows, int64_t n_out, bool accumulate) {
  for (int64_t o = first_index(); o < n_out; o += grid_stride()) {
    float sum = accumulate ? 0.0f : db[o];
    int64_t r = 0;
    for (; r + kBiasRowsAhead <= rows; r += kBiasRowsAhead) {
      float ahead[kBiasRowsAhead];
#pragma unroll
      for (int k = 0; k < kBiasRowsAhead; ++k) ahead[k] = dy[(r + k) * n_out + o];
#pragma unroll
      for (int k = 0; k < kBiasRowsAhead; ++k) reduce_range(&sum, &ahead[k], Reduction::kSum, 0, 1);
    }
    for (; r < rows; ++r) reduce_range(&sum, dy + r * n_out + o, Reduction::kSum, 0, 1);
    if (accumulate) {
      reduce_range(db + o, &sum, Reduction::kSum, 0, 1);
    } else {
      db[o] = sum;
    }
  }
}

}  // namespace

cudaError_t launch_broadcast_rows(cudaStream_t stream, const float* b, float* y, int64_t rows,
                                  int64_t n_out) {
  return launch_over(stream, rows * n_out, broadcast_rows_kernel, b, y, rows, n_out);
}

cudaError_t launch_bias_grad(cudaStream_t stream, const float* dy, float* db, int64_t rows, int64_t n_out,
                             bool accumulate) {
  if (n_out == 0) return cudaSuccess;
  const int64_t blocks = (n_out + kBiasThreadsPerBlock - 1) / kBiasThreadsPerBlock;
  bias_grad_kernel<<<static_cast<unsigned>(std::min<int64_t>(blocks, 65535)), kBiasThreadsPerBlock, 0, stream>>>(
      dy, db, rows, n_out, accumulate);
  return cudaGetLastError();
}

}  // namespace dpscope::kernels::gpu
