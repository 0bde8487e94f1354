// CUDA kernels of the element-wise ops (activations, fill and scale, fp16 rounding, the
// collectives' reduce and divide, the sum of squares behind l2_norm). Each thread runs the shared
// body of kernels/elementwise.hpp on one element at a time, in a grid-stride loop, so the
// arithmetic is the CPU's, operation for operation. Launched from gpu_ops.cpp (see launch.hpp).
#include "cuda_common.cuh"

namespace dpscope::kernels::gpu {

namespace {

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) relu_forward_range(x, y, i, i + 1);
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) relu_backward_range(y, dy, dx, i, i + 1);
}

__global__ void fill_kernel(float* dst, float value, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) fill_range(dst, value, i, i + 1);
}

__global__ void scale_copy_kernel(const float* src, float scale, float* dst, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) scale_copy_range(src, scale, dst, i, i + 1);
}

template <typename T>
__global__ void reduce_kernel(T* dst, const T* src, Reduction op, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) reduce_range(dst, src, op, i, i + 1);
}

__global__ void divide_kernel(float* data, float divisor, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) divide_range(data, divisor, i, i + 1);
}

__global__ void fp16_round_kernel(float* data, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) fp16_round_range(data, i, i + 1);
}

__global__ void fp16_compress_kernel(float* data, float divisor, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) fp16_compress_range(data, divisor, i, i + 1);
}

struct SquareTerm {
  const float* x;
  __device__ double operator()(int64_t i) const { return sum_of_squares_range(x, i, i + 1); }
};
struct StoreTotal {
  double* total;
  __device__ void operator()(double sum, double* /*spare*/) const { *total = sum; }
};

}  // namespace

cudaError_t launch_relu_forward(cudaStream_t stream, const float* x, float* y, int64_t n) {
  return launch_over(stream, n, relu_forward_kernel, x, y, n);
}

cudaError_t launch_relu_backward(cudaStream_t stream, const float* y, const float* dy, float* dx, int64_t n) {
  return launch_over(stream, n, relu_backward_kernel, y, dy, dx, n);
}

cudaError_t launch_fill(cudaStream_t stream, float* dst, float value, int64_t n) {
  return launch_over(stream, n, fill_kernel, dst, value, n);
}

cudaError_t launch_scale_copy(cudaStream_t stream, const float* src, float scale, float* dst, int64_t n) {
  return launch_over(stream, n, scale_copy_kernel, src, scale, dst, n);
}

cudaError_t launch_reduce(cudaStream_t stream, float* dst, const float* src, Reduction op, int64_t n) {
  return launch_over(stream, n, reduce_kernel<float>, dst, src, op, n);
}

cudaError_t launch_reduce(cudaStream_t stream, int64_t* dst, const int64_t* src, Reduction op, int64_t n) {
  return launch_over(stream, n, reduce_kernel<int64_t>, dst, src, op, n);
}

cudaError_t launch_divide(cudaStream_t stream, float* data, float divisor, int64_t n) {
  return launch_over(stream, n, divide_kernel, data, divisor, n);
}

cudaError_t launch_fp16_round(cudaStream_t stream, float* data, int64_t n) {
  return launch_over(stream, n, fp16_round_kernel, data, n);
}

cudaError_t launch_fp16_compress(cudaStream_t stream, float* data, float divisor, int64_t n) {
  return launch_over(stream, n, fp16_compress_kernel, data, divisor, n);
}

cudaError_t launch_sum_of_squares(cudaStream_t stream, const float* x, int64_t n, double* scratch,
                                  double* total) {
  return launch_sum_in_double(stream, SquareTerm{x}, n, StoreTotal{total}, scratch);
}

}  // namespace dpscope::kernels::gpu
