// MSELoss and CrossEntropyLoss (see nn/loss.hpp).
#include "dpscope/nn/loss.hpp"

#include "dpscope/core/timing.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope {

namespace {

constexpr const char* kMseForward = "loss MSE forward";
constexpr const char* kMseBackward = "loss MSE backward";
constexpr const char* kCeForward = "loss CrossEntropy forward";
constexpr const char* kCeBackward = "loss CrossEntropy backward";

Tensor make_like(const Shape& shape, const Device& device, bool with_data) {
  return with_data ? Tensor::empty(shape, device, MemoryCategory::kActivations)
                   : Tensor::meta(shape, device, MemoryCategory::kActivations);
}

}  // namespace

Tensor Loss::forward(const Tensor& input, const Tensor& target) {
  DPS_CHECK(input.defined() && target.defined(), ErrorKind::kInvalidArgument,
            "{}.forward: the input or the target is an undefined tensor", type_name());
  check_same_device(input, target);
  Tensor loss = forward_impl(input, target);
  forward_pending_ = true;
  return loss;
}

Tensor Loss::backward(float grad_output) {
  DPS_CHECK(forward_pending_, ErrorKind::kInvalidArgument,
            "{}.backward: no forward() since the last backward(); saved tensors are freed by backward()",
            type_name());
  Tensor grad_input = backward_impl(grad_output);
  forward_pending_ = false;
  release_saved();
  return grad_input;
}

// ---- MSELoss ----

Tensor MSELoss::forward_impl(const Tensor& input, const Tensor& target) {
  DPS_CHECK(input.dtype() == DType::kF32 && target.dtype() == DType::kF32, ErrorKind::kInvalidArgument,
            "MSELoss: expected float32 input and target, got {} and {}", to_string(input.dtype()),
            to_string(target.dtype()));
  DPS_CHECK(input.shape() == target.shape(), ErrorKind::kInvalidArgument,
            "MSELoss: input shape {} and target shape {} differ", shape_to_string(input.shape()),
            shape_to_string(target.shape()));
  const Device& device = input.device();
  const int64_t n = input.numel();
  const double nd = static_cast<double>(n);
  const bool compute = input.has_data() && target.has_data();
  Tensor loss = make_like({}, device, compute);
  {
    KernelScope kernel(device, kMseForward, KernelCost{3.0 * nd, 8.0 * nd + 4.0});
    if (compute) kernels::mse_forward(input, target, loss);
  }
  input_ = input;
  target_ = target;
  return loss;
}

Tensor MSELoss::backward_impl(float grad_output) {
  const Device& device = input_.device();
  const int64_t n = input_.numel();
  const double nd = static_cast<double>(n);
  const bool compute = input_.has_data() && target_.has_data();
  Tensor grad_input = make_like(input_.shape(), device, compute);
  {
    KernelScope kernel(device, kMseBackward, KernelCost{3.0 * nd, 12.0 * nd});
    if (compute) kernels::mse_backward(input_, target_, grad_output, grad_input);
  }
  return grad_input;
}

void MSELoss::release_saved() {
  input_ = Tensor();
  target_ = Tensor();
}

// ---- CrossEntropyLoss ----

Tensor CrossEntropyLoss::forward_impl(const Tensor& input, const Tensor& target) {
  DPS_CHECK(input.dtype() == DType::kF32 && input.dim() == 2, ErrorKind::kInvalidArgument,
            "CrossEntropyLoss: expected float32 logits of shape [batch, classes], got {} {}",
            to_string(input.dtype()), shape_to_string(input.shape()));
  DPS_CHECK(target.dtype() == DType::kI64 && target.dim() == 1, ErrorKind::kInvalidArgument,
            "CrossEntropyLoss: expected int64 class indices of shape [batch], got {} {}",
            to_string(target.dtype()), shape_to_string(target.shape()));
  const int64_t batch = input.size(0);
  const int64_t classes = input.size(1);
  DPS_CHECK(target.size(0) == batch, ErrorKind::kInvalidArgument,
            "CrossEntropyLoss: Expected input batch_size ({}) to match target batch_size ({}).", batch,
            target.size(0));
  const Device& device = input.device();
  const double bc = static_cast<double>(batch) * static_cast<double>(classes);
  const bool compute = input.has_data() && target.has_data();
  if (compute && check_targets_) {
    // The range check reads the targets on the host: a cuda tensor's are copied back first.
    std::vector<int64_t> staged;
    const int64_t* t = target.i64();
    if (target.device().kind() == DeviceKind::kCuda) {
      staged = target.to_ints();
      t = staged.data();
    }
    for (int64_t r = 0; r < batch; ++r) {
      DPS_CHECK(t[r] >= 0 && t[r] < classes, ErrorKind::kInvalidArgument,
                "CrossEntropyLoss: Target {} is out of bounds (class indices must be in [0, {}), at row {}).",
                t[r], classes, r);
    }
  }
  Tensor loss = make_like({}, device, compute);
  Tensor probs = make_like(input.shape(), device, compute);
  {
    KernelScope kernel(device, kCeForward,
                       KernelCost{4.0 * bc, 8.0 * bc + 8.0 * static_cast<double>(batch) + 4.0});
    if (compute) kernels::cross_entropy_forward(input, target, probs, loss);
  }
  probs_ = probs;
  target_ = target;
  return loss;
}

Tensor CrossEntropyLoss::backward_impl(float grad_output) {
  const Device& device = probs_.device();
  const int64_t batch = probs_.size(0);
  const int64_t classes = probs_.size(1);
  const double bc = static_cast<double>(batch) * static_cast<double>(classes);
  const bool compute = probs_.has_data() && target_.has_data();
  Tensor grad_input = make_like(probs_.shape(), device, compute);
  {
    KernelScope kernel(device, kCeBackward,
                       KernelCost{2.0 * bc, 8.0 * bc + 8.0 * static_cast<double>(batch)});
    if (compute) kernels::cross_entropy_backward(probs_, target_, grad_output, grad_input);
  }
  return grad_input;
}

void CrossEntropyLoss::release_saved() {
  probs_ = Tensor();
  target_ = Tensor();
}

}  // namespace dpscope
