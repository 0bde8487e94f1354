// Dispatch by device kind for the kernel layer (kernels/kernels.hpp), used by every public kernel
// in src/kernels/*.cpp. cpu and sim tensors hold host memory and run the host kernels; cuda tensors
// run the CUDA implementations (src/kernels/cuda/, declared in cuda/gpu_ops.hpp) when the build has
// CUDA. Without CUDA a cuda tensor reaching a kernel fails with one line naming the op and the
// device. The pattern at each dispatch point:
//
//   if (detail::runs_on_cuda(x.device(), "relu_forward")) {
//     if constexpr (detail::kCudaBuilt) return gpu::relu_forward(x, y);
//   }
//   ...host kernel...
//
// `if constexpr` keeps the gpu:: call out of a build without CUDA (a function named only in a
// discarded statement need not be defined), so no stub of every op is needed there.
#pragma once

#include <string_view>

#include "dpscope/base/error.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/core/device.hpp"

namespace dpscope::kernels::detail {

#if defined(DPSCOPE_HAVE_CUDA)
inline constexpr bool kCudaBuilt = true;
#else
inline constexpr bool kCudaBuilt = false;
#endif

// Whether `op` on memory of `kind` runs the CUDA implementation (true) or the host one (false).
// Throws kUnsupported for a cuda kind in a build without CUDA; `where` names the device.
inline bool runs_on_cuda(DeviceKind kind, const char* op, std::string_view where) {
  switch (kind) {
    case DeviceKind::kCpu:
    case DeviceKind::kSim: return false;
    case DeviceKind::kCuda:
      if constexpr (kCudaBuilt) return true;
      break;
  }
  // cuda::unavailable_reason() says "dpscope was built without CUDA (...)" in such a build.
  throw Error(ErrorKind::kUnsupported,
              fmt::format("kernel {} on {}: {}", op, where, cuda::unavailable_reason()));
}

inline bool runs_on_cuda(const Device& device, const char* op) {
  return runs_on_cuda(device.kind(), op, device.name());
}

}  // namespace dpscope::kernels::detail
