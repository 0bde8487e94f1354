// Parameter initialisation with PyTorch's exact CPU sampling, so that a model built from
// std::mt19937(seed) holds the same numbers as one built after torch.manual_seed(seed).
//
// PyTorch's CPU generator is a standard 32-bit Mersenne Twister; tensor.uniform_(from, to) on a
// float32 tensor draws one 32-bit word per element, in order, and maps it as
//   x = (word & (2^24 - 1)) * 2^-24;  value = float(x * double(float(to) - float(from)) + float(from))
// (aten DistributionsHelper.h / DistributionTemplates.h, 1.13). Used by Linear; checked against
// PyTorch by the nn parity test.
#pragma once

#include <random>

#include "dpscope/core/tensor.hpp"

namespace dpscope {

// Fills a float32 tensor with U(from, to) as PyTorch's tensor.uniform_(from, to) does.
void init_uniform(Tensor& tensor, double from, double to, std::mt19937& generator);

// PyTorch's init.kaiming_uniform_(tensor, a, mode="fan_in", nonlinearity="leaky_relu") for a
// [fan_out, fan_in] weight: bound = sqrt(3) * sqrt(2 / (1 + a^2)) / sqrt(fan_in), then
// init_uniform(-bound, bound). nn.Linear uses a = sqrt(5), giving bound = 1 / sqrt(fan_in).
void init_kaiming_uniform(Tensor& tensor, double a, std::mt19937& generator);

}  // namespace dpscope
