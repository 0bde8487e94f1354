// Module: parameter registry, naming, forward/backward bookkeeping, hooks, state_dict.
#include "dpscope/nn/module.hpp"

#include <algorithm>
#include <unordered_map>

#include "dpscope/core/trace_sink.hpp"

namespace dpscope {

void HookHandle::remove() {
  if (module_ != nullptr) module_->remove_grad_ready_hook(id_);
  module_ = nullptr;
}

Module::~Module() = default;

std::string Module::path() const {
  return prefix_.empty() ? std::string() : prefix_.substr(0, prefix_.size() - 1);
}

std::string Module::display_name() const {
  return prefix_.empty() ? std::string(type_name()) : prefix_ + type_name();
}

Tensor Module::forward(const Tensor& input) {
  DPS_CHECK(input.defined(), ErrorKind::kInvalidArgument, "{}.forward: the input is an undefined tensor",
            display_name());
  for (Parameter* p : parameters()) p->used_in_last_forward = false;
  Tensor output = forward_impl(input);
  forward_pending_ = true;
  return output;
}

Tensor Module::backward(const Tensor& grad_output) { return backward(grad_output, input_requires_grad_); }

Tensor Module::backward(const Tensor& grad_output, bool need_input_grad) {
  DPS_CHECK(forward_pending_, ErrorKind::kInvalidArgument,
            "{}.backward: no forward() since the last backward(); saved activations are freed by backward() "
            "(PyTorch: \"Trying to backward through the graph a second time\")",
            display_name());
  DPS_CHECK(grad_output.defined(), ErrorKind::kInvalidArgument,
            "{}.backward: grad_output is an undefined tensor", display_name());
  Tensor grad_input = backward_impl(grad_output, need_input_grad);
  forward_pending_ = false;
  release_saved();
  return grad_input;
}

void Module::collect(std::vector<Parameter*>& out) const {
  for (const auto& [local, p] : own_params_) out.push_back(p);
  for (const auto& [name, child] : children_) child->collect(out);
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  collect(out);
  return out;
}

std::vector<const Parameter*> Module::parameters() const {
  std::vector<Parameter*> all;
  collect(all);
  return {all.begin(), all.end()};
}

int64_t Module::parameter_numel() const {
  int64_t n = 0;
  for (const Parameter* p : parameters()) n += p->data.numel();
  return n;
}

void Module::zero_grad(bool set_to_none) {
  for (Parameter* p : parameters()) {
    if (!p->grad.defined()) continue;
    if (set_to_none) {
      p->grad = Tensor();
    } else if (p->grad.has_data()) {
      p->grad.fill(0.0f);
    }
  }
}

void Module::to(const Device& device) {
  for (auto& [local, p] : own_params_) {
    p->data = p->data.to(device, MemoryCategory::kParameters);
    if (p->grad.defined()) p->grad = p->grad.to(device, MemoryCategory::kGradients);
  }
  for (auto& [name, child] : children_) child->to(device);
  release_saved();
  forward_pending_ = false;
}

std::unique_ptr<Module> Module::clone() const {
  std::unique_ptr<Module> copy = clone_impl(nullptr);
  copy->input_requires_grad_ = input_requires_grad_;
  return copy;
}

std::unique_ptr<Module> Module::clone(const Device& device) const {
  std::unique_ptr<Module> copy = clone_impl(&device);
  copy->input_requires_grad_ = input_requires_grad_;
  return copy;
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const Parameter* p : parameters()) out.emplace_back(p->name.substr(prefix_.size()), p->data);
  return out;
}

