// ForwardingDevice: a test double of the device interface that hands every call to a simulated
// device it owns. Tests derive from it and override only what they observe or fake (counting
// allocations and copies, reporting another device kind) — one place to follow DeviceImpl.
#pragma once

#include <cstdint>

#include "dpscope/core/device_impl.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/core/sim_device.hpp"
#include "support/presets.hpp"

namespace dpscope::testing {

class ForwardingDevice : public DeviceImpl {
 public:
  explicit ForwardingDevice(int index = 0, const std::string& preset = "h100-sxm")
      : inner_(index, roofline_preset(preset)) {}

  DeviceKind kind() const override { return inner_.kind(); }
  int index() const override { return inner_.index(); }
  const HardwarePreset* hardware() const override { return inner_.hardware(); }
  void* allocate(uint64_t bytes, MemoryCategory category, bool with_data) override {
    return inner_.allocate(bytes, category, with_data);
  }
  void deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept override {
    inner_.deallocate(data, bytes, category);
  }
  MemoryStats memory() const override { return inner_.memory(); }
  void copy_from_host(void* dst, const void* src, uint64_t bytes) override {
    inner_.copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, uint64_t bytes) override {
    inner_.copy_to_host(dst, src, bytes);
  }
  void fill_zeros(void* dst, uint64_t bytes) override { inner_.fill_zeros(dst, bytes); }
  void copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) override {
    inner_.copy_from_device(dst, src_device, src, bytes);
  }
  int64_t clock_ns(StreamKind s) const override { return inner_.clock_ns(s); }
  int64_t advance(StreamKind s, int64_t dur_ns) override { return inner_.advance(s, dur_ns); }
  void wait_until(StreamKind s, int64_t ts_ns) override { inner_.wait_until(s, ts_ns); }
  Event record(StreamKind s) override { return inner_.record(s); }
  void wait(StreamKind s, const Event& e) override { inner_.wait(s, e); }
  int64_t elapsed_ns(const Event& a, const Event& b) const override { return inner_.elapsed_ns(a, b); }
  int64_t synchronize() override { return inner_.synchronize(); }
  Event timer_begin(StreamKind s) override { return inner_.timer_begin(s); }
  TimedSpan timer_end(StreamKind s, const Event& begin, KernelCost cost) override {
    return inner_.timer_end(s, begin, cost);
  }
  TraceContext* trace_context() override { return inner_.trace_context(); }

 protected:
  SimDevice inner_;
};

}  // namespace dpscope::testing
