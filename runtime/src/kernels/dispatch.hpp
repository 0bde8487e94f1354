// Dispatch by device kind for the kernel layer (kernels/kernels.hpp). cpu and sim tensors hold host
// memory and run the CPU kernels; a CUDA device will get its own branch here (issue 10). Until then
// a cuda tensor reaching a kernel fails with one line naming the op and the device.
#pragma once

#include "dpscope/base/error.hpp"
#include "dpscope/core/device.hpp"

namespace dpscope::kernels::detail {

enum class KernelBackend : uint8_t { kHost };

inline KernelBackend backend_for(DeviceKind kind, const char* op) {
  switch (kind) {
    case DeviceKind::kCpu:
    case DeviceKind::kSim: return KernelBackend::kHost;
    case DeviceKind::kCuda: break;
  }
  throw Error(
      ErrorKind::kUnsupported,
      fmt::format("kernel {} has no implementation for cuda devices (CUDA kernels are not built)", op));
}

inline KernelBackend backend_for(const Device& device, const char* op) {
  return backend_for(device.kind(), op);
}

}  // namespace dpscope::kernels::detail
