// Optimizer: the base of SGD, Adam and AdamW (optim/sgd.hpp, optim/adam.hpp).
//
// An optimizer holds pointers to a module's parameters (one parameter group; the Parameter
// objects must outlive it) and, per parameter, a few named state tensors ("slots"), allocated
// lazily on the first step as MemoryCategory::kOptimizerState on the parameter's device, the way
// PyTorch's optimizer.state fills. Per-parameter scalar slots (Adam's "step") are 0-d float32
// tensors on the cpu device, as PyTorch keeps them.
//
// step() updates every parameter whose grad is defined (others are skipped, as in PyTorch) through
// the kernel layer's multi-tensor updates (kernels::sgd_update_multi / adam_update_multi):
//  * on a cuda device, one fused launch for all of the device's parameters (PyTorch's fused=True),
//    one kernel span "optimizer <type> fused" charged with the sum of the parameters' costs;
//  * on cpu and simulated devices, one kernel per parameter named "optimizer <type> <param name>"
//    (the for-loop optimizer the simulator models and lessons show), each charged with the update's
//    memory traffic (each subclass documents its cost).
// All parameters are checked before any is updated. On each device the whole step is also traced
// as a span "optimizer.step <type>" of category `optimizer`, and a traced device's phase is
// kOptimizer meanwhile. Parameters without data (timing-only mode) are timed, not computed.
//
// state_tensors() names every state tensor "<param name>.<slot>" ("0.weight.momentum_buffer",
// "0.weight.exp_avg", "0.weight.step", ...), for checkpoints; load_state_tensors() reads them back.
//
// Two kinds of optimizer derive from this class. A per-parameter optimizer (SGD, Adam, AdamW)
// implements update() and update_cost() and inherits everything else. A wrapper over other
// optimizers (parallel/zero_redundancy_optimizer.hpp: ZeRO-1 shards the state over ranks) overrides
// step(), slot_names() and the state functions instead, so a training loop drives either kind through
// this one interface: zero_grad, step, and for a checkpoint consolidate_state_dict(0) on every rank
// followed by state_tensors() on rank 0.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "dpscope/core/timing.hpp"
#include "dpscope/nn/module.hpp"

namespace dpscope {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual const char* type_name() const = 0;  // "SGD", "Adam", "AdamW"

  virtual void step();
  // Sets the gradients of the optimizer's parameters to undefined (default) or to zero.
  virtual void zero_grad(bool set_to_none = true);

  const std::vector<Parameter*>& params() const { return params_; }
  // Slot names in state order, e.g. {"momentum_buffer"} or {"step", "exp_avg", ...}.
  virtual std::vector<std::string> slot_names() const;

  // Collective for an optimizer whose state is sharded over the ranks of a process group: every
  // rank calls it with the same `to`, and afterwards state_tensors() on rank `to` returns the whole
  // state (PyTorch's ZeroRedundancyOptimizer.consolidate_state_dict). An optimizer that holds all
  // of its state (SGD, Adam, AdamW) has nothing to gather: a no-op.
  virtual void consolidate_state_dict(int /*to*/ = 0) {}

  // The existing state tensors in (parameter, slot) order; they share storage with the optimizer.
  virtual StateDict state_tensors() const;
  // Replaces the whole state with copies of `state`. Throws kInvalidArgument on a key that names
  // no parameter or slot, a dtype or shape mismatch ("load_state_tensors: size mismatch for
  // 0.weight.exp_avg: checkpoint [4], optimizer [3, 4]") or an incomplete parameter state;
  // nothing changes when any check fails.
  virtual void load_state_tensors(const StateDict& state);

 protected:
  struct SlotSpec {
    std::string name;     // "exp_avg"
    bool scalar = false;  // a 0-d cpu tensor (a step counter) instead of one shaped like the parameter
  };

  // Throws kInvalidArgument on an empty list, a null pointer or a parameter given twice.
  Optimizer(std::vector<Parameter*> params, std::vector<SlotSpec> slots);

  // Updates params()[i] for every i in `indices` (each with a defined grad, all on one device) in
  // one multi-tensor kernel call. A parameter without data (timing-only tensors) gets only its
  // state bookkeeping. Called by step() only, so a wrapper that overrides step() keeps this default.
  virtual void update(std::span<const size_t> /*indices*/) {
    DPS_ASSERT(false,
               "{} overrides neither step() nor update(): a per-parameter optimizer implements "
               "update() and update_cost()",
               type_name());
  }
  // The roofline cost of update() on a parameter of `numel` elements (see update()).
  virtual KernelCost update_cost(int64_t /*numel*/) const {
    DPS_ASSERT(false, "{} overrides neither step() nor update_cost()", type_name());
    return {};
  }
  // Throws when a loaded state of params()[i] is not usable (e.g. only some of Adam's slots).
  virtual void check_loaded_state(size_t /*i*/) const {}

  // The state tensor `slot` of parameter `i` (undefined until created).
  Tensor& slot(size_t i, size_t slot) { return state_[i][slot]; }
  const Tensor& slot(size_t i, size_t slot) const { return state_[i][slot]; }
  // A zero-filled state tensor for slot `slot` of `param` (without data when the parameter has none).
  Tensor make_slot(const Parameter& param, size_t slot) const;

 private:
  std::vector<Parameter*> params_;
  std::vector<SlotSpec> slots_;
  std::vector<std::vector<Tensor>> state_;  // [param][slot]
  std::vector<std::string> span_names_;     // [param]: "optimizer SGD 0.weight"
  std::vector<std::string> span_params_;    // [param]: the parameter name span_names_ was built for
  std::string fused_span_name_;             // "optimizer SGD fused": a cuda device's one launch
};

// Python's repr of a float ("0.1", "1.0", "-0.5"), for PyTorch-worded option errors.
std::string python_float(double value);

}  // namespace dpscope
