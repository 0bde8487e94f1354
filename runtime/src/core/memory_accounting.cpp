// Memory accounting by category, peak tracking, and the CUDA-worded out-of-memory error.
#include "dpscope/core/memory_accounting.hpp"

#include <algorithm>

#include "dpscope/base/error.hpp"
#include "dpscope/base/format_bytes.hpp"

namespace dpscope {

uint64_t MemoryStats::in_use_bytes() const {
  uint64_t total = 0;
  for (uint64_t b : bytes) total += b;
  return total;
}

uint64_t MemoryStats::free_bytes() const {
  if (capacity_bytes == 0) return UINT64_MAX;
  const uint64_t used = in_use_bytes();
  return used >= capacity_bytes ? 0 : capacity_bytes - used;
}

void MemoryAccounting::reserve(const DeviceImpl& device, uint64_t bytes, MemoryCategory category) {
  std::lock_guard lock(mutex_);
  MemoryStats& m = stats_;
  if (m.capacity_bytes != 0 && bytes > m.free_bytes()) {
    throw Error(
        ErrorKind::kOutOfMemory,
        fmt::format("{} out of memory: tried to allocate {} for {}; {} free of {} "
                    "(parameters {}, gradients {}, optimizer state {}, activations {}, buffers {})",
                    device.name(), format_bytes(bytes), to_string(category), format_bytes(m.free_bytes()),
                    format_bytes(m.capacity_bytes), format_bytes(m.bytes[0]), format_bytes(m.bytes[1]),
                    format_bytes(m.bytes[2]), format_bytes(m.bytes[3]), format_bytes(m.bytes[4])));
  }
  m.bytes[static_cast<int>(category)] += bytes;
  m.peak_bytes = std::max(m.peak_bytes, m.in_use_bytes());
}

void MemoryAccounting::release(const DeviceImpl& device, uint64_t bytes, MemoryCategory category) {
  std::lock_guard lock(mutex_);
  uint64_t& slot = stats_.bytes[static_cast<int>(category)];
  DPS_ASSERT(slot >= bytes, "{}: releasing {} bytes of {} but only {} accounted", device.name(), bytes,
             to_string(category), slot);
  slot -= bytes;
}

MemoryStats MemoryAccounting::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace dpscope
