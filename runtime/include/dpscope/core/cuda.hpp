// CUDA devices (`cuda:N`): whether this build and this machine can make them, the logical GPUs a
// run asks for, and the native handles the kernel layer and the cuda/nccl backends issue work on.
//
// Logical GPUs: a run may ask for more devices than the machine has GPUs (the GPU machines at hand
// have one). Logical device k runs on physical GPU k mod count, with its own compute, comm and copy
// streams and its own memory budget: the physical GPU's memory split evenly between the logical
// devices on it, or `memory_cap_bytes` when given. The trace header names the physical GPU.
//
// Streams: a cuda kernel is enqueued on its device's *current* stream for the calling thread, the
// compute stream unless a StreamGuard says otherwise (as PyTorch's current-stream rule: a
// collective's reductions run on the comm stream).
//
// Without CUDA in the build (or without a GPU), every function here still exists: `built()` and
// `physical_device_count()` say what is missing, and make_devices() throws one line saying why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/core/device.hpp"

namespace dpscope::cuda {

// Whether this build has the cuda device, the CUDA kernels and the cuda/nccl backends.
bool built();
// Physical CUDA GPUs the driver reports; 0 without CUDA in the build, a driver, or a GPU.
int physical_device_count();
// Why cuda devices cannot be made on this machine ("dpscope was built without CUDA ...",
// "no CUDA GPU: cudaGetDeviceCount says ..."), or "" when they can.
std::string unavailable_reason();
// Throws ErrorKind::kDevice "<what>: <unavailable_reason()>" unless cuda devices can be made.
void require_available(std::string_view what);

// ---- logical GPUs (pure arithmetic, tested without a GPU) ----
// The physical GPU logical device `logical` runs on.
int physical_for(int logical, int physical_count);
// How many of `logical_count` logical devices share physical GPU `physical`.
int logical_on_physical(int physical, int logical_count, int physical_count);
// The memory budget of one of `sharing` logical devices on a GPU with `physical_free_bytes` free:
// an even split, or `cap_bytes` when given (a cap larger than the split is an error naming both).
uint64_t logical_budget(uint64_t physical_free_bytes, int sharing, uint64_t cap_bytes);

// The preset (assets/presets) describing a GPU by its driver name: "h100-sxm" for an SXM H100
// ("NVIDIA H100 80GB HBM3"), "h200" for an SXM H200, "" for any other (PCIe and NVL boards differ in
// clocks and links); a cuda device without one is described from the driver's attributes.
std::string preset_id_for_gpu(std::string_view driver_name);

struct LogicalGpuOptions {
  int count = 1;                  // logical devices cuda:first .. cuda:first+count-1
  uint64_t memory_cap_bytes = 0;  // 0: the physical GPU's free memory split evenly
  // The first logical index: a process of `dpscope launch` makes {.count = 1, .first = LOCAL_RANK},
  // its own cuda:LOCAL_RANK on physical GPU LOCAL_RANK mod count (as torch.device("cuda", local_rank)).
  int first = 0;
};
// Makes the logical devices; throws kDevice (unavailable) or kInvalidArgument (a bad count or cap).
std::vector<Device> make_devices(const LogicalGpuOptions& options);

// ---- what kernels and backends need of a cuda device (throws kDevice on other kinds) ----
// The physical GPU index of a cuda device, and its driver name ("NVIDIA H100 80GB HBM3").
int physical_index(const DeviceImpl& device);
std::string physical_name(const DeviceImpl& device);
// cudaSetDevice(physical_index(device)) for the calling thread.
void make_current(const DeviceImpl& device);
// The cudaStream_t of one of the device's streams, as an opaque pointer.
void* stream_handle(const DeviceImpl& device, StreamKind stream);
// The stream kind cuda kernels issued by this thread run on (kCompute unless a StreamGuard is live).
StreamKind current_stream();
// The cudaStream_t kernels for `device` go on from this thread now.
inline void* current_stream_handle(const DeviceImpl& device) {
  return stream_handle(device, current_stream());
}

// Makes `stream` this thread's current stream for cuda kernels for a scope, then restores it.
class StreamGuard {
 public:
  explicit StreamGuard(StreamKind stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  StreamKind saved_;
};

// For a scope, the calling thread sees `context` as `device`'s trace context (what stamps its
// events' rank, step and phase), and no other thread is affected. A thread that works for a rank
// (the cuda backend's comm worker) stamps events with the step and phase of the moment the rank
// issued the work, and never reads the context the rank's own thread is changing meanwhile.
// Nothing on a build without CUDA or a device that is not cuda.
class TraceContextScope {
 public:
  TraceContextScope(const DeviceImpl& device, const TraceContext& context);
  ~TraceContextScope();
  TraceContextScope(const TraceContextScope&) = delete;
  TraceContextScope& operator=(const TraceContextScope&) = delete;

