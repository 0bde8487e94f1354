// MemoryAccounting: a device's memory by category against its capacity, shared by every device
// kind so that peak, free and the OOM message read the same on cpu, sim and cuda.
// Thread semantics: every member is safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <mutex>

#include "dpscope/core/device_impl.hpp"

namespace dpscope {

class MemoryAccounting {
 public:
  // `capacity_bytes` 0: unlimited.
  explicit MemoryAccounting(uint64_t capacity_bytes = 0) { stats_.capacity_bytes = capacity_bytes; }

  // Reserves `bytes` in `category`. Past capacity it throws ErrorKind::kOutOfMemory, worded like
  // CUDA's OOM ("<device> out of memory: tried to allocate … for …; … free of … (by category)"),
  // and reserves nothing.
  void reserve(const DeviceImpl& device, uint64_t bytes, MemoryCategory category);
  // Gives back what reserve() took; releasing more than is accounted is a programming error.
  void release(const DeviceImpl& device, uint64_t bytes, MemoryCategory category);
  MemoryStats stats() const;

 private:
  mutable std::mutex mutex_;
  MemoryStats stats_;
};

}  // namespace dpscope
