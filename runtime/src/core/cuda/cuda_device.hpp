// CudaDevice: a logical GPU `cuda:N` on one physical GPU (private to core; the rest of the code
// base reaches it through Device and core/cuda.hpp). Made by cuda::make_devices().
//
// Memory: accounted by category against the logical budget (MemoryAccounting, the same OOM wording
// as sim, plus the driver's free/total), served by the physical GPU's CachingAllocator.
// Streams: three non-blocking cudaStream_t (compute, comm, copy) of its own; events come from the
// physical GPU's pool. Clocks: host nanoseconds since the trace origin (cpu_device.hpp); an event's
// time is measured as anchor_host_ns + cudaEventElapsedTime(anchor, event).
// Threads: as DeviceImpl (memory thread-safe; streams, clocks and tracing belong to the driving
// thread). The event pool and the allocator are shared by the logical devices of one GPU and locked.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../cuda_internal.hpp"
#include "cupti_timer.hpp"
#include "dpscope/core/caching_allocator.hpp"
#include "dpscope/core/device_impl.hpp"
#include "dpscope/core/memory_accounting.hpp"

namespace dpscope::cuda::detail {

// cudaMalloc/cudaFree on one physical GPU, for the CachingAllocator.
class CudaRawMemory final : public RawMemory {
 public:
  explicit CudaRawMemory(int physical) : physical_(physical) {}
  void* allocate(uint64_t bytes) override;
  void free(void* data) noexcept override;

 private:
  int physical_;
};

// Reused cudaEvent_t of one physical GPU (events must be recorded on a stream of their own GPU).
// Shared by the events it hands out, so an Event may outlive the device that recorded it.
class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  explicit EventPool(int physical) : physical_(physical) {}
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  // An event (timing enabled) wrapped for Event::native; it returns to the pool when released.
  std::shared_ptr<NativeEvent> acquire(std::string_view where);
  void release(cudaEvent_t event) noexcept;

 private:
  int physical_;
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_;
};

