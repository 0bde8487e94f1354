// Roofline kernel costs, alpha-beta transfer costs, and KernelScope.
#include "dpscope/core/timing.hpp"

#include <algorithm>
#include <cmath>

#include "dpscope/core/trace_sink.hpp"

namespace dpscope {

int64_t kernel_time_ns(const HardwarePreset& preset, KernelCost cost) {
  const double compute_s = cost.flops / preset.peak_flops;
  const double memory_s = cost.bytes / preset.mem_bandwidth_bytes_per_s;
  return static_cast<int64_t>(std::llround(preset.launch_latency_ns + std::max(compute_s, memory_s) * 1e9));
}

int64_t transfer_time_ns(const LinkSpec& link, uint64_t bytes) {
  return static_cast<int64_t>(
      std::llround(link.latency_ns + static_cast<double>(bytes) / link.bandwidth_bytes_per_s * 1e9));
}

KernelScope::KernelScope(const Device& device, std::string_view name, KernelCost cost, StreamKind stream)
    : device_(device), name_(name), cost_(cost), stream_(stream) {
  if (!device_.is_simulated()) wall_start_ = std::chrono::steady_clock::now();
}

KernelScope::~KernelScope() {
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  if (const HardwarePreset* hw = device_.hardware(); hw != nullptr && device_.is_simulated()) {
    dur_ns = kernel_time_ns(*hw, cost_);
    start_ns = device_.advance(stream_, dur_ns);
  } else {
    dur_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - wall_start_)
            .count();
    start_ns = device_.clock_ns(stream_) - dur_ns;
  }
  if (TraceSink* tracer = device_.tracer()) {
    tracer->kernel_span(device_, stream_, name_, start_ns, dur_ns, cost_);
  }
}

}  // namespace dpscope
