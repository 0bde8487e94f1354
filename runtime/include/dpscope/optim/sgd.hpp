// SGD with momentum, dampening, Nesterov momentum and weight decay: torch.optim.SGD (1.13), whose
// single-tensor update this reproduces operation by operation in float32:
//
//   d_p = maximize ? -grad : grad
//   if weight_decay != 0:  d_p = d_p + weight_decay * param
//   if momentum != 0:
//     buf = first step ? d_p (a copy; no dampening) : buf * momentum + (1 - dampening) * d_p
//     d_p = nesterov ? d_p + momentum * buf : buf
//   param = param - lr * d_p
//
// State: "momentum_buffer" per parameter (only with momentum). Kernel cost per parameter of n
// elements: flops (2 + 2·[wd] + 3·[momentum] + 2·[nesterov])·n, bytes 4·n·(3 + 2·[momentum]).
#pragma once

#include <limits>
#include <vector>

#include "dpscope/kernels/kernels.hpp"
#include "dpscope/optim/optimizer.hpp"

namespace dpscope {

struct SgdOptions {
  double lr = std::numeric_limits<double>::quiet_NaN();  // required, as in PyTorch
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

class SGD : public Optimizer {
 public:
  // Throws kInvalidArgument worded like PyTorch: "Invalid learning rate: -0.1", "Invalid momentum
  // value: -1.0", "Invalid weight_decay value: -0.1", "Nesterov momentum requires a momentum and
  // zero dampening".
  SGD(std::vector<Parameter*> params, const SgdOptions& options);

  const char* type_name() const override { return "SGD"; }
  const SgdOptions& options() const { return options_; }

 protected:
  void update(std::span<const size_t> indices) override;
  KernelCost update_cost(int64_t numel) const override;

 private:
  SgdOptions options_;
  std::vector<kernels::SgdTensors> batch_;  // one step's multi-tensor update, reused between steps
};

}  // namespace dpscope
