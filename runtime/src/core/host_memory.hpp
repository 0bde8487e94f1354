// Host buffers for the device kinds whose memory is host memory (cpu, and sim, which simulates a
// GPU's timing but keeps its data on the host). Private to core.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "dpscope/base/error.hpp"
#include "dpscope/base/format_bytes.hpp"
#include "dpscope/core/memory_accounting.hpp"

namespace dpscope::detail {

// Accounts `bytes` on `accounting` (which throws the device's OOM past capacity), then returns a
// 64-byte aligned host buffer (BLAS and vectorized loops stay on their fast paths), or nullptr
// without data.
inline void* allocate_host(const DeviceImpl& device, MemoryAccounting& accounting, uint64_t bytes,
                           MemoryCategory category, bool with_data) {
  accounting.reserve(device, bytes, category);
  if (!with_data || bytes == 0) return nullptr;
  const uint64_t rounded = (bytes + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, rounded);
  if (data == nullptr) {
    accounting.release(device, bytes, category);
    throw Error(ErrorKind::kOutOfMemory,
                fmt::format("host out of memory allocating {} for {}", format_bytes(bytes), device.name()));
  }
  return data;
}

inline void deallocate_host(const DeviceImpl& device, MemoryAccounting& accounting, void* data,
                            uint64_t bytes, MemoryCategory category) noexcept {
  std::free(data);
  accounting.release(device, bytes, category);
}

}  // namespace dpscope::detail
