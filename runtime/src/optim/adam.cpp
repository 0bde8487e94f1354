// torch.optim.Adam / AdamW updates (see optim/adam.hpp); the arithmetic is
// kernels::adam_update_multi, one call for the parameters of one device.
#include "dpscope/optim/adam.hpp"

#include <cmath>

#include "dpscope/kernels/kernels.hpp"

namespace dpscope {

namespace {

constexpr size_t kStep = 0;
constexpr size_t kExpAvg = 1;
constexpr size_t kExpAvgSq = 2;
constexpr size_t kMaxExpAvgSq = 3;

const AdamOptions& checked(const AdamOptions& o) {
  DPS_CHECK(o.lr >= 0.0, ErrorKind::kInvalidArgument, "Invalid learning rate: {}", python_float(o.lr));
  DPS_CHECK(o.eps >= 0.0, ErrorKind::kInvalidArgument, "Invalid epsilon value: {}", python_float(o.eps));
  DPS_CHECK(o.betas.first >= 0.0 && o.betas.first < 1.0, ErrorKind::kInvalidArgument,
            "Invalid beta parameter at index 0: {}", python_float(o.betas.first));
  DPS_CHECK(o.betas.second >= 0.0 && o.betas.second < 1.0, ErrorKind::kInvalidArgument,
            "Invalid beta parameter at index 1: {}", python_float(o.betas.second));
  DPS_CHECK(o.weight_decay >= 0.0, ErrorKind::kInvalidArgument, "Invalid weight_decay value: {}",
            python_float(o.weight_decay));
  return o;
}

AdamOptions to_adam_options(const AdamWOptions& o) {
  return {o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize};
}

}  // namespace

Adam::Adam(std::vector<Parameter*> params, const AdamOptions& options)
    : Adam(std::move(params), options, false) {}

Adam::Adam(std::vector<Parameter*> params, const AdamOptions& options, bool decoupled_weight_decay)
    : Optimizer(std::move(params),
                {{"step", true}, {"exp_avg", false}, {"exp_avg_sq", false}, {"max_exp_avg_sq", false}}),
      options_(checked(options)),
      decoupled_weight_decay_(decoupled_weight_decay) {}

AdamW::AdamW(std::vector<Parameter*> params, const AdamWOptions& options)
    : Adam(std::move(params), to_adam_options(options), true) {}

KernelCost Adam::update_cost(int64_t numel) const {
  const double n = static_cast<double>(numel);
  double flops = 13.0;
  if (options_.weight_decay != 0.0) flops += 2.0;
  if (options_.amsgrad) flops += 1.0;
  return {flops * n, 4.0 * n * (options_.amsgrad ? 9.0 : 7.0)};
}

void Adam::check_loaded_state(size_t i) const {
  const bool any = slot(i, kStep).defined() || slot(i, kExpAvg).defined() || slot(i, kExpAvgSq).defined() ||
                   slot(i, kMaxExpAvgSq).defined();
  if (!any) return;  // a parameter that never took a step
  const std::string& name = params()[i]->name;
  for (size_t s : {kStep, kExpAvg, kExpAvgSq}) {
    DPS_CHECK(slot(i, s).defined(), ErrorKind::kInvalidArgument,
              "load_state_tensors: {} state of {} is incomplete: {}.{} is missing", type_name(), name, name,
              slot_names()[s]);
  }
  DPS_CHECK(slot(i, kMaxExpAvgSq).defined() == options_.amsgrad, ErrorKind::kInvalidArgument,
            "load_state_tensors: {}.max_exp_avg_sq is {} but amsgrad is {}", name,
            options_.amsgrad ? "missing" : "present", options_.amsgrad ? "on" : "off");
}

float& Adam::step_count(size_t i) {
  // The step count is a 0-d tensor on the host (Optimizer::make_slot and load_state_tensors put
  // scalar slots there, as PyTorch keeps `step` on the cpu), so it is read and written here without
  // touching device memory, whatever the parameter's device; a checkpoint stores it as before.
  Tensor& step = slot(i, kStep);
  DPS_ASSERT(step.device().kind() == DeviceKind::kCpu,
             "{} step count of {} is on {}: scalar slots must stay on the host (Optimizer::make_slot)",
             type_name(), params()[i]->name, step.device().name());
  return step.f32()[0];
}

void Adam::update(std::span<const size_t> indices) {
  batch_.clear();
  for (size_t i : indices) {
    Parameter& param = *params()[i];
    if (!slot(i, kStep).defined()) {
      for (size_t s : {kStep, kExpAvg, kExpAvgSq}) slot(i, s) = make_slot(param, s);
      if (options_.amsgrad) slot(i, kMaxExpAvgSq) = make_slot(param, kMaxExpAvgSq);
    }
    float& count = step_count(i);
    count += 1.0f;
    if (!param.data.has_data() || !param.grad.has_data()) continue;

    const auto [beta1_d, beta2_d] = options_.betas;
    const double step_d = static_cast<double>(count);
    const double bias_correction1 = 1.0 - std::pow(beta1_d, step_d);
    const double bias_correction2 = 1.0 - std::pow(beta2_d, step_d);
    // Python-float scalars applied to float32 tensors act in float32.
    const kernels::AdamStep step{
        .beta1 = static_cast<float>(beta1_d),
        .beta2 = static_cast<float>(beta2_d),
        .one_minus_beta1 = static_cast<float>(1.0 - beta1_d),
        .one_minus_beta2 = static_cast<float>(1.0 - beta2_d),
        .neg_step_size = static_cast<float>(-(options_.lr / bias_correction1)),
        .bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2)),
        .eps = static_cast<float>(options_.eps),
        .weight_decay = static_cast<float>(options_.weight_decay),
        .decay_factor = static_cast<float>(1.0 - options_.lr * options_.weight_decay),
        .coupled_decay = !decoupled_weight_decay_ && options_.weight_decay != 0.0,
        .decoupled_decay = decoupled_weight_decay_,
        .maximize = options_.maximize};
    batch_.push_back(
        {&param.data, &param.grad, &slot(i, kExpAvg), &slot(i, kExpAvgSq), &slot(i, kMaxExpAvgSq), step});
  }
  kernels::adam_update_multi(batch_);
}

}  // namespace dpscope
