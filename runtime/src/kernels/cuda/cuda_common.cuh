// Device-side helpers shared by the kernel layer's .cu files: grid-stride indexing, the launch of a
// grid-stride kernel, and deterministic block reductions. Reductions here never use atomics: a sum over the
// same number of elements adds in the same order on every run (a training run is reproducible bit for bit).
#pragma once

#include <cstdint>

#include "launch.hpp"

namespace dpscope::kernels::gpu {

// The first element of this thread in a grid-stride loop, and the stride.
__device__ inline int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Launches `kernel` (a grid-stride kernel over `n` elements) on `stream`; nothing for n == 0.
// Returns the launch's status.
template <typename... KernelArgs, typename... Args>
cudaError_t launch_over(cudaStream_t stream, int64_t n, void (*kernel)(KernelArgs...), Args... args) {
  if (n == 0) return cudaSuccess;
  kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(args...);
  return cudaGetLastError();
}

// The sum of every thread's `value` in the block (blockDim.x == kThreadsPerBlock), returned to every
// thread; a fixed tree, so the order of additions is the same on every run. `shared` holds
// kThreadsPerBlock values; the block must call this together.
template <typename T>
__device__ inline T block_sum(T value, T* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = kThreadsPerBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = shared[threadIdx.x] + shared[threadIdx.x + half];
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();  // `shared` may be reused right after
  return total;
}

// The maximum of every thread's `value` in the block, returned to every thread.
__device__ inline float block_max(float value, float* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = kThreadsPerBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const float other = shared[threadIdx.x + half];
      shared[threadIdx.x] = shared[threadIdx.x] < other ? other : shared[threadIdx.x];
    }
    __syncthreads();
  }
  const float result = shared[0];
  __syncthreads();
  return result;
}

// Pass 1 of a two-pass sum in double: block b writes the sum of term(i) over its grid-stride
// elements to partial[b]. `Term` is a device functor: double operator()(int64_t i).
template <typename Term>
__global__ void partial_sums_kernel(Term term, int64_t n, double* partial) {
  __shared__ double shared[kThreadsPerBlock];
  double sum = 0.0;
  for (int64_t i = first_index(); i < n; i += grid_stride()) sum += term(i);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// Pass 2, one block: finish(sum of partial[0 .. count), spare) in thread 0. `Finish` is a device
// functor void operator()(double total, double* spare); `spare` is one double of device scratch
// for a result the host copies back.
template <typename Finish>
__global__ void finish_sum_kernel(const double* partial, int64_t count, Finish finish, double* spare) {
  __shared__ double shared[kThreadsPerBlock];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partial[i];
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) finish(sum, spare);
}

// Sums term(i) for i in [0, n) in double, deterministically (two passes; the number of blocks
// depends only on n), and calls finish(total, spare) on the device, `spare` being the last of the
// sum_scratch_doubles(n) doubles of `scratch`. Returns the launches' status.
template <typename Term, typename Finish>
cudaError_t launch_sum_in_double(cudaStream_t stream, Term term, int64_t n, Finish finish, double* scratch) {
  const unsigned blocks = blocks_for(n);
  partial_sums_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(term, n, scratch);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  finish_sum_kernel<<<1, kThreadsPerBlock, 0, stream>>>(scratch, static_cast<int64_t>(blocks), finish,
                                                        scratch + blocks);
  return cudaGetLastError();
}

}  // namespace dpscope::kernels::gpu
