// core/cuda.hpp in a build without CUDA: no cuda device can be made, and every entry point that
// needs one says so in one line.
#include "../cuda_internal.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/core/cuda.hpp"

namespace dpscope::cuda {

namespace {
[[noreturn]] void not_built(const char* what) {
  throw Error(ErrorKind::kDevice, fmt::format("{}: {}", what, unavailable_reason()));
}
}  // namespace

bool built() { return false; }
int physical_device_count() { return 0; }
std::string unavailable_reason() {
  return "dpscope was built without CUDA (configure found no nvcc, cuBLAS or NCCL; see docs/gpu.md)";
}
std::vector<Device> make_devices(const LogicalGpuOptions& options) {
  detail::check_options(options);
  not_built("--device cuda");
}
int physical_index(const DeviceImpl& /*device*/) { not_built("cuda device"); }
std::string physical_name(const DeviceImpl& /*device*/) { not_built("cuda device"); }
void make_current(const DeviceImpl& /*device*/) { not_built("cuda device"); }
void* stream_handle(const DeviceImpl& /*device*/, StreamKind /*stream*/) { not_built("cuda device"); }
void empty_cache(const DeviceImpl& /*device*/) { not_built("cuda device"); }
AllocatorStats allocator_stats(const DeviceImpl& /*device*/) { not_built("cuda device"); }
int64_t event_time_ns(const DeviceImpl& /*device*/, const Event& /*event*/) { not_built("cuda device"); }
void defer_kernel_span(DeviceImpl& /*device*/, StreamKind /*stream*/, std::string_view /*name*/,
                       const Event& /*begin*/, KernelCost /*cost*/) {
  not_built("cuda device");
}
void defer_phase_span(DeviceImpl& /*device*/, Phase /*phase*/, const Event& /*begin*/, const Event& /*end*/) {
  not_built("cuda device");
}
// No CudaDevice exists in this build: nothing is ever queued or measured.
void flush_trace(DeviceImpl& /*device*/) {}
std::optional<TimedSpan> last_copy_span(DeviceImpl& /*device*/) { return std::nullopt; }
uint64_t untimed_kernel_spans(const DeviceImpl& /*device*/) { not_built("cuda device"); }
void set_kernel_timer(KernelTimer /*timer*/) {}
std::string kernel_timer_description() { return "none (" + unavailable_reason() + ")"; }

}  // namespace dpscope::cuda
