// Checked CUDA runtime calls for the cuda device (private to core/cuda): every return code becomes
// a dpscope::Error naming the call and the device, and DeviceGuard makes a physical GPU current
// for a scope. Used by every file in runtime/src/core/cuda/.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "dpscope/base/error.hpp"

namespace dpscope::cuda::detail {

// Throws ErrorKind::kDevice "<call> on <where>: <CUDA error string> (<error name>)" unless ok.
inline void check(cudaError_t status, std::string_view call, std::string_view where) {
  if (status == cudaSuccess) return;
  throw Error(ErrorKind::kDevice, fmt::format("{} on {}: {} ({})", call, where, cudaGetErrorString(status),
                                              cudaGetErrorName(status)));
}

// Makes physical GPU `physical` the calling thread's current device for a scope and restores the
// previous one after it (threads drive several logical devices that may sit on different GPUs).
class DeviceGuard {
 public:
  DeviceGuard(int physical, std::string_view where) {
    check(cudaGetDevice(&saved_), "cudaGetDevice", where);
    if (saved_ != physical) check(cudaSetDevice(physical), "cudaSetDevice", where);
  }
  ~DeviceGuard() {
    int now = saved_;
    // Restoring cannot fail for a device that was current a moment ago; a failure here would
    // already have been reported by the call that broke the context.
    if (cudaGetDevice(&now) == cudaSuccess && now != saved_) static_cast<void>(cudaSetDevice(saved_));
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace dpscope::cuda::detail
