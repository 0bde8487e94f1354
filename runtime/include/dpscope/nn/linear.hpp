// Linear: y = x W^T + b, the layer of every MLP dpscope trains (lessons 01-06).
//
// Parameters: weight [out_features, in_features], then bias [out_features] (PyTorch order).
// Input [..., in_features] (leading dimensions are flattened into a batch of B rows), output
// [..., out_features]. Matrix products run on OpenBLAS (cblas_sgemm); parameters and activations
// without data (timing-only mode) are timed but not computed.
//
// Kernels, their trace span names and their roofline cost (4-byte floats; B rows, I = in, O = out;
// "bytes" counts memory read plus written):
//   "forward <name>"                 flops 2*B*I*O + B*O   bytes 4*(B*I + O*I + O + B*O)
//   "backward <name> grad_bias"      flops B*O             bytes 4*(B*O + 2*O)
//   "backward <name> grad_weight"    flops 2*B*I*O         bytes 4*(B*O + B*I + 2*O*I)
//   "backward <name> grad_input"     flops 2*B*I*O         bytes 4*(B*O + O*I + B*I)
// where <name> is display_name() ("0.Linear"). Backward produces, in order, the bias gradient,
// the weight gradient (each followed by its grad-ready hooks) and, if needed, the input gradient.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dpscope/nn/module.hpp"

namespace dpscope {

class Linear : public Module {
 public:
  // Parameters on `device`, initialised like torch.nn.Linear: weight by kaiming_uniform(a=sqrt(5)),
  // bias by U(-1/sqrt(in), 1/sqrt(in)), drawn from `generator` in that order (nn/init.hpp): with
  // std::mt19937(seed) the values equal PyTorch's after torch.manual_seed(seed).
  Linear(int64_t in_features, int64_t out_features, const Device& device, std::mt19937& generator,
         bool bias = true);
  // Timing-only: parameters with shapes and memory accounting but no data.
  static std::unique_ptr<Linear> timing_only(int64_t in_features, int64_t out_features, const Device& device,
                                             bool bias = true);

  const char* type_name() const override { return "Linear"; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  bool has_bias() const { return has_bias_; }
  Parameter& weight() { return weight_; }
  const Parameter& weight() const { return weight_; }
  // nullptr when built without bias.
  Parameter* bias() { return has_bias_ ? &bias_ : nullptr; }
  const Parameter* bias() const { return has_bias_ ? &bias_ : nullptr; }

 protected:
  Tensor forward_impl(const Tensor& input) override;
  Tensor backward_impl(const Tensor& grad_output, bool need_input_grad) override;
  std::unique_ptr<Module> clone_impl(const Device* device) const override;
  void release_saved() override { input_ = Tensor(); }
  void on_renamed() override;

 private:
  // Registers the given (weight, bias) tensors as parameters.
  Linear(int64_t in_features, int64_t out_features, bool bias, std::pair<Tensor, Tensor> tensors);

  int64_t in_features_;
  int64_t out_features_;
  bool has_bias_;
  Parameter weight_;
  Parameter bias_;
  Tensor input_;                     // saved by forward: [..., in_features]
  std::vector<float> bias_scratch_;  // [out_features]: dy summed over rows, before accumulating
  std::string span_forward_;
  std::string span_grad_bias_;
  std::string span_grad_weight_;
  std::string span_grad_input_;
};

}  // namespace dpscope
