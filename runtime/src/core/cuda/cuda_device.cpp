// The cuda device's lifetime, memory and copies (cuda_device.hpp); its clocks, events and measured
// spans are in cuda_timing.cpp.
#include "cuda_device.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "cuda_check.hpp"
#include "dpscope/base/format_bytes.hpp"
#include "dpscope/core/cpu_device.hpp"
#include "dpscope/core/cuda.hpp"

namespace dpscope::cuda::detail {

namespace {
// Host copies go through one pinned buffer per logical device, grown up to this size and then
// reused in chunks (two halves): pageable memory would make the driver stage (and block) on every call.
constexpr uint64_t kStagingCapBytes = uint64_t{16} << 20;
constexpr uint64_t kStagingMinBytes = uint64_t{1} << 20;

// "70.1 GiB free of 79.1 GiB", or why the driver could not say.
std::string driver_memory(int physical) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  int saved = 0;
  if (cudaGetDevice(&saved) != cudaSuccess) return "free memory unknown";
  if (saved != physical && cudaSetDevice(physical) != cudaSuccess) return "free memory unknown";
  const cudaError_t status = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (saved != physical) static_cast<void>(cudaSetDevice(saved));
  if (status != cudaSuccess)
    return fmt::format("free memory unknown (cudaMemGetInfo: {})", cudaGetErrorString(status));
  return fmt::format("{} free of {}", format_bytes(free_bytes), format_bytes(total_bytes));
}
}  // namespace

// ---- raw memory and events of one physical GPU ----

void* CudaRawMemory::allocate(uint64_t bytes) {
  const std::string where = fmt::format("GPU {}", physical_);
  DeviceGuard guard(physical_, where);
  void* data = nullptr;
  const cudaError_t status = cudaMalloc(&data, bytes);
  if (status == cudaErrorMemoryAllocation) {
    static_cast<void>(cudaGetLastError());  // not sticky: clear it so later calls do not report it
    return nullptr;
  }
  check(status, fmt::format("cudaMalloc({})", format_bytes(bytes)), where);
  return data;
}

void CudaRawMemory::free(void* data) noexcept {
  int saved = 0;
  if (cudaGetDevice(&saved) != cudaSuccess) return;
  if (saved != physical_) static_cast<void>(cudaSetDevice(physical_));
  // cudaFree waits for the GPU; an error here (a driver shutting down) leaves nothing to clean up.
  static_cast<void>(cudaFree(data));
  if (saved != physical_) static_cast<void>(cudaSetDevice(saved));
}

EventPool::~EventPool() {
  for (cudaEvent_t event : free_) static_cast<void>(cudaEventDestroy(event));
}

std::shared_ptr<NativeEvent> EventPool::acquire(std::string_view where) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      event = free_.back();
      free_.pop_back();
    }
  }
  if (event == nullptr) {
    DeviceGuard guard(physical_, where);  // an event belongs to the GPU current at its creation
    check(cudaEventCreate(&event), "cudaEventCreate", where);
  }
  return std::make_shared<CudaEvent>(event, shared_from_this());
}

void EventPool::release(cudaEvent_t event) noexcept {
  try {
    std::lock_guard lock(mutex_);
    free_.push_back(event);
  } catch (...) {
    static_cast<void>(cudaEventDestroy(event));  // no room to keep it: give it back to the driver
  }
}

cudaEvent_t native_event(const Event& event) {
  const auto* native = dynamic_cast<const CudaEvent*>(event.native.get());
  return native == nullptr ? nullptr : native->get();
}

PhysicalGpu::PhysicalGpu(int physical_index, std::string name, HardwarePreset base)
    : index(physical_index),
      driver_name(std::move(name)),
      preset_base(std::move(base)),
      raw(physical_index),
      allocator(raw),
      events(std::make_shared<EventPool>(physical_index)) {}

// ---- the logical device ----

CudaDevice::CudaDevice(int logical_index, std::shared_ptr<PhysicalGpu> gpu, uint64_t budget_bytes)
    : index_(logical_index),
      gpu_(std::move(gpu)),
      where_(fmt::format("cuda:{} (GPU {})", logical_index, gpu_->index)),
      preset_(gpu_->preset_base),
      memory_(budget_bytes) {
  preset_.name = fmt::format("{} (GPU {})", gpu_->driver_name, gpu_->index);
  preset_.memory_bytes = budget_bytes;
  DeviceGuard guard(gpu_->index, where_);
  try {
    for (cudaStream_t& stream : streams_)
      check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", where_);
    measure_anchor();
  } catch (...) {
    anchor_ = Event{};
    for (cudaStream_t stream : streams_)
      if (stream != nullptr) static_cast<void>(cudaStreamDestroy(stream));
    throw;
  }
}

