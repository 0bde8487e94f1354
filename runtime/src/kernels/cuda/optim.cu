// CUDA kernels of the optimizer updates, fused over tensors as PyTorch's fused=True / _foreach: one
// launch updates a batch of up to kMaxTensorsPerLaunch parameters (a whole MLP's in one) instead of
// one launch per parameter. The batch is the kernel's by-value argument (launch.hpp); every block
// walks the list with a grid-stride loop over each tensor, running the shared element-wise body
// (kernels/elementwise.hpp) element by element: results are bit-identical to a per-tensor launch and
// equal the CPU's up to FMA contraction. Launched from gpu_ops.cpp.
#include "cuda_common.cuh"

namespace dpscope::kernels::gpu {

namespace {

__global__ void sgd_multi_kernel(SgdBatch batch) {
  for (int t = 0; t < batch.count; ++t) {
    const SgdArgs& a = batch.tensors[t];
    for (int64_t i = first_index(); i < a.numel; i += grid_stride())
      sgd_update_range(a.param, a.grad, a.momentum_buffer, a.step, i, i + 1);
  }
}

__global__ void adam_multi_kernel(AdamBatch batch) {
  for (int t = 0; t < batch.count; ++t) {
    const AdamArgs& a = batch.tensors[t];
    for (int64_t i = first_index(); i < a.numel; i += grid_stride())
      adam_update_range(a.param, a.grad, a.exp_avg, a.exp_avg_sq, a.max_exp_avg_sq, a.step, i, i + 1);
  }
}

}  // namespace

cudaError_t launch_sgd_multi(cudaStream_t stream, const SgdBatch& batch, int64_t largest_numel) {
  if (batch.count == 0 || largest_numel == 0) return cudaSuccess;
  sgd_multi_kernel<<<blocks_for(largest_numel), kThreadsPerBlock, 0, stream>>>(batch);
  return cudaGetLastError();
}

cudaError_t launch_adam_multi(cudaStream_t stream, const AdamBatch& batch, int64_t largest_numel) {
  if (batch.count == 0 || largest_numel == 0) return cudaSuccess;
  adam_multi_kernel<<<blocks_for(largest_numel), kThreadsPerBlock, 0, stream>>>(batch);
  return cudaGetLastError();
}

}  // namespace dpscope::kernels::gpu
