// The timing model of a simulated GPU, and KernelScope, through which every op is timed and traced.
//
//   kernel   = launch_latency + max(flops / peak_flops, bytes / memory_bandwidth)   (roofline)
//   transfer = link_latency + bytes / link_bandwidth                                 (alpha-beta)
//
// A KernelScope times one kernel through its device's timer (DeviceImpl::timer_begin/timer_end):
// on a sim device it charges the model's time to a stream's simulated clock; on the cpu device it
// measures wall time; on cuda it records two events (the span is emitted once they completed).
// Either way it emits one trace span when a tracer is attached, and costs one pointer test when
// none is.
#pragma once

#include <cstdint>
#include <string_view>

#include "dpscope/core/device.hpp"
#include "dpscope/core/kernel_cost.hpp"

namespace dpscope {

// Simulated duration of one kernel on `preset`, rounded to whole nanoseconds.
int64_t kernel_time_ns(const HardwarePreset& preset, KernelCost cost);

// Simulated duration of moving `bytes` over `link`.
int64_t transfer_time_ns(const LinkSpec& link, uint64_t bytes);

class KernelScope {
 public:
  // `name` must outlive the scope (modules keep their span names); `device` may be a temporary.
  KernelScope(const Device& device, std::string_view name, KernelCost cost,
              StreamKind stream = StreamKind::kCompute);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  Device device_;  // a handle (shared ownership), so temporaries like Device::cpu() are safe
  std::string_view name_;
  KernelCost cost_;
  StreamKind stream_;
  Event begin_;
};

}  // namespace dpscope
