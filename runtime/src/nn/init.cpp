// PyTorch-exact uniform and Kaiming-uniform initialisation (see nn/init.hpp).
#include "dpscope/nn/init.hpp"

#include <cmath>
#include <vector>

namespace dpscope {

void init_uniform(Tensor& tensor, double from, double to, std::mt19937& generator) {
  DPS_CHECK(tensor.dtype() == DType::kF32, ErrorKind::kInvalidArgument,
            "init_uniform: expected float32, got {}", to_string(tensor.dtype()));
  // PyTorch casts the bounds to the tensor's dtype, subtracts them in float, and does the rest in
  // double (the CPU accumulate type of float) before rounding the result to float.
  const float from_f = static_cast<float>(from);
  const float to_f = static_cast<float>(to);
  const double range = static_cast<double>(to_f - from_f);
  constexpr uint32_t kMask = (1u << 24) - 1;
  constexpr double kDivisor = 1.0 / static_cast<double>(1u << 24);
  // Drawn on the host, then copied through the device (a cuda tensor's memory is not the host's).
  std::vector<float> values(static_cast<size_t>(tensor.numel()));
  for (float& value : values) {
    const double x = static_cast<double>(static_cast<uint32_t>(generator()) & kMask) * kDivisor;
    value = static_cast<float>(x * range + static_cast<double>(from_f));
  }
  if (!values.empty()) tensor.device().impl().copy_from_host(tensor.f32(), values.data(), tensor.nbytes());
}

void init_kaiming_uniform(Tensor& tensor, double a, std::mt19937& generator) {
  DPS_CHECK(tensor.dim() >= 2, ErrorKind::kInvalidArgument,
            "init_kaiming_uniform: fan in can not be computed for a tensor of shape {}",
            shape_to_string(tensor.shape()));
  const int64_t fan_in = tensor.numel() / tensor.size(0);
  // Same operations, in the same order and precision, as torch.nn.init (Python floats are doubles).
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double std_dev = gain / std::sqrt(static_cast<double>(fan_in));
  const double bound = std::sqrt(3.0) * std_dev;
  init_uniform(tensor, -bound, bound, generator);
}

}  // namespace dpscope
