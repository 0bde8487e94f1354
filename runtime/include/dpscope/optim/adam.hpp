// Adam and AdamW: torch.optim.Adam / AdamW (1.13), whose single-tensor (for-loop) update this
// reproduces operation by operation in float32 (scalars computed in double, as Python does):
//
//   step += 1
//   g = maximize ? -grad : grad
//   Adam:  if weight_decay != 0:  g = g + weight_decay * param
//   AdamW: param = param * (1 - lr * weight_decay)
//   exp_avg    = exp_avg * beta1 + (1 - beta1) * g
//   exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * g * g
//   bias_correction1 = 1 - beta1^step,  bias_correction2 = 1 - beta2^step
//   step_size = lr / bias_correction1
//   amsgrad: max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq), used below instead of exp_avg_sq
//   denom = sqrt(exp_avg_sq) / sqrt(bias_correction2) + eps
//   param = param - step_size * exp_avg / denom
//
// State per parameter: "step" (a 0-d float32 cpu tensor, like PyTorch's, on the host even for a
// cuda parameter), "exp_avg",
// "exp_avg_sq" and, with amsgrad, "max_exp_avg_sq". Kernel cost per parameter of n elements:
// flops (13 + 2·[weight decay] + [amsgrad])·n, bytes 4·n·(7 + 2·[amsgrad]).
#pragma once

#include <utility>
#include <vector>

#include "dpscope/kernels/kernels.hpp"
#include "dpscope/optim/optimizer.hpp"

namespace dpscope {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

// AdamW's defaults differ from Adam's only in weight_decay.
struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

class Adam : public Optimizer {
 public:
  // Throws kInvalidArgument worded like PyTorch: "Invalid learning rate: -0.1", "Invalid epsilon
  // value: ...", "Invalid beta parameter at index 0: 1.0", "Invalid weight_decay value: ...".
  Adam(std::vector<Parameter*> params, const AdamOptions& options);

  const char* type_name() const override { return decoupled_weight_decay_ ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(std::vector<Parameter*> params, const AdamOptions& options, bool decoupled_weight_decay);
  void update(std::span<const size_t> indices) override;
  KernelCost update_cost(int64_t numel) const override;
  void check_loaded_state(size_t i) const override;

 private:
  // Parameter i's step count, kept on the host (never device memory).
  float& step_count(size_t i);

  AdamOptions options_;
  bool decoupled_weight_decay_;
  std::vector<kernels::AdamTensors> batch_;  // one step's multi-tensor update, reused between steps
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Parameter*> params, const AdamWOptions& options);
};

}  // namespace dpscope
