// The kernel layer: every numeric op the runtime runs, one function each, dispatched by the kind of
// the device its tensors live on. nn/, optim/, parallel/ and comm/ call these and hold no math of
// their own. cpu and sim devices hold host memory and run the CPU kernels (OpenBLAS for matrix
// products, kernels/elementwise.hpp for the rest); cuda devices run the CUDA implementations
// (src/kernels/cuda/: cuBLAS with TF32 off for matrix products, own kernels calling the same
// element-wise bodies for the rest). In a build without CUDA a cuda tensor reaching a kernel is a
// kUnsupported error saying so (and without a GPU no cuda tensor can be made at all).
//
// Contract of every function:
//  * tensors hold data (timing-only tensors never reach a kernel: callers skip the call) and live
//    on one device; shapes are checked by the caller, which knows the user-facing op name;
//  * results are bit-identical to the loops these kernels replaced (same BLAS calls, same loop
//    order, same float/double mix): PyTorch parity tests depend on it;
//  * no timing and no tracing: the caller wraps the call in a KernelScope with the op's roofline
//    cost, so span names and costs stay where the op's meaning is known;
//  * no allocation, except where a function takes a caller-owned scratch buffer (on CUDA the
//    reductions use a small per-thread, per-stream device scratch kept between calls, and cuBLAS
//    its handle's workspace: see src/kernels/cuda/cuda_context.hpp).
// Thread semantics: a kernel runs on the calling host thread; distinct tensors may be processed from
// several threads at once. On CUDA a kernel is enqueued, asynchronously, on the device's current
// stream for the calling thread (cuda::current_stream(): compute unless a cuda::StreamGuard says
// otherwise) after cuda::make_current(); only l2_norm waits for its result. Any CUDA or cuBLAS
// failure is a kDevice error "<op> on cuda:N: <reason>".
// CUDA against the CPU (cuda_matches_cpu_test.cpp): matrix products within 1e-5 relative to the sum
// of |terms| (cuBLAS sums in another order; TF32 is off), losses within 1e-6 (two-pass reductions
// in double, the GPU's expf), element-wise ops, bias row sums and optimizer steps bit-identical
// (the shared bodies, compiled without FMA contraction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dpscope/core/tensor.hpp"
#include "dpscope/kernels/elementwise.hpp"

namespace dpscope::kernels {

// ---- Linear: the three matrix products and the bias ----
// x: [rows, in] (any leading shape flattened), weight: [out, in], y / dy: [rows, out].

// y = x · weightᵀ (+ bias broadcast over rows when `bias` is defined).
void linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& y);
// Runs one tiny matrix product on `device` and waits for it, so that what a first product loads
// (cuBLAS's handle and kernels: a tenth of a second on a GPU) is not measured inside the first
// traced step. Nothing on devices that load nothing (cpu, sim).
void warm_up(const Device& device);
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
// Up to `count` elements of a float32 tensor — elements 0, stride, 2 * stride, ... — and its L2
// norm, taken in stream order now and read later (a `values` trace event's numbers). On a GPU,
// snapshot_values queues a strided copy and the norm's reduction into a small device buffer and
// returns at once; read() waits for them only. So tracing a gradient's values does not stall a
// step that the host is running ahead of. On cpu and sim devices the numbers are taken at once.
struct ValuesSnapshot {
  std::vector<float> values;  // the first values (filled by read() on a GPU)
  double norm = 0.0;
  Tensor pending;  // GPU: [count + 2] floats, the values then the sum of squares as a double
  // Fills values and norm from `pending` (a device-to-host copy) and releases it.
  void read();
};
ValuesSnapshot snapshot_values(const Tensor& t, size_t count, int64_t stride = 1);
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

// ---- multi-tensor optimizer updates (PyTorch's fused=True / _foreach) ----
// One optimizer step over many parameters of one device. On CUDA the whole list is one kernel
// launch (a launch per 32 tensors: the descriptors travel as kernel arguments); on the host it is
// the per-tensor function above called tensor by tensor, so results are bit-identical to it.
// Every pointer is non-null except where the per-tensor function takes an undefined tensor (the
// momentum buffer without momentum, max_exp_avg_sq without amsgrad); each tensor has its own step
// (a new momentum buffer, Adam's per-parameter step count). Throws kInvalidArgument when the
// tensors are not all on one device.
struct SgdTensors {
  Tensor* param;
  const Tensor* grad;
  Tensor* momentum_buffer;
  SgdStep step;
};
void sgd_update_multi(std::span<const SgdTensors> tensors);

struct AdamTensors {
  Tensor* param;
  const Tensor* grad;
  Tensor* exp_avg;
  Tensor* exp_avg_sq;
  Tensor* max_exp_avg_sq;
  AdamStep step;
};
void adam_update_multi(std::span<const AdamTensors> tensors);

// ---- reductions on raw buffers (the collectives' chunks) ----
// dst[i] = op(dst[i], src[i]) for `count` elements of `dtype`, run by `device`: on a cuda device
// both buffers are device memory that device can address (its own, or a peer's on the same
// physical GPU) and the kernel goes on the device's current stream (a collective sets kComm with a
// cuda::StreamGuard); on a host device both are host memory.
void reduce_into(const Device& device, std::byte* dst, const std::byte* src, int64_t count, Reduction op,
                 DType dtype);
// data[i] /= divisor for `count` float32 elements (the last step of an average).
void divide(const Device& device, std::byte* data, int64_t count, float divisor);
// The same on host memory, named by kind (a collective's host buffers belong to several ranks).
// A cuda kind is refused (kInvalidArgument): which stream to run on needs the Device above.
void reduce_into(DeviceKind kind, std::byte* dst, const std::byte* src, int64_t count, Reduction op,
                 DType dtype);
void divide(DeviceKind kind, std::byte* data, int64_t count, float divisor);

}  // namespace dpscope::kernels
