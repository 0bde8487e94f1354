// PLACEHOLDER (replaced by the cuda device implementation): the symbols of core/cuda.hpp in a CUDA
// build, so the other layers link while the device is written.
#include <cuda_runtime_api.h>

#include "dpscope/base/error.hpp"
#include "dpscope/core/cuda.hpp"

namespace dpscope::cuda {

namespace {
[[noreturn]] void not_yet(const char* what) {
  throw Error(ErrorKind::kUnsupported, fmt::format("{}: the cuda device is not written yet", what));
}
}  // namespace

bool built() { return true; }
int physical_device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}
std::string unavailable_reason() { return physical_device_count() > 0 ? "" : "no CUDA GPU on this machine"; }
std::vector<Device> make_devices(const LogicalGpuOptions& /*options*/) { not_yet("--device cuda"); }
int physical_index(const DeviceImpl& /*device*/) { not_yet("cuda device"); }
std::string physical_name(const DeviceImpl& /*device*/) { not_yet("cuda device"); }
void make_current(const DeviceImpl& /*device*/) { not_yet("cuda device"); }
void* stream_handle(const DeviceImpl& /*device*/, StreamKind /*stream*/) { not_yet("cuda device"); }
void empty_cache(const DeviceImpl& /*device*/) { not_yet("cuda device"); }
AllocatorStats allocator_stats(const DeviceImpl& /*device*/) { not_yet("cuda device"); }

}  // namespace dpscope::cuda