void CudaDevice::measure_anchor() {
  // The offset between the GPU's event clock and the host clock, measured once. An event on an
  // empty stream runs between the host's record call and the return of the wait for it: take the
  // middle of the shortest of a few such intervals (its half-width bounds the error, a few us).
  int64_t best_width_ns = std::numeric_limits<int64_t>::max();
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int64_t before_ns = wall_ns_since_origin();
    Event event = record(StreamKind::kCompute);
    check(cudaEventSynchronize(native_event(event)), "cudaEventSynchronize", where_);
    const int64_t after_ns = wall_ns_since_origin();
    if (after_ns - before_ns < best_width_ns) {
      best_width_ns = after_ns - before_ns;
      anchor_ = std::move(event);
      anchor_host_ns_ = before_ns + best_width_ns / 2;
    }
  }
}

CudaDevice::~CudaDevice() {
  int saved = 0;
  const bool have_saved = cudaGetDevice(&saved) == cudaSuccess;
  static_cast<void>(cudaSetDevice(gpu_->index));
  // Work still queued may use cached blocks or the staging buffer: let it finish first. Spans not
  // emitted yet are dropped (their tracer may be gone; Device::attach_tracer flushes them).
  for (cudaStream_t stream : streams_) static_cast<void>(cudaStreamSynchronize(stream));
  pending_.clear();
  if (cupti_ != nullptr) cupti_->detach();
  last_end_.fill(Event{});
  anchor_ = Event{};
  copy_begin_ = Event{};
  copy_end_ = Event{};
  for (cudaStream_t stream : streams_) static_cast<void>(cudaStreamDestroy(stream));
  if (staging_ != nullptr) static_cast<void>(cudaFreeHost(staging_));
  if (have_saved) static_cast<void>(cudaSetDevice(saved));
}

int CudaDevice::allocator_stream(StreamKind kind) const {
  return index_ * kStreamCount + static_cast<int>(kind);
}

void* CudaDevice::allocate(uint64_t bytes, MemoryCategory category, bool with_data) {
  try {
    memory_.reserve(*this, bytes, category);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kOutOfMemory) throw;
    throw Error(ErrorKind::kOutOfMemory, fmt::format("{}; GPU {} ({}): {} (driver)", e.what(), gpu_->index,
                                                     gpu_->driver_name, driver_memory(gpu_->index)));
  }
  if (!with_data || bytes == 0) return nullptr;  // timing-only tensors: accounting only
  void* data = nullptr;
  try {
    data = gpu_->allocator.allocate(bytes, allocator_stream(current_stream()));
  } catch (...) {
    memory_.release(*this, bytes, category);
    throw;
  }
  if (data == nullptr) {
    memory_.release(*this, bytes, category);
    const MemoryStats m = memory_.stats();
    throw Error(ErrorKind::kOutOfMemory,
                fmt::format("{} out of memory: tried to allocate {} for {}; GPU {} ({}) has {} (driver) even "
                            "after emptying the cache; the logical budget has {} free of {}",
                            name(), format_bytes(bytes), to_string(category), gpu_->index, gpu_->driver_name,
                            driver_memory(gpu_->index), format_bytes(m.free_bytes()),
                            format_bytes(m.capacity_bytes)));
  }
  return data;
}

void CudaDevice::deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept {
  // The block goes back to the cache of the stream it was allocated for: work on that stream
  // that still reads it runs before any later user from the same stream.
  gpu_->allocator.free(data);
  memory_.release(*this, bytes, category);
}

void CudaDevice::order_copy_after_work() {
  for (StreamKind producer : {StreamKind::kCompute, StreamKind::kComm})
    wait(StreamKind::kCopy, record(producer));
}

void CudaDevice::ensure_staging(uint64_t bytes) {
  const uint64_t wanted = std::clamp(std::bit_ceil(bytes), kStagingMinBytes, kStagingCapBytes);
  if (staging_bytes_ >= wanted) return;
  if (staging_ != nullptr) {
    check(cudaFreeHost(staging_), "cudaFreeHost", where_);
    staging_ = nullptr;
    staging_bytes_ = 0;
  }
  check(cudaHostAlloc(&staging_, wanted, cudaHostAllocDefault),
        fmt::format("cudaHostAlloc({} pinned staging)", format_bytes(wanted)), where_);
  staging_bytes_ = wanted;
}

