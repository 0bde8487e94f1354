// Linear on CUDA: the three matrix products on cuBLAS (cublasSgemm, full FP32 with TF32 off, see
// cuda_context.cpp) and the bias kernels of linear.cu. Called through the dispatch in
// src/kernels/cpu_linear.cpp.
//
// Row-major onto column-major. Our tensors are row-major; cuBLAS is column-major. A row-major
// [r, c] matrix M with leading dimension c is, read column-major, the [c, r] matrix Mᵀ with the
// same leading dimension. So every product C = A·B we want row-major is computed column-major as
// Cᵀ = Bᵀ·Aᵀ, operands swapped, each buffer passed as it is:
//   forward      y  = x·Wᵀ  [rows,out]:  yᵀ [out,rows] = W·xᵀ:   gemm(T, N, m=out, n=rows, k=in,
//                A = W's buffer (col-major [in,out], lda=in), B = x's ([in,rows], ldb=in), ldc=out)
//   grad weight  dW = dyᵀ·x [out,in]:    dWᵀ [in,out] = xᵀ·dy:   gemm(N, T, m=in, n=out, k=rows,
//                A = x's buffer ([in,rows], lda=in), B = dy's ([out,rows], ldb=out), ldc=in)
//   grad input   dx = dy·W  [rows,in]:   dxᵀ [in,rows] = Wᵀ·dyᵀ: gemm(N, N, m=in, n=rows, k=out,
//                A = W's buffer ([in,out], lda=in), B = dy's ([out,rows], ldb=out), ldc=in)
#include <algorithm>

#include "cublas_library.hpp"
#include "cuda_context.hpp"
#include "gpu_ops.hpp"
#include "launch.hpp"

namespace dpscope::kernels::gpu {

namespace {

// Rows of a [..., features] tensor.
int64_t rows_of(const Tensor& t, int64_t features) { return features == 0 ? 0 : t.numel() / features; }

void sgemm(const Launch& launch, cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n,
           int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
           int64_t ldc) {
  const float alpha = 1.0f;
  const auto dim = [&](int64_t value) { return checked_int(value, "matrix dimension", launch); };
  // Leading dimensions must be >= 1 even where a dimension is 0 (an empty input: C = beta·C).
  check_cublas(cublas_library().sgemm(cublas_for(launch), op_a, op_b, dim(m), dim(n), dim(k), &alpha, a,
                                      dim(std::max<int64_t>(lda, 1)), b, dim(std::max<int64_t>(ldb, 1)),
                                      &beta, c, dim(std::max<int64_t>(ldc, 1))),
               "cublasSgemm", launch.device);
}

}  // namespace

void linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y) {
  const int64_t n_out = weight.size(0);
  const int64_t n_in = weight.size(1);
  const int64_t rows = rows_of(x, n_in);
  if (rows == 0 || n_out == 0) return;
  const Launch launch = begin(x.device(), "linear_forward");
  const bool has_bias = bias.defined();
  if (has_bias) check(launch, launch_broadcast_rows(launch.stream, bias.f32(), y.f32(), rows, n_out));
  sgemm(launch, CUBLAS_OP_T, CUBLAS_OP_N, n_out, rows, n_in, weight.f32(), n_in, x.f32(), n_in,
        has_bias ? 1.0f : 0.0f, y.f32(), n_out);
}

void linear_grad_weight(const Tensor& dy, const Tensor& x, Tensor& dweight, bool accumulate) {
  const int64_t n_out = dweight.size(0);
  const int64_t n_in = dweight.size(1);
  const int64_t rows = rows_of(x, n_in);
  if (rows == 0 || n_out == 0 || n_in == 0) return;
  const Launch launch = begin(dy.device(), "linear_grad_weight");
  sgemm(launch, CUBLAS_OP_N, CUBLAS_OP_T, n_in, n_out, rows, x.f32(), n_in, dy.f32(), n_out,
        accumulate ? 1.0f : 0.0f, dweight.f32(), n_in);
}

void linear_grad_input(const Tensor& dy, const Tensor& weight, Tensor& dx) {
  const int64_t n_out = weight.size(0);
  const int64_t n_in = weight.size(1);
  const int64_t rows = rows_of(dx, n_in);
  if (rows == 0 || n_in == 0) return;
  const Launch launch = begin(dy.device(), "linear_grad_input");
  sgemm(launch, CUBLAS_OP_N, CUBLAS_OP_N, n_in, rows, n_out, weight.f32(), n_in, dy.f32(), n_out, 0.0f,
        dx.f32(), n_in);
}

void bias_grad(const Tensor& dy, Tensor& dbias, bool accumulate) {
  const int64_t n_out = dbias.numel();
  const int64_t rows = rows_of(dy, n_out);
  if (rows == 0) return;
  const Launch launch = begin(dy.device(), "bias_grad");
  auto* partial = static_cast<float*>(
      scratch_for(launch, static_cast<size_t>(bias_grad_blocks(rows) * n_out) * sizeof(float)));
  check(launch, launch_bias_grad(launch.stream, dy.f32(), partial, dbias.f32(), rows, n_out, accumulate));
}

}  // namespace dpscope::kernels::gpu
