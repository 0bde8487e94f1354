// ReLU: y = max(x, 0), elementwise; the non-linearity between the Linear layers of an MLP.
//
// Kernels and roofline cost (n elements, 4-byte floats):
//   "forward <name>"    flops n   bytes 8*n   (read x, write y)
//   "backward <name>"   flops n   bytes 12*n  (read dy and the saved y, write dx)
// The saved output (not the input) decides where the gradient passes, as PyTorch's
// threshold_backward does. NaN inputs stay NaN.
#pragma once

#include <memory>
#include <string>

#include "dpscope/nn/module.hpp"

namespace dpscope {

class ReLU : public Module {
 public:
  ReLU();
  const char* type_name() const override { return "ReLU"; }

 protected:
  Tensor forward_impl(const Tensor& input) override;
  Tensor backward_impl(const Tensor& grad_output, bool need_input_grad) override;
  std::unique_ptr<Module> clone_impl(const Device* device) const override;
  void release_saved() override { output_ = Tensor(); }
  void on_renamed() override;

 private:
  Tensor output_;  // saved by forward, same shape as the input
  std::string span_forward_;
  std::string span_backward_;
};

}  // namespace dpscope
