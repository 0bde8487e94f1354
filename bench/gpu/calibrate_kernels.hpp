// The two kernels gpu_calibrate times (calibrate_kernels.cu): an empty kernel, whose back-to-back
// launches measure the per-kernel launch cost, and a grid-stride copy, whose traffic measures the
// memory bandwidth a kernel achieves. Plain CUDA, so the .cu file includes nothing of dpscope.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace dpscope::gpu_bench {

// Enqueues one empty kernel <<<1, 1>>> on `stream`; returns the launch's error.
cudaError_t launch_empty_kernel(cudaStream_t stream);

// Enqueues out[i] = in[i] over `bytes` (a multiple of 16) with 16-byte loads and stores,
// `blocks` x 256 threads; returns the launch's error.
cudaError_t launch_copy_kernel(const void* in, void* out, size_t bytes, int blocks, cudaStream_t stream);

}  // namespace dpscope::gpu_bench