// The NativeEvent of a cuda device: a pooled cudaEvent_t.
class CudaEvent final : public NativeEvent {
 public:
  CudaEvent(cudaEvent_t event, std::shared_ptr<EventPool> pool) : event_(event), pool_(std::move(pool)) {}
  ~CudaEvent() override { pool_->release(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_;
  std::shared_ptr<EventPool> pool_;
};

// The cudaEvent_t of an Event recorded by a cuda device, or nullptr (cpu/sim events, tracing off).
cudaEvent_t native_event(const Event& event);

// What the logical devices of one physical GPU share. One allocator per physical GPU (as PyTorch
// has): blocks cached by one logical device hold physical memory another one's cudaMalloc may need,
// and a shared allocator's retry-after-failure frees them all. Logical budgets still bound each
// logical device (MemoryAccounting); stream ids in the cache are logical * kStreamCount + stream,
// so blocks are never reused across logical devices' streams.
struct PhysicalGpu {
  PhysicalGpu(int physical_index, std::string driver_name, HardwarePreset preset_base);
  const int index;
  const std::string driver_name;     // cudaGetDeviceProperties().name
  const HardwarePreset preset_base;  // matched or generic; name and memory set per logical device
  CudaRawMemory raw;                 // before allocator: it outlives it
  CachingAllocator allocator;
  std::shared_ptr<EventPool> events;
};

class CudaDevice final : public DeviceImpl, public std::enable_shared_from_this<CudaDevice> {
 public:
  CudaDevice(int logical_index, std::shared_ptr<PhysicalGpu> gpu, uint64_t budget_bytes);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int index() const override { return index_; }
  const HardwarePreset* hardware() const override { return &preset_; }

  void* allocate(uint64_t bytes, MemoryCategory category, bool with_data) override;
  void deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept override;
  MemoryStats memory() const override { return memory_.stats(); }

  void copy_from_host(void* dst, const void* host_src, uint64_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, uint64_t bytes) override;
  void fill_zeros(void* dst, uint64_t bytes) override;
  void copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) override;

  // Measured clocks: see cuda_timing.cpp.
  int64_t clock_ns(StreamKind stream) const override;
  int64_t advance(StreamKind stream, int64_t dur_ns) override;
  void wait_until(StreamKind stream, int64_t ts_ns) override;
  Event record(StreamKind stream) override;
  void wait(StreamKind stream, const Event& event) override;
  int64_t elapsed_ns(const Event& start, const Event& end) const override;
  int64_t synchronize() override;
  Event timer_begin(StreamKind stream) override;
  TimedSpan timer_end(StreamKind stream, const Event& begin, KernelCost cost) override;

  // This thread's TraceContextScope for this device if it set one (a comm worker's), else the
  // device's own.
  TraceContext* trace_context() override {
    if (TraceContext* scoped = thread_trace_context(this)) return scoped;
    return &context_;
  }

  // ---- for core/cuda.hpp ----
  // Shared and internally locked, so reachable from a const device.
  PhysicalGpu& gpu() const { return *gpu_; }
  cudaStream_t stream(StreamKind kind) const { return streams_[static_cast<size_t>(kind)]; }
  // The allocator's stream id of one of this device's streams.
  int allocator_stream(StreamKind kind) const;
  int64_t event_time_ns(const Event& event) const;
  void defer_kernel_span(StreamKind stream, std::string_view name, const Event& begin, KernelCost cost);
  // Queues a phase span between two events of the compute stream (never under CUPTI: the device
  // lets the timer go on the steps whose kernels are not traced).
  void defer_phase_span(Phase phase, const Event& begin, const Event& end);
  // Emits the queued phase spans whose events have completed, without waiting.
  void emit_completed_phase_spans();
  // Emits the queued spans whose work completed; all of them (waiting) when `wait_all`.
  void emit_spans(bool wait_all);
  // Before the tracer changes: emits every queued span, then lets go of the kernel timer (the next
  // tracer chooses again).
  void flush_trace();
  std::optional<TimedSpan> last_copy_span();
  // Spans emitted with zero length because CUPTI reported no GPU work for them.
  uint64_t untimed_spans() const { return untimed_spans_; }

 private:
  struct PendingSpan {
    std::string name;
    StreamKind stream = StreamKind::kCompute;
    Event begin;  // events timer: the begin and end events; CUPTI: begin holds the span id
    Event end;
    uint64_t seq = 0;  // order of issue on this device
    KernelCost cost;
    int rank = 0;
    int64_t step = -1;
    Phase phase = Phase::kNone;
    bool phase_span = false;  // a sampled trace's phase span (category phase), not a kernel
  };

  // Later work on the copy stream starts after what was issued on compute and comm so far.
  void order_copy_after_work();
  // The pinned staging buffer, at least min(bytes, its cap) long (grown, then reused).
  void ensure_staging(uint64_t bytes);
  // With a tracer attached, records the begin/end events of a copy on the copy stream.
  void begin_copy_trace();
  void end_copy_trace();
  // Emits `span` at the measured start and duration (events: read off its events; CUPTI: taken from
  // the collected records).
  void emit(const PendingSpan& span);
  void emit_at(const PendingSpan& span, int64_t start_ns, int64_t dur_ns);
  // The CUPTI timer when this device's tracer uses it (chosen at the first traced kernel).
  ActivityTimer* cupti_timer();
  // CUPTI: emits the spans at the front of the queue whose records have come (or that provably have
  // none); drain: waits for the work and the records of every queued span, then emits them all.
  void emit_ready_cupti_spans();
  void drain_cupti_spans();
  // CUPTI: the records of span `id`, whose work has completed, once delivered (bounded wait).
  std::optional<GpuInterval> wait_for_records(uint64_t id);
  // Records the anchor event and the host time it ran at (at creation).
  void measure_anchor();
  // After a synchronize(): moves the anchor forward when it is old (float milliseconds lose
  // precision over long intervals), measuring the new one from the old.
  void refresh_anchor();

  const int index_;
  std::shared_ptr<PhysicalGpu> gpu_;
  const std::string where_;  // "cuda:1 (GPU 0)", for error messages
  HardwarePreset preset_;
  MemoryAccounting memory_;
  std::array<cudaStream_t, kStreamCount> streams_{};
  TraceContext context_;

  // The anchor is read by a rank's comm worker (the cuda backend's measured collectives) while
  // the rank's thread may move it forward in synchronize(): anchor_mutex_ guards both.
  mutable std::mutex anchor_mutex_;
  Event anchor_;  // recorded on the compute stream
  int64_t anchor_host_ns_ = 0;

  // Serializes this device's copies (DataParallel's gather reads replicas from the main thread):
  // guards the staging buffer and the last copy's events.
  std::mutex copy_mutex_;
  void* staging_ = nullptr;  // cudaHostAlloc
  uint64_t staging_bytes_ = 0;

  std::deque<PendingSpan> pending_;
  uint64_t next_seq_ = 0;
  // The kernel timer of the attached tracer: chosen at its first traced kernel, released by
  // flush_trace(). CUPTI (cupti_timer.hpp) unless unavailable or set_kernel_timer says events.
  bool timer_chosen_ = false;
  ActivityTimer* cupti_ = nullptr;
  std::array<int64_t, kStreamCount> last_emitted_end_{};  // where a span with no work is placed
  // The last emitted phase span's end: its event and measured time (the next phase begins there).
  Event last_phase_end_;
  uint64_t untimed_spans_ = 0;
  // Per stream, the end event of the last traced kernel (timer_begin may start the next one there).
  std::array<Event, kStreamCount> last_end_{};
  Event copy_begin_;  // guarded by copy_mutex_
  Event copy_end_;
};

// The CudaDevice behind `device`; throws kDevice "<what>: <name> is not a cuda device" otherwise.
CudaDevice& cuda_device(const DeviceImpl& device, std::string_view what);

}  // namespace dpscope::cuda::detail
