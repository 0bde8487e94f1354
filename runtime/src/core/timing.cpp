// Roofline kernel costs, alpha-beta transfer costs, and KernelScope (measured on cpu and cuda).
#include "dpscope/core/timing.hpp"

#include <algorithm>
#include <cmath>

#include "dpscope/core/cuda.hpp"
#include "dpscope/core/trace_sink.hpp"

namespace dpscope {

int64_t kernel_time_ns(const HardwarePreset& preset, KernelCost cost) {
  const double compute_s = cost.flops / (preset.peak_flops * preset.compute_efficiency);
  const double memory_s = cost.bytes / (preset.mem_bandwidth_bytes_per_s * preset.bandwidth_fraction);
  return static_cast<int64_t>(std::llround(preset.launch_latency_ns + std::max(compute_s, memory_s) * 1e9));
}

int64_t transfer_time_ns(const LinkSpec& link, uint64_t bytes) {
  return static_cast<int64_t>(
      std::llround(link.latency_ns + static_cast<double>(bytes) / link.bandwidth_bytes_per_s * 1e9));
}

KernelScope::KernelScope(const Device& device, std::string_view name, KernelCost cost, StreamKind stream)
    : device_(device),
      name_(name),
      cost_(cost),
      stream_(stream),
      begin_(device_.impl().timer_begin(stream)) {}

KernelScope::~KernelScope() {
  if (begin_.native != nullptr && device_.kind() == DeviceKind::kCuda) {
    // A traced cuda kernel: the device emits the measured span once its end event has completed,
    // so tracing does not wait for every kernel (core/cuda.hpp).
    cuda::defer_kernel_span(device_.impl(), stream_, name_, begin_, cost_);
    return;
  }
  const TimedSpan span = device_.impl().timer_end(stream_, begin_, cost_);  // sim: the timing model
  if (device_.traces_kernels()) {
    device_.tracer()->kernel_span(device_, stream_, name_, span.start_ns, span.dur_ns, cost_);
  }
}

}  // namespace dpscope
