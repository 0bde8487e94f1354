// The host as a device: host memory, wall-clock streams and timer.
#include "dpscope/core/cpu_device.hpp"

#include <chrono>
#include <cstring>

#include "host_memory.hpp"

namespace dpscope {

namespace {
// Immutable once initialised: the origin every cpu timestamp is measured from.
std::chrono::steady_clock::time_point origin() {
  static const auto origin = std::chrono::steady_clock::now();
  return origin;
}
}  // namespace

int64_t wall_ns_since_origin() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin())
      .count();
}

int64_t trace_origin_steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(origin().time_since_epoch()).count();
}

void* CpuDevice::allocate(uint64_t bytes, MemoryCategory category, bool with_data) {
  return detail::allocate_host(*this, memory_, bytes, category, with_data);
}

void CpuDevice::deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept {
  detail::deallocate_host(*this, memory_, data, bytes, category);
}

void CpuDevice::copy_from_host(void* dst, const void* host_src, uint64_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}

void CpuDevice::copy_to_host(void* host_dst, const void* src, uint64_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}

void CpuDevice::fill_zeros(void* dst, uint64_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
}

void CpuDevice::copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) {
  DPS_CHECK(src_device.kind() != DeviceKind::kCuda, ErrorKind::kUnsupported,
            "copy from {} to cpu: device memory must be copied to the host by its own device",
            src_device.name());
  if (bytes > 0) std::memmove(dst, src, bytes);
}

int64_t CpuDevice::clock_ns(StreamKind /*stream*/) const { return wall_ns_since_origin(); }

int64_t CpuDevice::advance(StreamKind /*stream*/, int64_t dur_ns) { return wall_ns_since_origin() - dur_ns; }

Event CpuDevice::record(StreamKind stream) {
  return Event{.ts_ns = wall_ns_since_origin(), .stream = stream};
}

int64_t CpuDevice::synchronize() { return wall_ns_since_origin(); }

TimedSpan CpuDevice::timer_end(StreamKind /*stream*/, const Event& begin, KernelCost /*cost*/) {
  const int64_t end_ns = wall_ns_since_origin();
  return {.start_ns = begin.ts_ns, .dur_ns = end_ns - begin.ts_ns};
}

}  // namespace dpscope
