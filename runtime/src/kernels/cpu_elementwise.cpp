// The element-wise ops of the kernel layer: the dispatch by device kind (dispatch.hpp) and the host
// kernels, each running its shared body (kernels/elementwise.hpp) over the whole range on the
// calling thread. Cuda tensors go to src/kernels/cuda/elementwise.cu and optim.cu.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda/gpu_ops.hpp"
#include "dispatch.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::kernels {

namespace {

// Throws kInvalidArgument unless every tensor of a multi-tensor update is on the first one's device.
template <typename Entry>
void check_one_device(std::span<const Entry> tensors, const char* op) {
  for (const Entry& t : tensors) {
    DPS_CHECK(t.param->device() == tensors.front().param->device(), ErrorKind::kInvalidArgument,
              "{}: parameters on {} and {}: one call updates the tensors of one device", op,
              tensors.front().param->device().name(), t.param->device().name());
  }
}

}  // namespace

void relu_forward(const Tensor& x, Tensor& y) {
  if (detail::runs_on_cuda(x.device(), "relu_forward")) {
    if constexpr (detail::kCudaBuilt) return gpu::relu_forward(x, y);
  }
  relu_forward_range(x.f32(), y.f32(), 0, x.numel());
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  if (detail::runs_on_cuda(y.device(), "relu_backward")) {
    if constexpr (detail::kCudaBuilt) return gpu::relu_backward(y, dy, dx);
  }
  relu_backward_range(y.f32(), dy.f32(), dx.f32(), 0, y.numel());
}

void fill(Tensor& dst, float value) {
  if (detail::runs_on_cuda(dst.device(), "fill")) {
    if constexpr (detail::kCudaBuilt) return gpu::fill(dst, value);
  }
  fill_range(dst.f32(), value, 0, dst.numel());
}

double l2_norm(const Tensor& t) {
  if (detail::runs_on_cuda(t.device(), "l2_norm")) {
    if constexpr (detail::kCudaBuilt) return gpu::l2_norm(t);
  }
  return std::sqrt(sum_of_squares_range(t.f32(), 0, t.numel()));
}

ValuesSnapshot snapshot_values(const Tensor& t, size_t count, int64_t stride) {
  DPS_CHECK(stride >= 1, ErrorKind::kInvalidArgument, "snapshot_values: stride {} < 1", stride);
  const size_t numel = static_cast<size_t>(t.numel());
  const size_t n = std::min(count, (numel + static_cast<size_t>(stride) - 1) / static_cast<size_t>(stride));
  if (detail::runs_on_cuda(t.device(), "snapshot_values")) {
    if constexpr (detail::kCudaBuilt) return gpu::snapshot_values(t, n, stride);
  }
  ValuesSnapshot snapshot;
  snapshot.values.resize(n);
  for (size_t i = 0; i < n; ++i) snapshot.values[i] = t.f32()[i * static_cast<size_t>(stride)];
  snapshot.norm = l2_norm(t);
  return snapshot;
}

void ValuesSnapshot::read() {
  if (!pending.defined()) return;
  const std::vector<float> raw = pending.to_vector();
  pending = Tensor();
  // [the values | padding to 8 bytes | the sum of squares as a double] (gpu::snapshot_values).
  values.assign(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(values.size()));
  double sum_of_squares = 0.0;
  std::memcpy(&sum_of_squares, raw.data() + raw.size() - 2, sizeof(double));
  norm = std::sqrt(sum_of_squares);
}

void copy(const Tensor& src, Tensor& dst) {
  check_same_device(dst, src);
  DPS_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(), ErrorKind::kInvalidArgument,
            "copy: {} {} into {} {}", to_string(src.dtype()), shape_to_string(src.shape()),
            to_string(dst.dtype()), shape_to_string(dst.shape()));
  if (detail::runs_on_cuda(dst.device(), "copy")) {
    if constexpr (detail::kCudaBuilt) return gpu::copy(src, dst);
  }
  dst.copy_from(src);
}

void scale_copy(const Tensor& src, float scale, Tensor& dst) {
  if (detail::runs_on_cuda(dst.device(), "scale_copy")) {
    if constexpr (detail::kCudaBuilt) return gpu::scale_copy(src, scale, dst);
  }
  scale_copy_range(src.f32(), scale, dst.f32(), 0, dst.numel());
}

void accumulate(const Tensor& src, Tensor& dst) {
  if (detail::runs_on_cuda(dst.device(), "accumulate")) {
    if constexpr (detail::kCudaBuilt) return gpu::accumulate(src, dst);
  }
  reduce_range(dst.f32(), src.f32(), Reduction::kSum, 0, dst.numel());
}

