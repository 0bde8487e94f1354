// Sequential: a chain of modules, named by position like torch.nn.Sequential, so its state_dict
// keys ("0.weight", "0.bias", "2.weight", ...) match a PyTorch model's number for number.
//
// Sequential::mlp("784-512-10", device, seed) builds the CLI's --model: Linear layers with a ReLU
// between each pair (indices 0, 2, 4, ... are Linear), initialised as PyTorch does after
// torch.manual_seed(seed). backward() walks the children in reverse; by default it does not
// compute the gradient of the Sequential's own input (data, a leaf without requires_grad in
// PyTorch terms), which saves the first layer's grad_input product.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dpscope/nn/module.hpp"

namespace dpscope {

class Sequential : public Module {
 public:
  Sequential();

  // Appends `module` (named by its index) and returns it.
  Module& add(std::unique_ptr<Module> module);
  template <typename M, typename... Args>
  M& emplace(Args&&... args) {
    return static_cast<M&>(add(std::make_unique<M>(std::forward<Args>(args)...)));
  }
  size_t size() const { return modules_.size(); }
  Module& operator[](size_t i);
  const Module& operator[](size_t i) const;

  const char* type_name() const override { return "Sequential"; }

  // "784-512-10" -> {784, 512, 10}. Throws kInvalidArgument naming the spec: at least two sizes,
  // each a positive integer, joined by '-'.
  static std::vector<int64_t> parse_mlp_spec(const std::string& spec);
  // Linear(784, 512), ReLU, Linear(512, 10): parameters on `device`, drawn from
  // std::mt19937(seed) (the low 32 bits, as torch.manual_seed uses them).
  static std::unique_ptr<Sequential> mlp(const std::string& spec, const Device& device, uint64_t seed);
  // The same model with timing-only parameters (shapes and accounting, no data).
  static std::unique_ptr<Sequential> mlp_timing_only(const std::string& spec, const Device& device);

 protected:
  Tensor forward_impl(const Tensor& input) override;
  Tensor backward_impl(const Tensor& grad_output, bool need_input_grad) override;
  std::unique_ptr<Module> clone_impl(const Device* device) const override;

 private:
  std::vector<std::unique_ptr<Module>> modules_;
};

}  // namespace dpscope
