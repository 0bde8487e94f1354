// CpuDevice: the host as a device. Memory is host memory (unlimited, accounted by category);
// streams have no modelled time: every clock reads the wall clock (nanoseconds since the process's
// trace origin), waits are already satisfied (the host runs in order), and the kernel timer
// measures wall time.
//
// `shared` marks the process's one shared instance (Device::cpu()): it has no trace context, so
// runs and threads share nothing mutable through it but its thread-safe memory accounting.
#pragma once

#include "dpscope/core/device_impl.hpp"
#include "dpscope/core/memory_accounting.hpp"

namespace dpscope {

class CpuDevice final : public DeviceImpl {
 public:
  explicit CpuDevice(bool shared) : shared_(shared) {}

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  int index() const override { return -1; }
  const HardwarePreset* hardware() const override { return nullptr; }

  void* allocate(uint64_t bytes, MemoryCategory category, bool with_data) override;
  void deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept override;
  MemoryStats memory() const override { return memory_.stats(); }

  void copy_from_host(void* dst, const void* host_src, uint64_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, uint64_t bytes) override;
  void fill_zeros(void* dst, uint64_t bytes) override;
  void copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) override;

  int64_t clock_ns(StreamKind stream) const override;
  int64_t advance(StreamKind stream, int64_t dur_ns) override;
  void wait_until(StreamKind /*stream*/, int64_t /*ts_ns*/) override {}
  Event record(StreamKind stream) override;
  void wait(StreamKind /*stream*/, const Event& /*event*/) override {}
  int64_t elapsed_ns(const Event& start, const Event& end) const override { return end.ts_ns - start.ts_ns; }
  int64_t synchronize() override;

  Event timer_begin(StreamKind stream) override { return record(stream); }
  TimedSpan timer_end(StreamKind stream, const Event& begin, KernelCost cost) override;

  TraceContext* trace_context() override { return shared_ ? nullptr : &context_; }

 private:
  const bool shared_;
  MemoryAccounting memory_;
  TraceContext context_;
};

// Wall nanoseconds since the process's trace origin (the first call): the cpu's clock.
int64_t wall_ns_since_origin();
// The trace origin on std::chrono::steady_clock, in nanoseconds since its epoch (for timestamps
// taken on that clock elsewhere, such as CUPTI's records).
int64_t trace_origin_steady_ns();

}  // namespace dpscope
