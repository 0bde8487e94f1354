// Module and Parameter: the base of every layer (Linear, ReLU, Sequential) and of what DataParallel
// and DistributedDataParallel wrap.
//
// There is no autograd graph. A module runs forward() layer by layer, saving what its backward()
// needs, and backward() walks the layers in reverse. backward() ACCUMULATES into each parameter's
// grad (grad += ..., PyTorch semantics: DataParallel's reduce-add and DDP's no_sync() rely on it)
// and returns the gradient of its input.
//
// Gradient-ready hooks (register_grad_ready_hook) fire once per parameter per backward(), right
// after that parameter's gradient has been accumulated, in the order backward produces them: last
// layer first and, within a Linear, the bias before the weight (as PyTorch's autograd does). They
// fire after the kernel that produced the gradient has been charged, so on a simulated device the
// compute clock at hook time is the moment the gradient is ready. DDP's reducer hangs on them
// (lesson 04 shows buckets filling in this order). Each ready gradient is also traced as a
// `grad_ready` instant (args.param = the parameter's index).
//
// Names follow PyTorch's state_dict: a Linear's parameters are "weight" and "bias"; inside a
// Sequential they become "0.weight", "0.bias", "2.weight", ...; Parameter::index is the position
// in the root module's parameters().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dpscope/core/tensor.hpp"

namespace dpscope {

struct Parameter {
  std::string name;  // "0.weight": the state_dict key, relative to the root module
  int index = -1;    // position in the root module's parameters()
  Tensor data;       // MemoryCategory::kParameters
  Tensor grad;       // MemoryCategory::kGradients; undefined until the first backward()
  // Set by the forward() that read this parameter; cleared at the start of every forward() of a
  // module containing it. DDP's find_unused_parameters reads it.
  bool used_in_last_forward = false;
};

// Ordered (name, tensor) pairs: a module's state_dict() or an optimizer's state_tensors().
using StateDict = std::vector<std::pair<std::string, Tensor>>;

using GradReadyHook = std::function<void(Parameter&)>;

class Module;

// Makes `param.grad` ready for accumulation: when undefined, allocates it zero-filled on the
// parameter's device (MemoryCategory::kGradients; without data when the parameter has none) and
// returns true (a kernel may then overwrite instead of add). Layers, DataParallel's reduce-add and
// DDP's copy-back use it.
bool ensure_grad(Parameter& param);

// Returned by register_grad_ready_hook(); remove() unregisters the hook (like PyTorch's
// RemovableHandle). The handle must not outlive its module.
class HookHandle {
 public:
  HookHandle() = default;
  void remove();
  int64_t id() const { return id_; }

 private:
  friend class Module;
  HookHandle(Module* module, int64_t id) : module_(module), id_(id) {}
  Module* module_ = nullptr;
  int64_t id_ = -1;
};

class Module {
 public:
  virtual ~Module();
  // Modules are neither copyable nor movable: children point to their parent. Use clone().
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // "Linear", "ReLU", "Sequential".
  virtual const char* type_name() const = 0;
  // Where this module sits in its root: "" for a root, "0" for a Sequential's first child.
  std::string path() const;
  // "0.Linear" (or "Linear" for a root): the prefix of this module's trace span names.
  std::string display_name() const;

  // ---- forward / backward ----
  // Runs the layer on `input` and saves what backward() needs (activations are accounted as
  // MemoryCategory::kActivations on the input's device while saved).
  Tensor forward(const Tensor& input);
  // Accumulates the parameters' gradients and returns the gradient of the input, or an undefined
  // tensor when input gradients are not required (see set_input_requires_grad). Frees the saved
  // activations, so a second backward() needs a new forward() (as PyTorch without retain_graph).
  Tensor backward(const Tensor& grad_output);
  // Same, deciding per call whether the input gradient is computed.
  Tensor backward(const Tensor& grad_output, bool need_input_grad);
  // Whether backward(grad_output) computes the input gradient: true for layers, false for a
  // Sequential (its input is data, a leaf without requires_grad in PyTorch terms).
  void set_input_requires_grad(bool required) { input_requires_grad_ = required; }
  bool input_requires_grad() const { return input_requires_grad_; }

  // ---- parameters ----
  // Every parameter of this module and its children, in PyTorch's parameters() order.
  std::vector<Parameter*> parameters();
  std::vector<const Parameter*> parameters() const;
  // Total number of parameter elements.
  int64_t parameter_numel() const;
  // Sets every gradient to undefined (set_to_none, PyTorch's default) or to zero.
  void zero_grad(bool set_to_none = true);
  // Moves parameters (kParameters) and gradients (kGradients) to `device`, charging the copies.
  // Saved activations are dropped.
  void to(const Device& device);

  // A deep copy: parameters are copied (to `device` if given), gradients, hooks and saved
  // activations are not. DataParallel's replicate uses it.
  std::unique_ptr<Module> clone() const;
  std::unique_ptr<Module> clone(const Device& device) const;

  // ---- checkpoints ----
  // (name, parameter tensor) in parameters() order. The tensors share storage with the module.
  StateDict state_dict() const;
  // Copies `state` into the parameters (moving it to their device). Throws kInvalidArgument on a
  // missing or unexpected key, a dtype mismatch, or "load_state_dict: size mismatch for 0.weight:
  // checkpoint [512, 784], model [256, 784]"; nothing is copied when any check fails.
  void load_state_dict(const StateDict& state);

  // ---- hooks ----
  // `hook` fires for every parameter of this module (children included) when its gradient is
  // ready (see the header comment). Hooks must not register or remove hooks while firing.
  HookHandle register_grad_ready_hook(GradReadyHook hook);
  // Returns false when no hook has this id.
  bool remove_grad_ready_hook(int64_t id);

 protected:
  Module() = default;

  // The layer's math. forward_impl may assume a defined input; backward_impl is only called
  // after a forward() and must call grad_ready() for each parameter whose gradient it finished.
  virtual Tensor forward_impl(const Tensor& input) = 0;
  virtual Tensor backward_impl(const Tensor& grad_output, bool need_input_grad) = 0;
  // A copy of this module (parameters only) on `device`, or on the same device when null.
  virtual std::unique_ptr<Module> clone_impl(const Device* device) const = 0;
  // Drops saved activations (after backward, on to()).
  virtual void release_saved() {}
  // Called after the module's path changed (e.g. it was added to a Sequential): rebuild span names.
  virtual void on_renamed() {}

  // Registration, in the order parameters() lists them.
  void register_parameter(const std::string& local_name, Parameter& param);
  void register_child(const std::string& name, Module& child);
  const std::vector<std::pair<std::string, Module*>>& children() const { return children_; }

  // Fires the hooks of this module and its ancestors for `param` and traces `grad_ready`.
  void grad_ready(Parameter& param);

 private:
  void rename(const std::string& prefix);  // prefix "" or "0." / "0.1."
  void reindex_root();
  void collect(std::vector<Parameter*>& out) const;

  std::vector<std::pair<std::string, Parameter*>> own_params_;  // local name, parameter
  std::vector<std::pair<std::string, Module*>> children_;       // name ("0"), child (owned elsewhere)
  Module* parent_ = nullptr;
  std::string prefix_;  // "" for a root, "0." for a Sequential's first child
  std::vector<std::pair<int64_t, GradReadyHook>> hooks_;
  int64_t next_hook_id_ = 0;
  bool input_requires_grad_ = true;
  bool forward_pending_ = false;  // a forward() ran and its backward() did not yet
};

}  // namespace dpscope
