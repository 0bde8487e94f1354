// ReLU forward and backward (see nn/activation.hpp).
#include "dpscope/nn/activation.hpp"

#include "dpscope/core/timing.hpp"
#include "dpscope/kernels/kernels.hpp"

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
    if (input.has_data()) kernels::relu_forward(input, output);
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
    if (compute) kernels::relu_backward(output_, grad_output, grad_input);
  }
  return grad_input;
}

}  // namespace dpscope
