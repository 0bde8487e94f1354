// A simulated GPU: host memory against the preset's capacity, simulated stream clocks, roofline timer.
#include "dpscope/core/sim_device.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "dpscope/core/timing.hpp"
#include "host_memory.hpp"

namespace dpscope {

SimDevice::SimDevice(int index, const HardwarePreset& preset)
    : index_(index), preset_(preset), memory_(preset.memory_bytes) {}

void* SimDevice::allocate(uint64_t bytes, MemoryCategory category, bool with_data) {
  return detail::allocate_host(*this, memory_, bytes, category, with_data);
}

void SimDevice::deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept {
  detail::deallocate_host(*this, memory_, data, bytes, category);
}

void SimDevice::copy_from_host(void* dst, const void* host_src, uint64_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void SimDevice::copy_to_host(void* host_dst, const void* src, uint64_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void SimDevice::fill_zeros(void* dst, uint64_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
}

void SimDevice::copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) {
  DPS_CHECK(src_device.kind() != DeviceKind::kCuda, ErrorKind::kUnsupported,
            "copy from {} to {}: device memory must be copied to the host by its own device",
            src_device.name(), name());
  if (bytes > 0) std::memmove(dst, src, bytes);
}

int64_t SimDevice::advance(StreamKind stream, int64_t dur_ns) {
  DPS_ASSERT(dur_ns >= 0, "negative duration {} ns on {}", dur_ns, name());
  int64_t& clock = clock_ns_[static_cast<size_t>(stream)];
  const int64_t start = clock;
  clock += dur_ns;
  return start;
}

void SimDevice::wait_until(StreamKind stream, int64_t ts_ns) {
  int64_t& clock = clock_ns_[static_cast<size_t>(stream)];
  clock = std::max(clock, ts_ns);
}

int64_t SimDevice::synchronize() {
  const int64_t latest = *std::max_element(clock_ns_.begin(), clock_ns_.end());
  clock_ns_.fill(latest);
  host_ns_ = std::max(host_ns_, latest);
  return latest;
}

TimedSpan SimDevice::timer_end(StreamKind stream, const Event& /*begin*/, KernelCost cost) {
  if (preset_.host_issue_ns > 0.0) {
    host_ns_ += static_cast<int64_t>(std::llround(preset_.host_issue_ns));
    wait_until(stream, host_ns_);
  }
  const int64_t dur_ns = kernel_time_ns(preset_, cost);
  return {.start_ns = advance(stream, dur_ns), .dur_ns = dur_ns};
}

}  // namespace dpscope
