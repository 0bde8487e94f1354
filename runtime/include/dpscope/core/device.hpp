// Device: the cheap, copyable handle to a device (`cpu`, `sim:N`, `cuda:N`) that the whole
// code base passes around as `const Device&`. It owns its implementation (core/device_impl.hpp)
// by shared pointer; the implementation holds the device's memory accounting, stream clocks and
// trace context.
//
// Equality: two handles are equal when they name the same device. Every cpu device is the same
// device (host memory), so tensors on the cpu meet whichever cpu instance made them; two sim:0
// devices made separately are distinct (as two simulated machines are).
//
// The cpu: `Device::cpu()` is the process's shared host device. It holds no trace context (so
// nothing mutable but thread-safe memory accounting is shared between runs and threads): a traced
// run makes its own with `Device::new_cpu()`, and attaching a tracer to the shared one is an error.
//
// Streams are values (`device.stream(StreamKind::kComm)`): a stream handle names a device and a
// stream kind; events recorded on one stream order work on another.
// Thread semantics: as in DeviceImpl (memory accounting thread-safe; clocks and trace context
// belong to the thread driving the device).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dpscope/base/format_bytes.hpp"
#include "dpscope/core/device_impl.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/trace_format/schema.hpp"

namespace dpscope {

class Stream;

class Device {
 public:
  Device();  // the shared cpu device
  // The process's shared cpu device: no trace context (see the file comment).
  static Device cpu();
  // A new cpu device instance with its own trace context and memory accounting, equal to every
  // other cpu device. A traced run on the cpu uses one.
  static Device new_cpu();
  // Creates a new simulated GPU `sim:<index>` timed by `preset`.
  static Device sim(int index, const HardwarePreset& preset);
  // Parses "cpu" or "sim:N"; sim devices need a preset. Throws kDevice on anything else.
  static Device parse(const std::string& name, const HardwarePreset* preset = nullptr);
  // Wraps an implementation (how a CudaDevice, or a test double, becomes a Device).
  explicit Device(std::shared_ptr<DeviceImpl> impl);

  DeviceKind kind() const { return impl_->kind(); }
  int index() const { return impl_->index(); }  // -1 for cpu
  std::string name() const { return impl_->name(); }
  bool is_simulated() const { return kind() == DeviceKind::kSim; }
  // A GPU, simulated or real: what a trace draws as a device with the host behind a link.
  bool is_gpu() const { return kind() != DeviceKind::kCpu; }
  const HardwarePreset* hardware() const { return impl_->hardware(); }  // nullptr for cpu
  DeviceImpl& impl() const { return *impl_; }

  // ---- memory ----
  // A buffer in this device's memory, accounted under `category` (see DeviceImpl::allocate);
  // without data it only accounts (nullptr), as a timing-only tensor does.
  void* allocate(uint64_t bytes, MemoryCategory category, bool with_data = false) const {
    return impl_->allocate(bytes, category, with_data);
  }
  void deallocate(void* data, uint64_t bytes, MemoryCategory category) const noexcept {
    impl_->deallocate(data, bytes, category);
  }
  // Gives back an accounting-only allocation (allocate() without data).
  void release(uint64_t bytes, MemoryCategory category) const noexcept {
    impl_->deallocate(nullptr, bytes, category);
  }
  MemoryStats memory() const { return impl_->memory(); }

  // ---- streams, events, clocks ----
  Stream stream(StreamKind kind) const;
  int64_t clock_ns(StreamKind stream) const { return impl_->clock_ns(stream); }
  // Reserves `dur_ns` on `stream` and returns the start time.
  int64_t advance(StreamKind stream, int64_t dur_ns) const { return impl_->advance(stream, dur_ns); }
  // Moves `stream`'s clock forward to at least `ts_ns` (an idle gap).
  void wait_until(StreamKind stream, int64_t ts_ns) const { impl_->wait_until(stream, ts_ns); }
  Event record(StreamKind stream) const { return impl_->record(stream); }
  void wait(StreamKind stream, const Event& event) const { impl_->wait(stream, event); }
  int64_t elapsed_ns(const Event& start, const Event& end) const { return impl_->elapsed_ns(start, end); }
  // cudaDeviceSynchronize: every stream waits for the latest one; returns that time.
  int64_t synchronize() const { return impl_->synchronize(); }

  // ---- tracing (this instance's trace context) ----
  // Throws kInvalidArgument on the shared cpu device (use Device::new_cpu()).
  void attach_tracer(TraceSink* tracer, int trace_id) const;
  TraceSink* tracer() const {
    const TraceContext* c = impl_->trace_context();
    return c == nullptr ? nullptr : c->tracer;
  }
  int trace_id() const;
  void set_rank(int rank) const;
  int rank() const;
  void set_step(int64_t step) const;
  int64_t step() const;
  void set_phase(Phase phase) const;
  Phase phase() const;
  // Sampled tracing, the trade-off that keeps a measured trace cheap: kernels and copies are traced
  // on the steps whose number is a multiple of `every` (and before the first step); on the others
  // every phase becomes one span (category `phase`) timed on the compute stream, and instants,
  // counters, samples and collectives are traced as always. 1 (the default) traces every kernel.
  void set_trace_kernels_every(int64_t every) const;
  // A tracer is attached and this step's kernels are traced.
  bool traces_kernels() const {
    const TraceContext* c = impl_->trace_context();
    return c != nullptr && c->tracer != nullptr && c->kernels;
  }
  // Trace id, rank, step and phase in one read (what every event is stamped with); the defaults
  // on the shared cpu device.
  TraceContext trace_stamp() const {
    const TraceContext* c = impl_->trace_context();
    return c == nullptr ? TraceContext{} : *c;
  }
  // Emits a memory counter event (bytes by category) at the compute stream's clock.
  void trace_memory() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.impl_ == b.impl_ || (a.kind() == DeviceKind::kCpu && b.kind() == DeviceKind::kCpu);
  }

 private:
  void trace_phase_change(TraceContext& context, Phase next) const;

  std::shared_ptr<DeviceImpl> impl_;
};

// One stream of one device, as a value: what work is issued on and events are recorded on.
class Stream {
 public:
  Stream(Device device, StreamKind kind) : device_(std::move(device)), kind_(kind) {}
  const Device& device() const { return device_; }
  StreamKind kind() const { return kind_; }
  int64_t clock_ns() const { return device_.clock_ns(kind_); }
  Event record() const { return device_.record(kind_); }
  // Later work on this stream starts after `event` (which may come from another stream).
  void wait(const Event& event) const { device_.wait(kind_, event); }

 private:
  Device device_;
  StreamKind kind_;
};

inline Stream Device::stream(StreamKind kind) const { return Stream(*this, kind); }

// Sets the device's phase for a scope and restores the previous one after it.
class PhaseScope {
 public:
  PhaseScope(const Device& device, Phase phase) : device_(device), saved_(device.phase()) {
    device_.set_phase(phase);
  }
  ~PhaseScope() { device_.set_phase(saved_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Device device_;
  Phase saved_;
};

}  // namespace dpscope
