// MSELoss and CrossEntropyLoss (see nn/loss.hpp).
#include "dpscope/nn/loss.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dpscope/core/timing.hpp"

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
    if (compute) {
      const float* x = input.f32();
      const float* t = target.f32();
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(x[i]) - static_cast<double>(t[i]);
        sum += d * d;
      }
      loss.f32()[0] = static_cast<float>(sum / nd);  // NaN for an empty input, as PyTorch
    }
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
    if (compute) {
      const float scale = static_cast<float>(2.0 * static_cast<double>(grad_output) / nd);
      const float* x = input_.f32();
      const float* t = target_.f32();
      float* dx = grad_input.f32();
      for (int64_t i = 0; i < n; ++i) dx[i] = scale * (x[i] - t[i]);
    }
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
  if (compute) {
    const int64_t* t = target.i64();
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
    if (compute) {
      const float* x = input.f32();
      const int64_t* t = target.i64();
      float* p = probs.f32();
      double total = 0.0;
      for (int64_t r = 0; r < batch; ++r) {
        const float* row = x + r * classes;
        float* prow = p + r * classes;
        float max = -std::numeric_limits<float>::infinity();
        for (int64_t c = 0; c < classes; ++c) max = std::max(max, row[c]);
        // log-softmax = x - (max + log(sum(exp(x - max)))): no exp of a large positive number.
        double sum = 0.0;
        for (int64_t c = 0; c < classes; ++c) {
          prow[c] = std::exp(row[c] - max);
          sum += prow[c];
        }
        const float inv_sum = static_cast<float>(1.0 / sum);
        for (int64_t c = 0; c < classes; ++c) prow[c] *= inv_sum;
        const double log_sum_exp = static_cast<double>(max) + std::log(sum);
        total += log_sum_exp - static_cast<double>(row[t[r]]);
      }
      loss.f32()[0] = static_cast<float>(total / static_cast<double>(batch));  // NaN for an empty batch
    }
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
    if (compute && batch > 0) {
      // d/dx mean(-log softmax(x)[t]) = (softmax(x) - onehot(t)) / B.
      const float scale = static_cast<float>(static_cast<double>(grad_output) / static_cast<double>(batch));
      const float* p = probs_.f32();
      const int64_t* t = target_.i64();
      float* dx = grad_input.f32();
      for (int64_t r = 0; r < batch; ++r) {
        for (int64_t c = 0; c < classes; ++c) dx[r * classes + c] = scale * p[r * classes + c];
        dx[r * classes + t[r]] = scale * (p[r * classes + t[r]] - 1.0f);
      }
    }
  }
  return grad_input;
}

void CrossEntropyLoss::release_saved() {
  probs_ = Tensor();
  target_ = Tensor();
}

}  // namespace dpscope