void Module::load_state_dict(const StateDict& state) {
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [key, tensor] : state) {
    DPS_CHECK(given.emplace(key, &tensor).second, ErrorKind::kInvalidArgument,
              "load_state_dict: duplicate key \"{}\" in state_dict", key);
  }
  const std::vector<Parameter*> params = parameters();
  std::vector<std::string> missing;
  std::vector<std::string> unexpected;
  for (Parameter* p : params) {
    if (!given.contains(p->name.substr(prefix_.size())))
      missing.push_back(fmt::format("\"{}\"", p->name.substr(prefix_.size())));
  }
  for (const auto& [key, tensor] : state) {
    const bool known = std::any_of(params.begin(), params.end(),
                                   [&](const Parameter* p) { return p->name.substr(prefix_.size()) == key; });
    if (!known) unexpected.push_back(fmt::format("\"{}\"", key));
  }
  if (!missing.empty() || !unexpected.empty()) {
    std::string message = "load_state_dict:";
    if (!missing.empty())
      message += fmt::format(" Missing key(s) in state_dict: {}.", fmt::join(missing, ", "));
    if (!unexpected.empty())
      message += fmt::format(" Unexpected key(s) in state_dict: {}.", fmt::join(unexpected, ", "));
    throw Error(ErrorKind::kInvalidArgument, message);
  }
  for (Parameter* p : params) {
    const std::string key = p->name.substr(prefix_.size());
    const Tensor& src = *given.at(key);
    DPS_CHECK(src.defined(), ErrorKind::kInvalidArgument, "load_state_dict: {} is an undefined tensor", key);
    DPS_CHECK(src.dtype() == p->data.dtype(), ErrorKind::kInvalidArgument,
              "load_state_dict: dtype mismatch for {}: checkpoint {}, model {}", key, to_string(src.dtype()),
              to_string(p->data.dtype()));
    DPS_CHECK(src.shape() == p->data.shape(), ErrorKind::kInvalidArgument,
              "load_state_dict: size mismatch for {}: checkpoint {}, model {}", key,
              shape_to_string(src.shape()), shape_to_string(p->data.shape()));
  }
  for (Parameter* p : params) {
    const Tensor& src = *given.at(p->name.substr(prefix_.size()));
    if (src.device() == p->data.device()) {
      p->data.copy_from(src);
    } else {
      p->data.copy_from(src.to(p->data.device(), MemoryCategory::kParameters));
    }
  }
}

HookHandle Module::register_grad_ready_hook(GradReadyHook hook) {
  DPS_CHECK(static_cast<bool>(hook), ErrorKind::kInvalidArgument, "register_grad_ready_hook: empty hook");
  const int64_t id = next_hook_id_++;
  hooks_.emplace_back(id, std::move(hook));
  return HookHandle(this, id);
}

bool Module::remove_grad_ready_hook(int64_t id) {
  const auto it = std::find_if(hooks_.begin(), hooks_.end(), [id](const auto& h) { return h.first == id; });
  if (it == hooks_.end()) return false;
  hooks_.erase(it);
  return true;
}

void Module::register_parameter(const std::string& local_name, Parameter& param) {
  own_params_.emplace_back(local_name, &param);
  param.name = prefix_ + local_name;
  reindex_root();
}

void Module::register_child(const std::string& name, Module& child) {
  DPS_ASSERT(child.parent_ == nullptr, "module {} already has a parent; clone() it to add it twice",
             child.display_name());
  DPS_ASSERT(&child != this, "a module cannot be its own child");
  child.parent_ = this;
  children_.emplace_back(name, &child);
  child.rename(prefix_ + name + ".");
  reindex_root();
}

void Module::rename(const std::string& prefix) {
  prefix_ = prefix;
  for (auto& [local, p] : own_params_) p->name = prefix_ + local;
  for (auto& [name, child] : children_) child->rename(prefix_ + name + ".");
  on_renamed();
}

void Module::reindex_root() {
  Module* root = this;
  while (root->parent_ != nullptr) root = root->parent_;
  int index = 0;
  for (Parameter* p : root->parameters()) p->index = index++;
}

bool ensure_grad(Parameter& param) {
  if (param.grad.defined()) return false;
  const Device& device = param.data.device();
  param.grad = param.data.has_data() ? Tensor::zeros(param.data.shape(), device, MemoryCategory::kGradients)
                                     : Tensor::meta(param.data.shape(), device, MemoryCategory::kGradients);
  return true;
}

void Module::grad_ready(Parameter& param) {
  const Device& device = param.data.device();
  if (TraceSink* tracer = device.tracer()) {
    tracer->instant(device, device.clock_ns(StreamKind::kCompute), GradReady{.param = param.index});
  }
  for (Module* m = this; m != nullptr; m = m->parent_) {
    for (auto& [id, hook] : m->hooks_) hook(param);
  }
}

}  // namespace dpscope
