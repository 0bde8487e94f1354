// Optimizer base: parameter bookkeeping, the timed and traced step, and state (de)serialisation.
#include "dpscope/optim/optimizer.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "dpscope/core/trace_sink.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope {

namespace {

Device host_of(const Device& device) { return device.kind() == DeviceKind::kCpu ? device : Device::cpu(); }

}  // namespace

std::string python_float(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".ein") == std::string::npos) text += ".0";
  return text;
}

Optimizer::Optimizer(std::vector<Parameter*> params, std::vector<SlotSpec> slots)
    : params_(std::move(params)), slots_(std::move(slots)) {
  DPS_CHECK(!params_.empty(), ErrorKind::kInvalidArgument, "optimizer got an empty parameter list");
  std::unordered_set<const Parameter*> seen;
  for (const Parameter* p : params_) {
    DPS_CHECK(p != nullptr, ErrorKind::kInvalidArgument, "optimizer got a null parameter");
    DPS_CHECK(seen.insert(p).second, ErrorKind::kInvalidArgument, "optimizer got parameter {} more than once",
              p->name);
  }
  state_.assign(params_.size(), std::vector<Tensor>(slots_.size()));
  span_names_.assign(params_.size(), std::string());
  span_params_.assign(params_.size(), std::string());
}

std::vector<std::string> Optimizer::slot_names() const {
  std::vector<std::string> names;
  for (const SlotSpec& s : slots_) names.push_back(s.name);
  return names;
}

Tensor Optimizer::make_slot(const Parameter& param, size_t slot) const {
  // A scalar slot (Adam's step) lives on the host, as in PyTorch: the parameter's own device when
  // that is a cpu (so a run's memory counters include it), else the shared cpu.
  if (slots_[slot].scalar)
    return Tensor::zeros({}, host_of(param.data.device()), MemoryCategory::kOptimizerState);
  return param.data.has_data()
             ? Tensor::zeros(param.data.shape(), param.data.device(), MemoryCategory::kOptimizerState)
             : Tensor::meta(param.data.shape(), param.data.device(), MemoryCategory::kOptimizerState);
}

void Optimizer::step() {
  // Every device the step runs on gets one "optimizer.step" span around its kernels and, while
  // traced, the phase kOptimizer (the trace context is only touched on traced devices: the cpu
  // device is shared by host threads). `indices` are the device's parameters to update, in order.
  struct DeviceStep {
    Device device;
    Phase saved_phase;
    int64_t start_ns;
    std::vector<size_t> indices;
  };
  // Every parameter is checked before any is updated.
  for (size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = *params_[i];
    if (!p.grad.defined()) continue;
    check_same_device(p.data, p.grad);
    DPS_CHECK(p.grad.shape() == p.data.shape(), ErrorKind::kInvalidArgument,
              "{}.step: gradient of {} has shape {}, the parameter {}", type_name(), p.name,
              shape_to_string(p.grad.shape()), shape_to_string(p.data.shape()));
  }
  std::vector<DeviceStep> devices;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = *params_[i];
    if (!p.grad.defined()) continue;
    const Device& device = p.data.device();
    auto it =
        std::find_if(devices.begin(), devices.end(), [&](const DeviceStep& d) { return d.device == device; });
    if (it == devices.end()) {
      devices.push_back({device, device.phase(), 0, {}});
      if (device.tracer() != nullptr) device.set_phase(Phase::kOptimizer);
      devices.back().start_ns = device.clock_ns(StreamKind::kCompute);
      it = devices.end() - 1;
    }
    it->indices.push_back(i);
  }
  try {
    for (const DeviceStep& d : devices) {
      if (d.device.kind() == DeviceKind::kCuda) {
        // One fused launch for the device's parameters, timed as one kernel.
        if (fused_span_name_.empty()) fused_span_name_ = fmt::format("optimizer {} fused", type_name());
        KernelCost cost;
        for (size_t i : d.indices) {
          const KernelCost one = update_cost(params_[i]->data.numel());
          cost.flops += one.flops;
          cost.bytes += one.bytes;
        }
        KernelScope kernel(d.device, fused_span_name_, cost);
        update(d.indices);
        continue;
      }
      for (const size_t& i : d.indices) {
        const Parameter& p = *params_[i];
        if (span_params_[i] != p.name) {  // built once, and again if a wrapper renamed the parameter
          span_params_[i] = p.name;
          span_names_[i] = fmt::format("optimizer {} {}", type_name(), p.name);
        }
        KernelScope kernel(d.device, span_names_[i], update_cost(p.data.numel()));
        update(std::span<const size_t>(&i, 1));
      }
    }
  } catch (...) {
    for (const DeviceStep& d : devices)
      if (d.device.tracer() != nullptr) d.device.set_phase(d.saved_phase);
    throw;
  }
  for (const DeviceStep& d : devices) {
    if (TraceSink* tracer = d.device.tracer()) {
      const int64_t end_ns = d.device.clock_ns(StreamKind::kCompute);
      const std::string name = optimizer_step_span_name(type_name());
      tracer->span(d.device, {.stream = StreamKind::kCompute,
                              .cat = SpanCategory::kOptimizer,
                              .name = name,
                              .ts_ns = d.start_ns,
                              .dur_ns = end_ns - d.start_ns});
      d.device.set_phase(d.saved_phase);
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Parameter* p : params_) {
    if (!p->grad.defined()) continue;
    if (set_to_none) {
      p->grad = Tensor();
    } else if (p->grad.has_data()) {
      kernels::fill(p->grad, 0.0f);
    }
  }
}

