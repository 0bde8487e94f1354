// The kernels gpu_calibrate uses (calibrate_kernels.cu): an empty kernel, whose back-to-back
// launches measure the per-kernel launch cost; a grid-stride copy, whose traffic measures the
// memory bandwidth a kernel achieves; and a fill with pseudo-random values, so that the timed GEMM
// multiplies numbers, not zeros (a GPU draws less power, and runs faster, on zeros).
// Plain CUDA, so the .cu file includes nothing of dpscope.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dpscope::gpu_bench {

// Enqueues one empty kernel <<<1, 1>>> on `stream`; returns the launch's error.
cudaError_t launch_empty_kernel(cudaStream_t stream);

// Enqueues out[i] = in[i] over `bytes` (a multiple of 16) with 16-byte loads and stores,
// `blocks` x 256 threads; returns the launch's error.
cudaError_t launch_copy_kernel(const void* in, void* out, size_t bytes, int blocks, cudaStream_t stream);

// Enqueues out[i] = a value in [-1, 1) hashed from (i, seed), for i < count; returns the launch's error.
cudaError_t launch_fill_kernel(float* out, size_t count, uint32_t seed, int blocks, cudaStream_t stream);

}  // namespace dpscope::gpu_bench
