// trace_grad_values(): the first few values and the L2 norm of a gradient as a `values` trace event,
// so lessons can show averaging with numbers. DataParallel (local / after reduce-add) and DDP
// (before / after all-reduce) use it. Costs one pointer test when no tracer is attached.
#pragma once

#include <algorithm>
#include <array>
#include <span>

#include "dpscope/core/trace_sink.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::detail {

inline constexpr size_t kTracedGradValues = 4;

// `grad` is a float32 tensor with data (a parameter's .grad, or its view in a bucket).
inline void trace_grad_values(const Device& device, int param, ValuesWhen when, const Tensor& grad) {
  TraceSink* tracer = device.tracer();
  if (tracer == nullptr) return;
  const size_t n = std::min<size_t>(kTracedGradValues, static_cast<size_t>(grad.numel()));
  // The first values, read through the device (a cuda gradient lives in device memory).
  std::array<float, kTracedGradValues> head{};
  grad.device().impl().copy_to_host(head.data(), grad.f32(), n * sizeof(float));
  tracer->values(device, device.clock_ns(StreamKind::kCompute),
                 {.name = EventName::kGrad,
                  .param = param,
                  .when = when,
                  .values = std::span<const float>(head.data(), n),
                  .norm = kernels::l2_norm(grad)});
}

}  // namespace dpscope::detail
