// first_non_finite (io/finite_values.hpp).
#include "dpscope/io/finite_values.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

namespace dpscope {

std::optional<NonFiniteValue> first_non_finite(const Tensor& t) {
  if (!t.defined() || !t.has_data() || t.dtype() != DType::kF32) return std::nullopt;
  // Host-backed tensors (cpu, sim) are read where they are; a cuda tensor is copied to the host.
  const Tensor host = t.device().kind() == DeviceKind::kCuda ? t.to(Device::cpu()) : t;
  const float* values = host.f32();
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(values[i])) continue;
    // The flat index as one index per dimension, last dimension fastest.
    std::vector<int64_t> index(host.shape().size());
    int64_t rest = i;
    for (size_t d = index.size(); d-- > 0;) {
      const int64_t extent = host.shape()[d];
      index[d] = rest % extent;
      rest /= extent;
    }
    return NonFiniteValue{
        .flat_index = i, .value = values[i], .position = fmt::format("[{}]", fmt::join(index, ", "))};
  }
  return std::nullopt;
}

}  // namespace dpscope