 private:
  const void* saved_device_;
  TraceContext saved_context_;
};

// Frees the cached, unused blocks of a cuda device's caching allocator (torch.cuda.empty_cache()).
void empty_cache(const DeviceImpl& device);

// Bytes the caching allocator of a cuda device holds from the driver, and of those in use.
struct AllocatorStats {
  uint64_t reserved_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint64_t driver_free_bytes = 0;  // cudaMemGetInfo of the physical GPU
  uint64_t driver_total_bytes = 0;
};
AllocatorStats allocator_stats(const DeviceImpl& device);

// ---- measured timing (KernelScope, Tensor::to() and the backends on cuda devices) ----
// A cuda device's clocks are host-clock nanoseconds since the process's trace origin (the cpu
// device's clock): an event's time is the origin event's host time plus cudaEventElapsedTime from
// it (the offset is measured when the device is made).
//
// Traced kernels are timed by one of two timers. CUPTI (the default where libcupti loads): the GPU
// stamps every kernel, memcpy and memset itself and the records are read in batches, so a traced
// step issues the same work as an untraced one. Events: a CUDA event pair around each kernel (a
// fallback, and a check on CUPTI in the tests). Copies and collective steps are timed with events.
enum class KernelTimer { kCupti, kEvents };
// The timer tracers attached from now on use; kCupti falls back to events where CUPTI is missing.
// Without a call: DPSCOPE_CUDA_TIMER=events chooses events, else CUPTI.
void set_kernel_timer(KernelTimer timer);
// "cupti", or "events (why)": what a tracer attached now would use.
std::string kernel_timer_description();
// Spans a cuda device emitted with zero length because CUPTI reported no GPU work for them.
uint64_t untimed_kernel_spans(const DeviceImpl& device);
//
// The host time at which `event` (recorded on a cuda device) completed on the GPU; waits for it.
int64_t event_time_ns(const DeviceImpl& device, const Event& event);
// KernelScope's end of a traced cuda kernel: closes the span (events: records its end event) and
// queues it; the device emits queued spans in order, without waiting, as their work completes
// (events: checked every few hundred spans and at synchronize(); CUPTI: as the records arrive, a
// few milliseconds later), stamped with the rank, step and phase of their launch. No sync per
// kernel. `begin` without a native event (tracing was off at the start) queues nothing.
void defer_kernel_span(DeviceImpl& device, StreamKind stream, std::string_view name, const Event& begin,
                       KernelCost cost);
// Sampled tracing's phase span on an unsampled step (Device::set_trace_kernels_every): queued
// like a kernel span and emitted, with category `phase`, once its end event has completed.
void defer_phase_span(DeviceImpl& device, Phase phase, const Event& begin, const Event& end);
// Emits every queued span of a cuda device to its tracer, waiting for their work and records, and
// lets the kernel timer go (before a tracer is detached; Device::attach_tracer calls it). Does
// nothing for a device that is not a CudaDevice.
void flush_trace(DeviceImpl& device);
// The measured span of the last copy `device` made (copy_from_host/copy_to_host/copy_from_device)
// while a tracer was attached, or nothing (also for a device that is not a CudaDevice); waits for
// the copy's end event.
std::optional<TimedSpan> last_copy_span(DeviceImpl& device);

}  // namespace dpscope::cuda
