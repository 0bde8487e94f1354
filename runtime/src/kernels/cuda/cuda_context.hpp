// What every CUDA op of the kernel layer needs before it enqueues work (gpu_ops.cpp, gpu_linear.cpp):
// the device made current, its current stream, a cuBLAS handle, a small scratch buffer, and the
// status checks that turn a CUDA or cuBLAS failure into one dpscope::Error.
//
// Per-thread state: cuBLAS handles and scratch buffers per (host thread, physical GPU, stream). A
// handle belongs to one host thread (cuBLAS handles are not thread-safe), and keying it by stream
// too keeps its internal workspace from serving two streams at once (a thread driving two logical
// GPUs on one physical GPU); a thread that drives one stream, the usual case, has one handle per
// GPU. The stream is set on the handle at every call. A scratch buffer per stream means two streams
// never race on one buffer, and work on one stream reuses it in stream order. Both live in a thread_local
// table created lazily on the first CUDA kernel of a thread and destroyed at thread exit (the handles and
// buffers freed then). The scratch is outside the device's memory accounting, like cuBLAS's own workspace: a
// few KiB, or 8 bytes per row of a cross-entropy batch.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "dpscope/base/error.hpp"
#include "dpscope/core/device.hpp"

namespace dpscope::kernels::gpu {

// Throws kDevice "<op> on <device>: <cudaGetErrorString>" unless `status` is cudaSuccess.
void check_cuda(cudaError_t status, const char* op, const Device& device);
// The same for a cuBLAS status ("<op> on cuda:0: cuBLAS CUBLAS_STATUS_...: <description>").
void check_cublas(cublasStatus_t status, const char* op, const Device& device);

// The launch context of one op on one device from the calling thread.
struct Launch {
  const Device& device;
  const char* op;
  cudaStream_t stream;
  int physical_gpu;
};

// check_cuda for the launch's op and device (a launcher's status, a memcpy's).
inline void check(const Launch& launch, cudaError_t status) { check_cuda(status, launch.op, launch.device); }

// `value` as an int (a cuBLAS dimension, a grid size), or kInvalidArgument "<op> on cuda:N: <what>
// <value> exceeds the int range" rather than a silent truncation.
int checked_int(int64_t value, const char* what, const Launch& launch);

// Makes `device` (a cuda device) current for this thread and returns its current stream.
Launch begin(const Device& device, const char* op);

// This thread's cuBLAS handle for the launch's physical GPU and stream, bound to that stream, in
// CUBLAS_DEFAULT_MATH mode (no TF32: results match the CPU's float32 products).
cublasHandle_t cublas_for(const Launch& launch);

// At least `bytes` of device memory for scratch on the launch's stream (valid until the next call
// for the same stream from this thread; reuse is ordered by the stream).
void* scratch_for(const Launch& launch, size_t bytes);

}  // namespace dpscope::kernels::gpu
