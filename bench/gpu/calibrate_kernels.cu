// The kernels gpu_calibrate times (see calibrate_kernels.hpp).
#include "calibrate_kernels.hpp"

namespace dpscope::gpu_bench {
namespace {

__global__ void empty_kernel() {}

// Grid-stride loop: every thread moves 16 bytes per iteration, so the loads and stores coalesce.
__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = in[i];
  }
}

// A 32-bit integer hash (lowbias32) of the index and the seed, mapped onto [-1, 1).
__global__ void fill_kernel(float* out, size_t count, uint32_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    uint32_t x = static_cast<uint32_t>(i) ^ seed;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    out[i] = static_cast<float>(x) * (2.0f / 4294967296.0f) - 1.0f;
  }
}

}  // namespace

cudaError_t launch_empty_kernel(cudaStream_t stream) {
  empty_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_copy_kernel(const void* in, void* out, size_t bytes, int blocks, cudaStream_t stream) {
  copy_kernel<<<blocks, 256, 0, stream>>>(static_cast<const float4*>(in), static_cast<float4*>(out),
                                          bytes / sizeof(float4));
  return cudaGetLastError();
}

cudaError_t launch_fill_kernel(float* out, size_t count, uint32_t seed, int blocks, cudaStream_t stream) {
  fill_kernel<<<blocks, 256, 0, stream>>>(out, count, seed);
  return cudaGetLastError();
}

}  // namespace dpscope::gpu_bench