StateDict Optimizer::state_tensors() const {
  StateDict out;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (size_t s = 0; s < slots_.size(); ++s) {
      if (state_[i][s].defined()) out.emplace_back(params_[i]->name + "." + slots_[s].name, state_[i][s]);
    }
  }
  return out;
}

void Optimizer::load_state_tensors(const StateDict& state) {
  std::unordered_map<std::string, size_t> param_index;
  for (size_t i = 0; i < params_.size(); ++i) param_index.emplace(params_[i]->name, i);

  std::vector<std::vector<Tensor>> loaded(params_.size(), std::vector<Tensor>(slots_.size()));
  for (const auto& [key, tensor] : state) {
    // "<param name>.<slot>": the slot is the part after the last '.'.
    const size_t dot = key.rfind('.');
    const std::string param_name = dot == std::string::npos ? std::string() : key.substr(0, dot);
    const std::string slot_name = dot == std::string::npos ? key : key.substr(dot + 1);
    const auto slot_it =
        std::find_if(slots_.begin(), slots_.end(), [&](const SlotSpec& s) { return s.name == slot_name; });
    const auto param_it = param_index.find(param_name);
    DPS_CHECK(slot_it != slots_.end() && param_it != param_index.end(), ErrorKind::kInvalidArgument,
              "load_state_tensors: unexpected key \"{}\" for {} (expected <parameter name>.<{}>)", key,
              type_name(), fmt::join(slot_names(), "|"));
    const size_t i = param_it->second;
    const size_t s = static_cast<size_t>(slot_it - slots_.begin());
    DPS_CHECK(!loaded[i][s].defined(), ErrorKind::kInvalidArgument,
              "load_state_tensors: duplicate key \"{}\"", key);
    DPS_CHECK(tensor.defined() && tensor.dtype() == DType::kF32, ErrorKind::kInvalidArgument,
              "load_state_tensors: {} must be a float32 tensor", key);
    const Parameter& p = *params_[i];
    const Shape expected = slot_it->scalar ? Shape{} : p.data.shape();
    DPS_CHECK(tensor.shape() == expected, ErrorKind::kInvalidArgument,
              "load_state_tensors: size mismatch for {}: checkpoint {}, optimizer {}", key,
              shape_to_string(tensor.shape()), shape_to_string(expected));
    const Device target = slot_it->scalar ? host_of(p.data.device()) : p.data.device();
    // Always a copy the optimizer owns: updates must not write into the caller's tensors.
    loaded[i][s] = tensor.device() == target ? tensor.clone(MemoryCategory::kOptimizerState)
                                             : tensor.to(target, MemoryCategory::kOptimizerState);
  }
  std::swap(state_, loaded);
  try {
    for (size_t i = 0; i < params_.size(); ++i) check_loaded_state(i);
  } catch (...) {
    std::swap(state_, loaded);
    throw;
  }
}

}  // namespace dpscope