// Host copies use the staging buffer as two halves, so that the host's memcpy of one chunk overlaps
// the DMA of the other; an event per half says when its DMA is done.
void CudaDevice::copy_from_host(void* dst, const void* host_src, uint64_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(gpu_->index, where_);
  std::lock_guard lock(copy_mutex_);
  order_copy_after_work();  // a reused block may still be read by earlier kernels
  ensure_staging(2 * bytes);
  const uint64_t half = staging_bytes_ / 2;
  const cudaStream_t copy = stream(StreamKind::kCopy);
  std::array<Event, 2> dma_done;
  begin_copy_trace();
  for (uint64_t offset = 0, chunk = 0; offset < bytes; offset += half, ++chunk) {
    const uint64_t n = std::min(half, bytes - offset);
    Event& slot_done = dma_done[chunk % 2];
    char* slot = static_cast<char*>(staging_) + (chunk % 2) * half;
    if (slot_done.native != nullptr)  // the half's previous DMA must have read it
      check(cudaEventSynchronize(native_event(slot_done)), "cudaEventSynchronize (staging)", where_);
    std::memcpy(slot, static_cast<const char*>(host_src) + offset, n);
    check(cudaMemcpyAsync(static_cast<char*>(dst) + offset, slot, n, cudaMemcpyHostToDevice, copy),
          "cudaMemcpyAsync (host to device)", where_);
    slot_done = record(StreamKind::kCopy);
  }
  end_copy_trace();
  // Synchronous for the caller, and later work on any stream sees the data.
  check(cudaStreamSynchronize(copy), "cudaStreamSynchronize (copy stream)", where_);
}

void CudaDevice::copy_to_host(void* host_dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(gpu_->index, where_);
  std::lock_guard lock(copy_mutex_);
  order_copy_after_work();  // the kernels producing `src` come first
  ensure_staging(2 * bytes);
  const uint64_t half = staging_bytes_ / 2;
  const cudaStream_t copy = stream(StreamKind::kCopy);
  std::array<Event, 2> dma_done;
  // Copies chunk `chunk` (at `offset`, `n` bytes) out of its half once its DMA is done.
  auto drain = [&](uint64_t chunk, uint64_t offset, uint64_t n) {
    check(cudaEventSynchronize(native_event(dma_done[chunk % 2])), "cudaEventSynchronize (staging)", where_);
    std::memcpy(static_cast<char*>(host_dst) + offset,
                static_cast<const char*>(staging_) + (chunk % 2) * half, n);
  };
  begin_copy_trace();
  uint64_t chunk = 0;
  uint64_t offset = 0;
  for (; offset < bytes; offset += half, ++chunk) {
    const uint64_t n = std::min(half, bytes - offset);
    // This half was drained in the previous iteration (or never used): the DMA may overwrite it.
    check(cudaMemcpyAsync(static_cast<char*>(staging_) + (chunk % 2) * half,
                          static_cast<const char*>(src) + offset, n, cudaMemcpyDeviceToHost, copy),
          "cudaMemcpyAsync (device to host)", where_);
    dma_done[chunk % 2] = record(StreamKind::kCopy);
    if (chunk > 0) drain(chunk - 1, offset - half, half);  // overlaps the DMA just issued
  }
  end_copy_trace();
  const uint64_t last_offset = (chunk - 1) * half;
  drain(chunk - 1, last_offset, bytes - last_offset);
}

void CudaDevice::fill_zeros(void* dst, uint64_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(gpu_->index, where_);
  check(cudaMemsetAsync(dst, 0, bytes, stream(current_stream())), "cudaMemsetAsync", where_);
}

void CudaDevice::copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  if (src_device.kind() != DeviceKind::kCuda) {
    copy_from_host(dst, src, bytes);  // cpu and sim memory is host memory
    return;
  }
  CudaDevice& from = cuda_device(src_device, "copy_from_device");
  DeviceGuard guard(gpu_->index, where_);
  if (&from == this) {
    // Within the device: in stream order on the current stream, as torch's copy_.
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(current_stream())),
          "cudaMemcpyAsync (device to device)", where_);
    return;
  }
  // Between logical devices, on this device's copy stream after the work issued so far on both
  // ends. Ordered by events rather than a host wait (DataParallel's scatter issues several at
  // once): the compute and comm streams of both ends wait for the copy, so every later kernel, copy
  // to the host, or reuse of either buffer through the allocator's per-stream cache comes after it.
  std::lock_guard lock(copy_mutex_);
  wait(StreamKind::kCopy, from.record(StreamKind::kCompute));
  wait(StreamKind::kCopy, from.record(StreamKind::kComm));
  order_copy_after_work();
  const cudaStream_t copy = stream(StreamKind::kCopy);
  begin_copy_trace();
  if (from.gpu().index == gpu_->index) {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, copy),
          fmt::format("cudaMemcpyAsync (device to device from {})", from.name()), where_);
  } else {
    check(cudaMemcpyPeerAsync(dst, gpu_->index, src, from.gpu().index, bytes, copy),
          fmt::format("cudaMemcpyPeerAsync (from {} on GPU {})", from.name(), from.gpu().index), where_);
  }
  end_copy_trace();
  const Event done = record(StreamKind::kCopy);
  for (StreamKind consumer : {StreamKind::kCompute, StreamKind::kComm}) {
    wait(consumer, done);
    from.wait(consumer, done);
  }
}

}  // namespace dpscope::cuda::detail
