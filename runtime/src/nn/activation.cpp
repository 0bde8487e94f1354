// ReLU forward and backward (see nn/activation.hpp).
#include "dpscope/nn/activation.hpp"

#include "dpscope/core/timing.hpp"

namespace dpscope {

ReLU::ReLU() { on_renamed(); }

void ReLU::on_renamed() {
  span_forward_ = "forward " + display_name();
  span_backward_ = "backward " + display_name();
}

std::unique_ptr<Module> ReLU::clone_impl(const Device* /*device*/) const { return std::make_unique<ReLU>(); }

Tensor ReLU::forward_impl(const Tensor& input) {
  DPS_CHECK(input.dtype() == DType::kF32, ErrorKind::kInvalidArgument, "{}: expected a float32 input, got {}",
            display_name(), to_string(input.dtype()));
  const Device& device = input.device();
  const int64_t n = input.numel();
  const double nd = static_cast<double>(n);
  Tensor output = input.has_data() ? Tensor::empty(input.shape(), device, MemoryCategory::kActivations)
                                   : Tensor::meta(input.shape(), device, MemoryCategory::kActivations);
  {
    KernelScope kernel(device, span_forward_, KernelCost{nd, 8.0 * nd});
    if (input.has_data()) {
      const float* x = input.f32();
      float* y = output.f32();
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
    }
  }
  output_ = output;
  return output;
}

Tensor ReLU::backward_impl(const Tensor& grad_output, bool need_input_grad) {
  check_same_device(output_, grad_output);
  check_shape(grad_output, output_.shape(), span_backward_.c_str(), "grad_output");
  DPS_CHECK(grad_output.dtype() == DType::kF32, ErrorKind::kInvalidArgument,
            "{}: expected a float32 grad_output, got {}", display_name(), to_string(grad_output.dtype()));
  if (!need_input_grad) return Tensor();
  const Device& device = grad_output.device();
  const int64_t n = output_.numel();
  const double nd = static_cast<double>(n);
  const bool compute = grad_output.has_data() && output_.has_data();
  Tensor grad_input = compute ? Tensor::empty(output_.shape(), device, MemoryCategory::kActivations)
                              : Tensor::meta(output_.shape(), device, MemoryCategory::kActivations);
  {
    KernelScope kernel(device, span_backward_, KernelCost{nd, 12.0 * nd});
    if (compute) {
      const float* dy = grad_output.f32();
      const float* y = output_.f32();
      float* dx = grad_input.f32();
      for (int64_t i = 0; i < n; ++i) dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
    }
  }
  return grad_input;
}

}  // namespace dpscope
