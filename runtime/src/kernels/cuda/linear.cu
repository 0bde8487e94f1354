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

// The bias gradient in the CPU's order (kBiasGradRowBlock, cpu_linear.cpp): first every block of
// rows summed from zero in row order, one thread per (block, feature), into partial[block][o];
// then one thread per feature adds the block sums in block order onto db's own value
// (overwriting: the caller's zeroed gradient) or onto zero and then db (accumulating, PyTorch's
// grad += dy.sum(0)). A warp reads 32 consecutive features of a row: coalesced.
__global__ void bias_block_sums_kernel(const float* dy, float* partial, int64_t rows, int64_t n_out,
                                       int64_t blocks) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= n_out) return;
  for (int64_t b = blockIdx.y; b < blocks; b += gridDim.y) {
    const int64_t first = b * kBiasGradRowBlock;
    const int64_t end = first + kBiasGradRowBlock < rows ? first + kBiasGradRowBlock : rows;
    float sum = 0.0f;
    for (int64_t r = first; r < end; ++r) reduce_range(&sum, dy + r * n_out + o, Reduction::kSum, 0, 1);
    partial[b * n_out + o] = sum;
  }
}

__global__ void bias_add_blocks_kernel(const float* partial, float* db, int64_t n_out, int64_t blocks,
                                       bool accumulate) {
  for (int64_t o = first_index(); o < n_out; o += grid_stride()) {
    float total = accumulate ? 0.0f : db[o];
    for (int64_t b = 0; b < blocks; ++b) reduce_range(&total, partial + b * n_out + o, Reduction::kSum, 0, 1);
    if (accumulate) {
      reduce_range(db + o, &total, Reduction::kSum, 0, 1);
    } else {
      db[o] = total;
    }
  }
}

}  // namespace

cudaError_t launch_broadcast_rows(cudaStream_t stream, const float* b, float* y, int64_t rows,
                                  int64_t n_out) {
  return launch_over(stream, rows * n_out, broadcast_rows_kernel, b, y, rows, n_out);
}

int64_t bias_grad_blocks(int64_t rows) { return (rows + kBiasGradRowBlock - 1) / kBiasGradRowBlock; }

cudaError_t launch_bias_grad(cudaStream_t stream, const float* dy, float* partial, float* db, int64_t rows,
                             int64_t n_out, bool accumulate) {
  if (n_out == 0 || rows == 0) return cudaSuccess;
  constexpr int kThreads = 32;
  const int64_t blocks = bias_grad_blocks(rows);
  const dim3 grid(static_cast<unsigned>((n_out + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min<int64_t>(blocks, 65535)));
  bias_block_sums_kernel<<<grid, kThreads, 0, stream>>>(dy, partial, rows, n_out, blocks);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  return launch_over(stream, n_out, bias_add_blocks_kernel, static_cast<const float*>(partial), db, n_out,
                     blocks, accumulate);
}

}  // namespace dpscope::kernels::gpu
