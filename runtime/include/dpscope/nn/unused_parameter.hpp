// WithUnusedParameter: a model that owns a layer its forward never uses — DDP's classic pitfall.
//
//   class Net(nn.Module):
//       def __init__(self): super().__init__(); self.body = mlp; self.unused = nn.Linear(4, 4)
//       def forward(self, x): return self.body(x)          # self.unused receives no gradient
//
// Without find_unused_parameters, DDP's bucket holding `unused.*` never completes and the next
// iteration fails with PyTorch's "Expected to have finished reduction in the prior iteration ...".
// `dpscope train --pitfall unused-parameter` and lesson 05 use it.
#pragma once

#include <memory>

#include "dpscope/nn/module.hpp"

namespace dpscope {

class WithUnusedParameter : public Module {
 public:
  // Parameters: body.* in body's order, then unused.* (PyTorch registers children in that order).
  WithUnusedParameter(std::unique_ptr<Module> body, std::unique_ptr<Module> unused);
  const char* type_name() const override { return "WithUnusedParameter"; }
  Module& body() { return *body_; }

 protected:
  Tensor forward_impl(const Tensor& input) override { return body_->forward(input); }
  Tensor backward_impl(const Tensor& grad_output, bool need_input_grad) override {
    return body_->backward(grad_output, need_input_grad);
  }
  std::unique_ptr<Module> clone_impl(const Device* device) const override;

 private:
  std::unique_ptr<Module> body_;
  std::unique_ptr<Module> unused_;
};

}  // namespace dpscope
