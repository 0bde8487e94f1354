// Devices: `cpu`, `sim:N` (a simulated GPU) and, in a later milestone, `cuda:N`.
//
// A Device is a cheap handle (shared ownership of its DeviceState); two handles are equal when
// they name the same device object. A simulated GPU owns:
//  * memory accounting by category against its preset's capacity (an allocation past it throws
//    ErrorKind::kOutOfMemory, worded like CUDA's OOM);
//  * one simulated clock per stream (compute, comm, copy), in integer nanoseconds, advanced by the
//    timing model (core/timing.hpp); cross-stream waits model CUDA events;
//  * an optional trace recorder and the trace context (rank, training step, phase) that is stamped
//    onto every event the device emits.
// Thread semantics: memory accounting is thread-safe; clocks and the trace context belong to the
// one host thread that drives the device (a rank, or a DataParallel replica thread).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dpscope/base/format_bytes.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/trace_format/schema.hpp"

namespace dpscope {

class TraceSink;

enum class DeviceKind : uint8_t { kCpu, kSim, kCuda };

struct MemoryStats {
  std::array<uint64_t, kMemoryCategoryCount> bytes{};  // in use, by category
  uint64_t capacity_bytes = 0;                         // 0: unlimited (cpu)
  uint64_t peak_bytes = 0;
  uint64_t in_use_bytes() const;
  uint64_t free_bytes() const;
};

// A point on one stream's simulated timeline (like a recorded cudaEvent_t).
struct SimEvent {
  int64_t ts_ns = 0;
};

struct DeviceState;

class Device {
 public:
  Device();  // the cpu device
  static Device cpu();
  // Creates a new simulated GPU `sim:<index>` timed by `preset`.
  static Device sim(int index, const HardwarePreset& preset);
  // Parses "cpu" or "sim:N"; sim devices need a preset. Throws kDevice on anything else.
  static Device parse(const std::string& name, const HardwarePreset* preset = nullptr);

  DeviceKind kind() const;
  int index() const;         // -1 for cpu
  std::string name() const;  // "cpu", "sim:0"
  bool is_simulated() const { return kind() == DeviceKind::kSim; }
  const HardwarePreset* hardware() const;  // nullptr for cpu

  // ---- memory accounting ----
  // Reserves `bytes` in `category`; throws kOutOfMemory naming device, requested and free bytes.
  void allocate(uint64_t bytes, MemoryCategory category) const;
  void release(uint64_t bytes, MemoryCategory category) const;
  MemoryStats memory() const;

  // ---- simulated clocks (sim devices; on cpu they read the wall clock since the trace origin) ----
  int64_t clock_ns(StreamKind stream) const;
  // Reserves `dur_ns` on `stream` and returns the start time.
  int64_t advance(StreamKind stream, int64_t dur_ns) const;
  // Moves `stream`'s clock forward to at least `ts_ns` (an idle gap).
  void wait_until(StreamKind stream, int64_t ts_ns) const;
  SimEvent record(StreamKind stream) const { return {clock_ns(stream)}; }
  void wait(StreamKind stream, SimEvent event) const { wait_until(stream, event.ts_ns); }
  // cudaDeviceSynchronize: every stream waits for the latest one; returns that time.
  int64_t synchronize() const;

  // ---- tracing ----
  void attach_tracer(TraceSink* tracer, int trace_id) const;
  TraceSink* tracer() const;
  int trace_id() const;  // index of this device in the trace header's device list
  void set_rank(int rank) const;
  int rank() const;
  void set_step(int64_t step) const;
  int64_t step() const;
  void set_phase(Phase phase) const;
  Phase phase() const;
  // Emits a memory counter event (bytes by category) at the compute stream's clock.
  void trace_memory() const;

  DeviceState& state() const { return *state_; }
  friend bool operator==(const Device& a, const Device& b) { return a.state_ == b.state_; }

 private:
  explicit Device(std::shared_ptr<DeviceState> state) : state_(std::move(state)) {}
  std::shared_ptr<DeviceState> state_;
};

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
