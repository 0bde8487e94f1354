// torch.optim.SGD's update (see optim/sgd.hpp); the arithmetic is kernels::sgd_update_multi, one
// call for the parameters of one device.
#include "dpscope/optim/sgd.hpp"

#include <cmath>

#include "dpscope/kernels/kernels.hpp"

namespace dpscope {

namespace {

constexpr size_t kMomentumBuffer = 0;

const SgdOptions& checked(const SgdOptions& o) {
  DPS_CHECK(!std::isnan(o.lr), ErrorKind::kInvalidArgument,
            "SGD: a learning rate is required (SgdOptions::lr)");
  DPS_CHECK(o.lr >= 0.0, ErrorKind::kInvalidArgument, "Invalid learning rate: {}", python_float(o.lr));
  DPS_CHECK(o.momentum >= 0.0, ErrorKind::kInvalidArgument, "Invalid momentum value: {}",
            python_float(o.momentum));
  DPS_CHECK(o.weight_decay >= 0.0, ErrorKind::kInvalidArgument, "Invalid weight_decay value: {}",
            python_float(o.weight_decay));
  DPS_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0), ErrorKind::kInvalidArgument,
            "Nesterov momentum requires a momentum and zero dampening");
  return o;
}

}  // namespace

SGD::SGD(std::vector<Parameter*> params, const SgdOptions& options)
    : Optimizer(std::move(params), {{"momentum_buffer", false}}), options_(checked(options)) {}

KernelCost SGD::update_cost(int64_t numel) const {
  const double n = static_cast<double>(numel);
  const bool momentum = options_.momentum != 0.0;
  double flops = 2.0;
  if (options_.weight_decay != 0.0) flops += 2.0;
  if (momentum) flops += 3.0;
  if (momentum && options_.nesterov) flops += 2.0;
  return {flops * n, 4.0 * n * (momentum ? 5.0 : 3.0)};
}

void SGD::update(std::span<const size_t> indices) {
  const bool momentum = options_.momentum != 0.0;
  batch_.clear();
  for (size_t i : indices) {
    Parameter& param = *params()[i];
    Tensor& buffer = slot(i, kMomentumBuffer);
    const bool first = momentum && !buffer.defined();
    if (first) buffer = make_slot(param, kMomentumBuffer);
    if (!param.data.has_data() || !param.grad.has_data()) continue;
    // PyTorch applies Python-float scalars to float32 tensors in float32.
    const kernels::SgdStep step{.neg_lr = static_cast<float>(-options_.lr),
                                .momentum = static_cast<float>(options_.momentum),
                                .one_minus_dampening = static_cast<float>(1.0 - options_.dampening),
                                .weight_decay = static_cast<float>(options_.weight_decay),
                                .use_momentum = momentum,
                                .decay = options_.weight_decay != 0.0,
                                .nesterov = options_.nesterov,
                                .maximize = options_.maximize,
                                .first = first};
    batch_.push_back({&param.data, &param.grad, &buffer, step});
  }
  kernels::sgd_update_multi(batch_);
}

}  // namespace dpscope
