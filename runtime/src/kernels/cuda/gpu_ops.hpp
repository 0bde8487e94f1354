// The CUDA implementations of the kernel layer's ops, one per public function of
// kernels/kernels.hpp with the same arguments (src/kernels/cuda/*.cu define them; the dispatch
// points in src/kernels/*.cpp call them for cuda tensors, see dispatch.hpp). Each makes the
// tensors' device current, enqueues its work on the device's current stream and checks every CUDA
// and cuBLAS status into a kDevice error "<op> on cuda:N: <reason>". No CUDA header here: the host
// files that dispatch include this one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dpscope/kernels/kernels.hpp"

namespace dpscope::kernels::gpu {

// linear.cu
void linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y);
void linear_grad_weight(const Tensor& dy, const Tensor& x, Tensor& dweight, bool accumulate);
void linear_grad_input(const Tensor& dy, const Tensor& weight, Tensor& dx);
void bias_grad(const Tensor& dy, Tensor& dbias, bool accumulate);

// elementwise.cu
void relu_forward(const Tensor& x, Tensor& y);
void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx);
void fill(Tensor& dst, float value);
double l2_norm(const Tensor& t);
ValuesSnapshot snapshot_values(const Tensor& t, size_t count, int64_t stride);
void copy(const Tensor& src, Tensor& dst);
void scale_copy(const Tensor& src, float scale, Tensor& dst);
void accumulate(const Tensor& src, Tensor& dst);
void fp16_round(Tensor& data);
void fp16_compress(Tensor& data, float divisor);
void reduce_into(const Device& device, std::byte* dst, const std::byte* src, int64_t count, Reduction op,
                 DType dtype);
void divide(const Device& device, std::byte* data, int64_t count, float divisor);

// loss.cu
void mse_forward(const Tensor& x, const Tensor& target, Tensor& loss);
void mse_backward(const Tensor& x, const Tensor& target, float grad_output, Tensor& dx);
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& probs, Tensor& loss);
void cross_entropy_backward(const Tensor& probs, const Tensor& targets, float grad_output, Tensor& dx);

// optim.cu: one launch per up to 32 tensors (all on one device, checked by the caller).
void sgd_update_multi(std::span<const SgdTensors> tensors);
void adam_update_multi(std::span<const AdamTensors> tensors);

}  // namespace dpscope::kernels::gpu
