// DeviceImpl: what a device kind implements, in the spirit of ggml's backend interface
// (device -> stream -> buffer). `Device` (core/device.hpp) is the cheap handle the code base passes
// around; it owns a DeviceImpl. Implementations: CpuDevice (core/cpu_device.hpp), SimDevice
// (core/sim_device.hpp) and, in a CUDA build, CudaDevice (src/core/cuda/cuda_device.hpp: a caching
// allocator over cudaMalloc, real cudaStream_t and cudaEvent_t, measured times).
//
// Streams: every device has kStreamCount streams (compute, comm, copy), named by StreamKind. Work
// on one stream runs in order; work on two streams is ordered only by events (record on one, wait
// on the other), as on CUDA.
// Threads: memory accounting (allocate/deallocate/memory) is thread-safe. Everything else belongs
// to the one host thread that drives the device (a rank, or a DataParallel replica thread), as a
// CUDA stream belongs to the thread issuing onto it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "dpscope/core/kernel_cost.hpp"
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

// A native event object of a device kind that has one (a CudaDevice keeps its cudaEvent_t in a
// subclass); cpu and sim events need none.
class NativeEvent {
 public:
  virtual ~NativeEvent() = default;
};

// A point on one stream's timeline (cudaEventRecord). `ts_ns` is the stream's clock when the
// event was recorded: simulated nanoseconds on sim, wall nanoseconds since the process's trace
// origin on cpu (and, once measured, on cuda).
struct Event {
  int64_t ts_ns = 0;
  StreamKind stream = StreamKind::kCompute;
  std::shared_ptr<NativeEvent> native;  // null for cpu and sim
};

// Where a timed kernel landed on its stream's clock.
struct TimedSpan {
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
};

// The trace context a device stamps onto the events it emits. Owned by one device instance (never
// shared between runs); written by the thread that drives the device.
struct TraceContext {
  TraceSink* tracer = nullptr;
  int trace_id = -1;  // index of the device in the trace header's device list
  int rank = 0;
  int64_t step = -1;
  Phase phase = Phase::kNone;
  // Sampled tracing (Device::set_trace_kernels_every): kernels and copies are traced on the steps
  // whose number is a multiple of `kernels_every`, and outside steps; on the other steps each phase
  // is one span (`phase_begin`: where the current phase began, an event on the compute stream).
  int64_t kernels_every = 1;
  bool kernels = true;
  Event phase_begin;
  bool phase_begin_set = false;
};

class DeviceImpl {
 public:
  virtual ~DeviceImpl() = default;

  // ---- identity (immutable) ----
  virtual DeviceKind kind() const = 0;
  virtual int index() const = 0;                       // -1 for cpu
  virtual const HardwarePreset* hardware() const = 0;  // nullptr for cpu
  std::string name() const;                            // "cpu", "sim:0", "cuda:1"

  // ---- memory (thread-safe) ----
  // Accounts `bytes` under `category` and returns a buffer of at least `bytes` in this device's
  // memory, 64-byte aligned; nullptr when `with_data` is false (timing-only tensors) or bytes is 0.
  // Past capacity it throws ErrorKind::kOutOfMemory worded like CUDA's OOM (device, request, free,
  // and what is in use by category) and accounts nothing.
  virtual void* allocate(uint64_t bytes, MemoryCategory category, bool with_data) = 0;
  // Frees what allocate() returned (data may be nullptr) and releases its accounting.
  virtual void deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept = 0;
  virtual MemoryStats memory() const = 0;

  // ---- copies (synchronous with respect to the calling thread) ----
  // Host memory to this device's memory, and back. cpu and sim memory is host memory (memcpy).
  virtual void copy_from_host(void* dst, const void* host_src, uint64_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, uint64_t bytes) = 0;
  // Sets `bytes` of this device's memory to zero (cudaMemset).
  virtual void fill_zeros(void* dst, uint64_t bytes) = 0;
  // Within this device, or from `src_device`'s memory into this device's (a peer copy).
  // Optional: a device kind without peer access throws kUnsupported, and callers stage through host.
  virtual void copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) = 0;

  // ---- streams and events (the driving thread only) ----
  // The stream's clock now: the end of the work issued on it so far.
  virtual int64_t clock_ns(StreamKind stream) const = 0;
  // Reserves `dur_ns` of modelled work on `stream` and returns its start. Only meaningful on a
  // device with a timing model (sim); a measured device returns the time the work ended minus dur.
  virtual int64_t advance(StreamKind stream, int64_t dur_ns) = 0;
  // The stream does nothing before `ts_ns` (an idle gap, or a wait on another stream's time).
  virtual void wait_until(StreamKind stream, int64_t ts_ns) = 0;
  // cudaEventRecord on `stream`.
  virtual Event record(StreamKind stream) = 0;
  // cudaStreamWaitEvent: later work on `stream` starts after `event`.
  virtual void wait(StreamKind stream, const Event& event) = 0;
  // cudaEventElapsedTime, in nanoseconds: end - start.
  virtual int64_t elapsed_ns(const Event& start, const Event& end) const = 0;
  // cudaDeviceSynchronize: every stream waits for the latest; returns that time.
  virtual int64_t synchronize() = 0;

  // ---- the kernel timer KernelScope uses (the driving thread only) ----
  // timer_begin marks the start of a kernel on `stream`; timer_end places the kernel on the stream's
  // timeline: sim charges the roofline cost of `cost` to the stream's clock, cpu measures wall time
  // (and ignores `cost`), cuda times it with two events and emits the span once it has completed.
  virtual Event timer_begin(StreamKind stream) = 0;
  virtual TimedSpan timer_end(StreamKind stream, const Event& begin, KernelCost cost) = 0;

  // ---- tracing ----
  // This instance's trace context; a device that refuses tracing (the process's shared cpu device)
  // returns nullptr and its setters do nothing.
  virtual TraceContext* trace_context() = 0;
};

}  // namespace dpscope
