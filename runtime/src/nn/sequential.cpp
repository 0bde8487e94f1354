// Sequential container and the MLP factory (see nn/sequential.hpp).
#include "dpscope/nn/sequential.hpp"

#include <algorithm>
#include <charconv>
#include <random>

#include "dpscope/nn/activation.hpp"
#include "dpscope/nn/linear.hpp"

namespace dpscope {

Sequential::Sequential() { set_input_requires_grad(false); }

Module& Sequential::add(std::unique_ptr<Module> module) {
  DPS_CHECK(module != nullptr, ErrorKind::kInvalidArgument, "Sequential::add: null module");
  Module& child = *module;
  modules_.push_back(std::move(module));
  register_child(std::to_string(modules_.size() - 1), child);
  return child;
}

Module& Sequential::operator[](size_t i) {
  DPS_CHECK(i < modules_.size(), ErrorKind::kInvalidArgument,
            "Sequential: index {} out of range for {} modules", i, modules_.size());
  return *modules_[i];
}

const Module& Sequential::operator[](size_t i) const {
  DPS_CHECK(i < modules_.size(), ErrorKind::kInvalidArgument,
            "Sequential: index {} out of range for {} modules", i, modules_.size());
  return *modules_[i];
}

// A traced run's memory counter after every layer, forward and backward: activations pile up
// layer by layer in forward, and in backward gradients appear while activations are freed, as a
// profiler's memory timeline shows (one counter per phase would show neither). Layer detail, like
// kernels: a sampled trace has it on its sampled steps only. No tracer: a pointer test per layer.
Tensor Sequential::forward_impl(const Tensor& input) {
  Tensor x = input;
  for (auto& module : modules_) {
    x = module->forward(x);
    if (x.device().traces_kernels()) x.device().trace_memory();
  }
  return x;
}

Tensor Sequential::backward_impl(const Tensor& grad_output, bool need_input_grad) {
  Tensor grad = grad_output;
  for (size_t i = modules_.size(); i-- > 0;) {
    // Only the first layer's input gradient is optional: every other one feeds the layer before.
    grad = modules_[i]->backward(grad, i == 0 ? need_input_grad : true);
    if (grad_output.device().traces_kernels()) grad_output.device().trace_memory();
  }
  return need_input_grad ? grad : Tensor();
}

std::unique_ptr<Module> Sequential::clone_impl(const Device* device) const {
  auto copy = std::make_unique<Sequential>();
  for (const auto& module : modules_) copy->add(device != nullptr ? module->clone(*device) : module->clone());
  return copy;
}

std::vector<int64_t> Sequential::parse_mlp_spec(const std::string& spec) {
  constexpr const char* kHint = "expected layer sizes joined by '-', like 784-512-10";
  std::vector<int64_t> sizes;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(spec.find('-', begin), spec.size());
    const char* first = spec.data() + begin;
    const char* last = spec.data() + end;
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(first, last, value);
    DPS_CHECK(first != last && ec == std::errc() && ptr == last, ErrorKind::kInvalidArgument,
              "invalid model spec '{}': '{}' is not a layer size; {}", spec, std::string(first, last), kHint);
    DPS_CHECK(value > 0, ErrorKind::kInvalidArgument,
              "invalid model spec '{}': layer size {} must be positive; {}", spec, value, kHint);
    sizes.push_back(value);
    if (end == spec.size()) break;
    begin = end + 1;
  }
  DPS_CHECK(sizes.size() >= 2, ErrorKind::kInvalidArgument,
            "invalid model spec '{}': needs at least an input and an output size; {}", spec, kHint);
  return sizes;
}

std::unique_ptr<Sequential> Sequential::mlp(const std::string& spec, const Device& device, uint64_t seed) {
  const std::vector<int64_t> sizes = parse_mlp_spec(spec);
  std::mt19937 generator(static_cast<std::mt19937::result_type>(seed & 0xffffffffu));
  auto model = std::make_unique<Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    if (i > 0) model->emplace<ReLU>();
    model->add(std::make_unique<Linear>(sizes[i], sizes[i + 1], device, generator));
  }
  return model;
}

std::unique_ptr<Sequential> Sequential::mlp_timing_only(const std::string& spec, const Device& device) {
  const std::vector<int64_t> sizes = parse_mlp_spec(spec);
  auto model = std::make_unique<Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    if (i > 0) model->emplace<ReLU>();
    model->add(Linear::timing_only(sizes[i], sizes[i + 1], device));
  }
  return model;
}

}  // namespace dpscope
