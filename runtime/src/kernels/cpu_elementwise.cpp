// CPU kernels of the element-wise ops: each runs its shared body (kernels/elementwise.hpp) over the
// whole range on the calling thread.
#include <cmath>

#include <cstring>

#include "dispatch.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::kernels {

void relu_forward(const Tensor& x, Tensor& y) {
  detail::backend_for(x.device(), "relu_forward");
  relu_forward_range(x.f32(), y.f32(), 0, x.numel());
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  detail::backend_for(y.device(), "relu_backward");
  relu_backward_range(y.f32(), dy.f32(), dx.f32(), 0, y.numel());
}

void fill(Tensor& dst, float value) {
  detail::backend_for(dst.device(), "fill");
  fill_range(dst.f32(), value, 0, dst.numel());
}

double l2_norm(const Tensor& t) {
  detail::backend_for(t.device(), "l2_norm");
  return std::sqrt(sum_of_squares_range(t.f32(), 0, t.numel()));
}

void copy(const Tensor& src, Tensor& dst) {
  detail::backend_for(dst.device(), "copy");
  dst.copy_from(src);
}

void scale_copy(const Tensor& src, float scale, Tensor& dst) {
  detail::backend_for(dst.device(), "scale_copy");
  scale_copy_range(src.f32(), scale, dst.f32(), 0, dst.numel());
}

void accumulate(const Tensor& src, Tensor& dst) {
  detail::backend_for(dst.device(), "accumulate");
  reduce_range(dst.f32(), src.f32(), Reduction::kSum, 0, dst.numel());
}

void fp16_round(Tensor& data) {
  detail::backend_for(data.device(), "fp16_round");
  fp16_round_range(data.f32(), 0, data.numel());
}

void fp16_compress(Tensor& data, float divisor) {
  detail::backend_for(data.device(), "fp16_compress");
  fp16_compress_range(data.f32(), divisor, 0, data.numel());
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdStep& step) {
  detail::backend_for(param.device(), "sgd_update");
  float* buf = step.use_momentum ? momentum_buffer.f32() : nullptr;
  sgd_update_range(param.f32(), grad.f32(), buf, step, 0, param.numel());
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 Tensor& max_exp_avg_sq, const AdamStep& step) {
  detail::backend_for(param.device(), "adam_update");
  float* max_sq = max_exp_avg_sq.defined() ? max_exp_avg_sq.f32() : nullptr;
  adam_update_range(param.f32(), grad.f32(), exp_avg.f32(), exp_avg_sq.f32(), max_sq, step, 0, param.numel());
}

void reduce_into(DeviceKind kind, std::byte* dst, const std::byte* src, int64_t count, Reduction op,
                 DType dtype) {
  detail::backend_for(kind, "reduce_into");
  if (dtype == DType::kF32) {
    reduce_range(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src), op, 0, count);
  } else {
    reduce_range(reinterpret_cast<int64_t*>(dst), reinterpret_cast<const int64_t*>(src), op, 0, count);
  }
}

void divide(DeviceKind kind, std::byte* data, int64_t count, float divisor) {
  detail::backend_for(kind, "divide");
  divide_range(reinterpret_cast<float*>(data), divisor, 0, count);
}

}  // namespace dpscope::kernels
