// Return-code checks of the CUDA runtime and NCCL calls of the cuda and nccl backends: a failure
// becomes one dpscope::Error (kDevice) naming the call, the device and the library's reason.
// Used by comm/cuda/*.cpp only.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "dpscope/base/error.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/core/device.hpp"

namespace dpscope::detail {

// Throws "<call> on <device> failed: <cudaGetErrorString> (<cudaGetErrorName>)".
inline void check_cuda(cudaError_t status, const char* call, const Device& device) {
  if (status == cudaSuccess) return;
  throw Error(ErrorKind::kDevice, fmt::format("{} on {} failed: {} ({})", call, device.name(),
                                              cudaGetErrorString(status), cudaGetErrorName(status)));
}

// Throws "<call> on <device> failed: <ncclGetErrorString> (<ncclGetLastError>)"; ncclInProgress
// is not a failure (a non-blocking communicator's call in flight).
inline void check_nccl(ncclResult_t status, const char* call, const Device& device,
                       ncclComm_t comm = nullptr) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  const char* last = ncclGetLastError(comm);
  throw Error(ErrorKind::kDevice,
              fmt::format("{} on {} failed: {}{}{}", call, device.name(), ncclGetErrorString(status),
                          last != nullptr && *last != '\0' ? ": " : "", last != nullptr ? last : ""));
}

// The device's comm stream as the cudaStream_t it is.
inline cudaStream_t comm_stream(const Device& device) {
  return static_cast<cudaStream_t>(cuda::stream_handle(device.impl(), StreamKind::kComm));
}
inline cudaStream_t compute_stream(const Device& device) {
  return static_cast<cudaStream_t>(cuda::stream_handle(device.impl(), StreamKind::kCompute));
}

// The comm stream waits for the work issued so far on the compute stream (through a throwaway
// event: recorded and waited on at once, so destroying it right after is safe).
inline void comm_waits_for_compute(const Device& device) {
  cuda::make_current(device.impl());
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags", device);
  cudaError_t status = cudaEventRecord(event, compute_stream(device));
  if (status == cudaSuccess) status = cudaStreamWaitEvent(comm_stream(device), event, 0);
  const cudaError_t destroyed = cudaEventDestroy(event);
  check_cuda(status, "cudaEventRecord/cudaStreamWaitEvent (comm waits for compute)", device);
  check_cuda(destroyed, "cudaEventDestroy", device);
}

}  // namespace dpscope::detail