void fp16_round(Tensor& data) {
  if (detail::runs_on_cuda(data.device(), "fp16_round")) {
    if constexpr (detail::kCudaBuilt) return gpu::fp16_round(data);
  }
  fp16_round_range(data.f32(), 0, data.numel());
}

void fp16_compress(Tensor& data, float divisor) {
  if (detail::runs_on_cuda(data.device(), "fp16_compress")) {
    if constexpr (detail::kCudaBuilt) return gpu::fp16_compress(data, divisor);
  }
  fp16_compress_range(data.f32(), divisor, 0, data.numel());
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdStep& step) {
  if (detail::runs_on_cuda(param.device(), "sgd_update")) {
    if constexpr (detail::kCudaBuilt) {
      const SgdTensors one{&param, &grad, &momentum_buffer, step};
      return gpu::sgd_update_multi({&one, 1});
    }
  }
  float* buf = step.use_momentum ? momentum_buffer.f32() : nullptr;
  sgd_update_range(param.f32(), grad.f32(), buf, step, 0, param.numel());
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 Tensor& max_exp_avg_sq, const AdamStep& step) {
  if (detail::runs_on_cuda(param.device(), "adam_update")) {
    if constexpr (detail::kCudaBuilt) {
      const AdamTensors one{&param, &grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq, step};
      return gpu::adam_update_multi({&one, 1});
    }
  }
  float* max_sq = max_exp_avg_sq.defined() ? max_exp_avg_sq.f32() : nullptr;
  adam_update_range(param.f32(), grad.f32(), exp_avg.f32(), exp_avg_sq.f32(), max_sq, step, 0, param.numel());
}

void sgd_update_multi(std::span<const SgdTensors> tensors) {
  if (tensors.empty()) return;
  check_one_device(tensors, "sgd_update_multi");
  if (detail::runs_on_cuda(tensors.front().param->device(), "sgd_update_multi")) {
    if constexpr (detail::kCudaBuilt) return gpu::sgd_update_multi(tensors);
  }
  for (const SgdTensors& t : tensors) sgd_update(*t.param, *t.grad, *t.momentum_buffer, t.step);
}

void adam_update_multi(std::span<const AdamTensors> tensors) {
  if (tensors.empty()) return;
  check_one_device(tensors, "adam_update_multi");
  if (detail::runs_on_cuda(tensors.front().param->device(), "adam_update_multi")) {
    if constexpr (detail::kCudaBuilt) return gpu::adam_update_multi(tensors);
  }
  for (const AdamTensors& t : tensors)
    adam_update(*t.param, *t.grad, *t.exp_avg, *t.exp_avg_sq, *t.max_exp_avg_sq, t.step);
}

void reduce_into(const Device& device, std::byte* dst, const std::byte* src, int64_t count, Reduction op,
                 DType dtype) {
  if (detail::runs_on_cuda(device, "reduce_into")) {
    if constexpr (detail::kCudaBuilt) return gpu::reduce_into(device, dst, src, count, op, dtype);
  }
  reduce_into(device.kind(), dst, src, count, op, dtype);
}

void divide(const Device& device, std::byte* data, int64_t count, float divisor) {
  if (detail::runs_on_cuda(device, "divide")) {
    if constexpr (detail::kCudaBuilt) return gpu::divide(device, data, count, divisor);
  }
  divide(device.kind(), data, count, divisor);
}

void reduce_into(DeviceKind kind, std::byte* dst, const std::byte* src, int64_t count, Reduction op,
                 DType dtype) {
  DPS_CHECK(kind != DeviceKind::kCuda, ErrorKind::kInvalidArgument,
            "reduce_into on cuda memory needs its Device (the stream to run on): call "
            "reduce_into(device, ...)");
  if (dtype == DType::kF32) {
    reduce_range(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src), op, 0, count);
  } else {
    reduce_range(reinterpret_cast<int64_t*>(dst), reinterpret_cast<const int64_t*>(src), op, 0, count);
  }
}

void divide(DeviceKind kind, std::byte* data, int64_t count, float divisor) {
  DPS_CHECK(kind != DeviceKind::kCuda, ErrorKind::kInvalidArgument,
            "divide on cuda memory needs its Device (the stream to run on): call divide(device, ...)");
  divide_range(reinterpret_cast<float*>(data), divisor, 0, count);
}

}  // namespace dpscope::kernels
