// Loss functions with mean reduction: MSELoss and CrossEntropyLoss, as torch.nn defines them.
//
// forward(input, target) returns the loss as a 0-d float32 tensor on the input's device and saves
// what backward needs; backward(grad_output = 1) returns d(grad_output * loss)/d(input) (already
// scaled by 1/numel or 1/B) and frees the saved tensors. With timing-only inputs (no data) both
// are timed and return tensors without data (the loss value is then undefined).
//
// Kernels and roofline cost (4-byte floats; n = input elements; B rows, C classes):
//   MSELoss           "loss MSE forward"            flops 3*n     bytes 8*n + 4
//                     "loss MSE backward"           flops 3*n     bytes 12*n
//   CrossEntropyLoss  "loss CrossEntropy forward"   flops 4*B*C   bytes 8*B*C + 8*B + 4
//                     "loss CrossEntropy backward"  flops 2*B*C   bytes 8*B*C + 8*B
// CrossEntropyLoss takes logits [B, C] (float32) and class indices [B] (int64, in [0, C); there is
// no ignore_index) and uses a numerically stable log-softmax.
#pragma once

#include "dpscope/core/tensor.hpp"

namespace dpscope {

class Loss {
 public:
  virtual ~Loss() = default;
  virtual const char* type_name() const = 0;  // "MSELoss", "CrossEntropyLoss"

  Tensor forward(const Tensor& input, const Tensor& target);
  Tensor backward(float grad_output = 1.0f);

 protected:
  virtual Tensor forward_impl(const Tensor& input, const Tensor& target) = 0;
  virtual Tensor backward_impl(float grad_output) = 0;
  virtual void release_saved() = 0;

 private:
  bool forward_pending_ = false;
};

// mean((input - target)^2) over all elements; input and target of the same shape.
class MSELoss : public Loss {
 public:
  const char* type_name() const override { return "MSELoss"; }

 protected:
  Tensor forward_impl(const Tensor& input, const Tensor& target) override;
  Tensor backward_impl(float grad_output) override;
  void release_saved() override;

 private:
  Tensor input_;
  Tensor target_;
};

// mean over the batch of -log softmax(logits)[target].
class CrossEntropyLoss : public Loss {
 public:
  const char* type_name() const override { return "CrossEntropyLoss"; }
  // forward() checks every target is a class index in [0, classes), as PyTorch does (on a GPU
  // with a device-side assert; here a cuda tensor's targets are read back, a host wait per call).
  // Off, the caller vouches for the targets: a step captured as a CUDA graph cannot wait on the
  // host (bench/gpu/gpu_mlp_step_bench's graph experiment).
  void set_check_targets(bool check) { check_targets_ = check; }

 protected:
  Tensor forward_impl(const Tensor& input, const Tensor& target) override;
  Tensor backward_impl(float grad_output) override;
  void release_saved() override;

 private:
  Tensor probs_;   // [B, C] softmax of the logits, saved by forward
  Tensor target_;  // [B]
  bool check_targets_ = true;
};

}  // namespace dpscope
