// SimDevice: a simulated GPU `sim:N`. Its data lives in host memory, accounted by category against
// the preset's capacity; each stream has a simulated clock in integer nanoseconds that the timing
// model (core/timing.hpp) advances: a kernel costs launch_latency + max(flops / peak, bytes / bw).
// Events are points on those clocks, so a wait moves one stream's clock to another's.
#pragma once

#include <array>

#include "dpscope/core/device_impl.hpp"
#include "dpscope/core/memory_accounting.hpp"

namespace dpscope {

class SimDevice final : public DeviceImpl {
 public:
  SimDevice(int index, const HardwarePreset& preset);

  DeviceKind kind() const override { return DeviceKind::kSim; }
  int index() const override { return index_; }
  const HardwarePreset* hardware() const override { return &preset_; }

  void* allocate(uint64_t bytes, MemoryCategory category, bool with_data) override;
  void deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept override;
  MemoryStats memory() const override { return memory_.stats(); }

  // Host memory underneath: plain copies (their simulated time is charged by Tensor::to()).
  void copy_from_host(void* dst, const void* host_src, uint64_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, uint64_t bytes) override;
  void fill_zeros(void* dst, uint64_t bytes) override;
  void copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) override;

  int64_t clock_ns(StreamKind stream) const override { return clock_ns_[static_cast<size_t>(stream)]; }
  int64_t advance(StreamKind stream, int64_t dur_ns) override;
  void wait_until(StreamKind stream, int64_t ts_ns) override;
  Event record(StreamKind stream) override { return Event{.ts_ns = clock_ns(stream), .stream = stream}; }
  void wait(StreamKind stream, const Event& event) override { wait_until(stream, event.ts_ns); }
  int64_t elapsed_ns(const Event& start, const Event& end) const override { return end.ts_ns - start.ts_ns; }
  int64_t synchronize() override;

  // The roofline model: the kernel starts when the stream is free and the host has issued it (a
  // calibrated preset's host_issue_ns per kernel, on this device's host clock), and lasts
  // kernel_time_ns(cost).
  Event timer_begin(StreamKind stream) override { return record(stream); }
  TimedSpan timer_end(StreamKind stream, const Event& begin, KernelCost cost) override;

  TraceContext* trace_context() override { return &context_; }

 private:
  const int index_;
  const HardwarePreset preset_;
  MemoryAccounting memory_;
  std::array<int64_t, kStreamCount> clock_ns_{};
  // When the host thread driving this device has issued its kernels so far: it runs ahead of the
  // streams (launches are asynchronous) and catches up at synchronize().
  int64_t host_ns_ = 0;
  TraceContext context_;
};

}  // namespace dpscope
