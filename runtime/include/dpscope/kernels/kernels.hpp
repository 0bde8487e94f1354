// The kernel layer: every numeric op the runtime runs, one function each, dispatched by the kind of
// the device its tensors live on. nn/, optim/, parallel/ and comm/ call these and hold no math of
// their own. cpu and sim devices hold host memory and run the CPU kernels (OpenBLAS for matrix
// products, kernels/elementwise.hpp for the rest); a CUDA device will add its own implementations
// behind the same functions (a cuda tensor reaching a kernel without one is a kUnsupported error).
//
// Contract of every function:
//  * tensors hold data (timing-only tensors never reach a kernel: callers skip the call) and live
//    on one device; shapes are checked by the caller, which knows the user-facing op name;
//  * results are bit-identical to the loops these kernels replaced (same BLAS calls, same loop
//    order, same float/double mix): PyTorch parity tests depend on it;
//  * no timing and no tracing: the caller wraps the call in a KernelScope with the op's roofline
//    cost, so span names and costs stay where the op's meaning is known;
//  * no allocation, except where a function takes a caller-owned scratch buffer.
// Thread semantics: a kernel runs on the calling host thread (on CUDA: enqueued on the device's
// compute stream); distinct tensors may be processed from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dpscope/core/tensor.hpp"
#include "dpscope/kernels/elementwise.hpp"

namespace dpscope::kernels {

// ---- Linear: the three matrix products and the bias ----
// x: [rows, in] (any leading shape flattened), weight: [out, in], y / dy: [rows, out].

// y = x · weightᵀ (+ bias broadcast over rows when `bias` is defined).
void linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y);
// dweight = dyᵀ · x, or dweight += dyᵀ · x when `accumulate` (gradient accumulation).
void linear_grad_weight(const Tensor& dy, const Tensor& x, Tensor& dweight, bool accumulate);
// dx = dy · weight.
void linear_grad_input(const Tensor& dy, const Tensor& weight, Tensor& dx);
// dbias (+)= the sum of dy's rows. The rows are summed first and added once (PyTorch's
// grad += dy.sum(0)); when accumulating, the sum goes through `scratch` (kept by the caller so a
// step allocates nothing).
void bias_grad(const Tensor& dy, Tensor& dbias, bool accumulate, std::vector<float>& scratch);

// ---- activations ----
void relu_forward(const Tensor& x, Tensor& y);
// dx = dy where the forward output y > 0, else 0.
void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

// ---- losses (mean reduction) ----
// loss[0] = mean((x - t)^2), summed in double; NaN for an empty input, as PyTorch.
void mse_forward(const Tensor& x, const Tensor& target, Tensor& loss);
// dx = 2 * grad_output * (x - t) / n.
void mse_backward(const Tensor& x, const Tensor& target, float grad_output, Tensor& dx);
// logits [B, C], targets int64 [B] (in range: the caller checks): probs = softmax(logits) and
// loss[0] = mean(-log_softmax(logits)[target]) through a numerically stable log-sum-exp.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& probs, Tensor& loss);
// dx = grad_output * (probs - onehot(target)) / B.
void cross_entropy_backward(const Tensor& probs, const Tensor& targets, float grad_output, Tensor& dx);

// ---- copies and scaling ----
void fill(Tensor& dst, float value);
// The L2 norm of a float32 tensor, accumulated in double (the norm a `values` trace event carries).
double l2_norm(const Tensor& t);
// dst = src (same shape and dtype); src may equal dst.
void copy(const Tensor& src, Tensor& dst);
// dst = src * scale (DDP's copy of a gradient into its bucket); src may be dst itself.
void scale_copy(const Tensor& src, float scale, Tensor& dst);
// dst += src (DataParallel's reduce-add of replica gradients).
void accumulate(const Tensor& src, Tensor& dst);

// ---- fp16 (DDP's fp16 compression hook) ----
// data = fp16(data), element by element (the cast back after the all-reduce).
void fp16_round(Tensor& data);
// data = fp16(fp16(data) / divisor) (the cast and divide before the all-reduce).
void fp16_compress(Tensor& data, float divisor);

// ---- optimizers ----
// `momentum_buffer` is undefined unless step.use_momentum.
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdStep& step);
// `max_exp_avg_sq` is undefined unless amsgrad.
void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 Tensor& max_exp_avg_sq, const AdamStep& step);

// ---- reductions on raw buffers (the collectives' chunks) ----
// These take the memory's device kind, not a Device: a collective's buffers belong to several ranks.
// dst[i] = op(dst[i], src[i]) for `count` elements of `dtype`, both buffers in `kind`'s memory.
void reduce_into(DeviceKind kind, std::byte* dst, const std::byte* src, int64_t count, Reduction op,
                 DType dtype);
// data[i] /= divisor for `count` float32 elements (the last step of an average).
void divide(DeviceKind kind, std::byte* data, int64_t count, float divisor);

}  // namespace dpscope::kernels
