// Linear layer: forward and backward through the kernel layer, timed by KernelScope (see nn/linear.hpp).
#include "dpscope/nn/linear.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "dpscope/core/timing.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "dpscope/nn/init.hpp"

namespace dpscope {

namespace {

constexpr double kF32Bytes = 4.0;

// Rows of a [..., features] tensor.
int64_t rows_of(const Tensor& t, int64_t features) { return features == 0 ? 0 : t.numel() / features; }

// Allocates the [out, in] weight and [out] bias (undefined without bias) after checking the sizes.
std::pair<Tensor, Tensor> make_linear_tensors(int64_t in_features, int64_t out_features, bool bias,
                                              const Device& device, bool with_data) {
  DPS_CHECK(in_features > 0 && out_features > 0, ErrorKind::kInvalidArgument,
            "Linear: in_features and out_features must be positive, got {} and {}", in_features,
            out_features);
  auto make = [&](const Shape& shape) {
    return with_data ? Tensor::empty(shape, device, MemoryCategory::kParameters)
                     : Tensor::meta(shape, device, MemoryCategory::kParameters);
  };
  Tensor weight = make({out_features, in_features});
  Tensor bias_tensor = bias ? make({out_features}) : Tensor();
  return {std::move(weight), std::move(bias_tensor)};
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, std::pair<Tensor, Tensor> tensors)
    : in_features_(in_features), out_features_(out_features), has_bias_(bias) {
  weight_.data = std::move(tensors.first);
  register_parameter("weight", weight_);
  if (has_bias_) {
    bias_.data = std::move(tensors.second);
    register_parameter("bias", bias_);
  }
  on_renamed();
}

Linear::Linear(int64_t in_features, int64_t out_features, const Device& device, std::mt19937& generator,
               bool bias)
    : Linear(in_features, out_features, bias,
             make_linear_tensors(in_features, out_features, bias, device, /*with_data=*/true)) {
  // torch.nn.Linear.reset_parameters: the weight first, then the bias.
  init_kaiming_uniform(weight_.data, std::sqrt(5.0), generator);
  if (has_bias_) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
    init_uniform(bias_.data, -bound, bound, generator);
  }
}

std::unique_ptr<Linear> Linear::timing_only(int64_t in_features, int64_t out_features, const Device& device,
                                            bool bias) {
  return std::unique_ptr<Linear>(new Linear(in_features, out_features, bias,
                                            make_linear_tensors(in_features, out_features, bias, device,
                                                                /*with_data=*/false)));
}

std::unique_ptr<Module> Linear::clone_impl(const Device* device) const {
  auto copy_param = [&](const Tensor& t) {
    if (!t.defined()) return Tensor();
    if (device == nullptr || *device == t.device()) return t.clone(MemoryCategory::kParameters);
    return t.to(*device, MemoryCategory::kParameters);
  };
  return std::unique_ptr<Module>(
      new Linear(in_features_, out_features_, has_bias_, {copy_param(weight_.data), copy_param(bias_.data)}));
}

void Linear::on_renamed() {
  const std::string name = display_name();
  span_forward_ = "forward " + name;
  span_grad_bias_ = "backward " + name + " grad_bias";
  span_grad_weight_ = "backward " + name + " grad_weight";
  span_grad_input_ = "backward " + name + " grad_input";
}

Tensor Linear::forward_impl(const Tensor& input) {
  check_same_device(weight_.data, input);
  DPS_CHECK(input.dtype() == DType::kF32, ErrorKind::kInvalidArgument, "{}: expected a float32 input, got {}",
            display_name(), to_string(input.dtype()));
  DPS_CHECK(input.dim() >= 1 && input.size(-1) == in_features_, ErrorKind::kInvalidArgument,
            "{}: input of shape {} does not end in in_features {} (mat1 and mat2 shapes cannot be multiplied "
            "({}x{} and {}x{}))",
            display_name(), shape_to_string(input.shape()), in_features_,
            input.dim() >= 1 ? input.numel() / std::max<int64_t>(input.size(-1), 1) : 1,
            input.dim() >= 1 ? input.size(-1) : 0, in_features_, out_features_);
  const int64_t rows = rows_of(input, in_features_);
  const double b = static_cast<double>(rows), in = static_cast<double>(in_features_),
               out = static_cast<double>(out_features_);
  const KernelCost cost{2.0 * b * in * out + b * out, kF32Bytes * (b * in + out * in + out + b * out)};

  Shape out_shape = input.shape();
  out_shape.back() = out_features_;
  const Device& device = input.device();
  const bool compute = input.has_data() && weight_.data.has_data();
  Tensor output = compute ? Tensor::empty(out_shape, device, MemoryCategory::kActivations)
                          : Tensor::meta(out_shape, device, MemoryCategory::kActivations);
  {
    KernelScope kernel(device, span_forward_, cost);
    if (compute) kernels::linear_forward(input, weight_.data, bias_.data, output);
  }
  weight_.used_in_last_forward = true;
  if (has_bias_) bias_.used_in_last_forward = true;
  input_ = input;
  return output;
}

Tensor Linear::backward_impl(const Tensor& grad_output, bool need_input_grad) {
  check_same_device(weight_.data, grad_output);
  Shape expected = input_.shape();
  expected.back() = out_features_;
  check_shape(grad_output, expected, span_grad_input_.c_str(), "grad_output");
  DPS_CHECK(grad_output.dtype() == DType::kF32, ErrorKind::kInvalidArgument,
            "{}: expected a float32 grad_output, got {}", display_name(), to_string(grad_output.dtype()));

  const int64_t rows = rows_of(input_, in_features_);
  const double b = static_cast<double>(rows), in = static_cast<double>(in_features_),
               out = static_cast<double>(out_features_);
  const Device& device = grad_output.device();
  const bool compute = grad_output.has_data() && input_.has_data() && weight_.data.has_data();

  if (has_bias_) {
    const bool fresh = ensure_grad(bias_);
    {
      KernelScope kernel(device, span_grad_bias_, KernelCost{b * out, kF32Bytes * (b * out + 2.0 * out)});
      if (compute) kernels::bias_grad(grad_output, bias_.grad, !fresh, bias_scratch_);
    }
    grad_ready(bias_);
  }

  {
    const bool fresh = ensure_grad(weight_);
    {
      KernelScope kernel(device, span_grad_weight_,
                         KernelCost{2.0 * b * in * out, kF32Bytes * (b * out + b * in + 2.0 * out * in)});
      if (compute) kernels::linear_grad_weight(grad_output, input_, weight_.grad, !fresh);
    }
    grad_ready(weight_);
  }

  if (!need_input_grad) return Tensor();
  const bool with_data = compute;
  Tensor grad_input = with_data ? Tensor::empty(input_.shape(), device, MemoryCategory::kActivations)
                                : Tensor::meta(input_.shape(), device, MemoryCategory::kActivations);
  {
    KernelScope kernel(device, span_grad_input_,
                       KernelCost{2.0 * b * in * out, kF32Bytes * (b * out + out * in + b * in)});
    if (with_data) kernels::linear_grad_input(grad_output, weight_.data, grad_input);
  }
  return grad_input;
}

}  // namespace dpscope
