// trace_grad_values(): the first few values and the L2 norm of a gradient as a `values` trace event,
// so lessons can show averaging with numbers. DataParallel (local / after reduce-add) and DDP
// (before / after all-reduce) use it. Costs one pointer test when no tracer is attached.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <string_view>

#include "dpscope/trace/recorder.hpp"

namespace dpscope::detail {

inline constexpr size_t kTracedGradValues = 4;

inline void trace_grad_values(const Device& device, int param, ValuesWhen when, const float* data,
                              int64_t numel) {
  TraceSink* tracer = device.tracer();
  if (tracer == nullptr || data == nullptr) return;
  double sum = 0.0;
  for (int64_t i = 0; i < numel; ++i) sum += static_cast<double>(data[i]) * data[i];
  const size_t n = std::min<size_t>(kTracedGradValues, static_cast<size_t>(numel));
  tracer->values(device, device.clock_ns(StreamKind::kCompute),
                 {.name = EventName::kGrad,
                  .param = param,
                  .when = when,
                  .values = std::span<const float>(data, n),
                  .norm = std::sqrt(sum)});
}

}  // namespace dpscope::detail
