// Per-thread CUDA state of the kernel layer (see cuda_context.hpp): cuBLAS handles, scratch buffers
// and the status checks. Used by every src/kernels/cuda/*.cu.
#include "cuda_context.hpp"

#include <cstdint>
#include <map>
#include <utility>

#include "cublas_library.hpp"
#include "dpscope/core/cuda.hpp"

namespace dpscope::kernels::gpu {

namespace {

// The calling thread's handles and buffers. A thread_local (not a global: each host thread owns its
// own) because cuBLAS handles belong to a thread and must be destroyed on it, at its exit. The
// destructor runs when CUDA may already be shutting down (the main thread at process exit), so it
// ignores the statuses it gets: there is nobody left to report to.
class ThreadState {
 public:
  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
  ~ThreadState() {
    for (auto& [key, handle] : cublas_) {
      if (cudaSetDevice(key.first) == cudaSuccess) cublas_library().destroy(handle);
    }
    for (auto& [key, buffer] : scratch_) {
      if (cudaSetDevice(key.first) == cudaSuccess) cudaFree(buffer.data);
    }
  }

  cublasHandle_t cublas(const Launch& launch) {
    const std::pair<int, cudaStream_t> key{launch.physical_gpu, launch.stream};
    auto it = cublas_.find(key);
    if (it == cublas_.end()) {
      const CublasLibrary& lib = cublas_library();
      cublasHandle_t handle = nullptr;
      check_cublas(lib.create(&handle), launch.op, launch.device);
      it = cublas_.emplace(key, handle).first;
      // FP32 products in full precision: CUBLAS_DEFAULT_MATH allows no TF32 for cublasSgemm (PyTorch's
      // default since 1.12, torch.backends.cuda.matmul.allow_tf32 = False).
      check_cublas(lib.set_math_mode(handle, CUBLAS_DEFAULT_MATH), launch.op, launch.device);
    }
    check_cublas(cublas_library().set_stream(it->second, launch.stream), launch.op, launch.device);
    return it->second;
  }

  void* scratch(const Launch& launch, size_t bytes) {
    Buffer& buffer = scratch_[{launch.physical_gpu, launch.stream}];
    if (buffer.bytes >= bytes) return buffer.data;
    // Grow to a power of two (at least 64 KiB) so a growing batch reallocates rarely. Work already
    // queued on the stream may still read the old buffer: wait for it before freeing.
    size_t grown = size_t{64} << 10;
    while (grown < bytes) grown *= 2;
    if (buffer.data != nullptr) {
      check_cuda(cudaStreamSynchronize(launch.stream), launch.op, launch.device);
      check_cuda(cudaFree(buffer.data), launch.op, launch.device);
      buffer = Buffer{};
    }
    check_cuda(cudaMalloc(&buffer.data, grown), launch.op, launch.device);
    buffer.bytes = grown;
    return buffer.data;
  }

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  std::map<std::pair<int, cudaStream_t>, cublasHandle_t> cublas_;  // (physical GPU, stream) -> handle
  std::map<std::pair<int, cudaStream_t>, Buffer> scratch_;         // (physical GPU, stream) -> buffer
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

}  // namespace

void check_cuda(cudaError_t status, const char* op, const Device& device) {
  if (status == cudaSuccess) return;
  throw Error(ErrorKind::kDevice, fmt::format("{} on {}: {}", op, device.name(), cudaGetErrorString(status)));
}

void check_cublas(cublasStatus_t status, const char* op, const Device& device) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(ErrorKind::kDevice,
              fmt::format("{} on {}: cuBLAS {}: {}", op, device.name(), cublas_library().status_name(status),
                          cublas_library().status_string(status)));
}

int checked_int(int64_t value, const char* what, const Launch& launch) {
  DPS_CHECK(value <= INT32_MAX, ErrorKind::kInvalidArgument, "{} on {}: {} {} exceeds the int range",
            launch.op, launch.device.name(), what, value);
  return static_cast<int>(value);
}

Launch begin(const Device& device, const char* op) {
  const DeviceImpl& impl = device.impl();
  cuda::make_current(impl);
  return Launch{device, op, static_cast<cudaStream_t>(cuda::current_stream_handle(impl)),
                cuda::physical_index(impl)};
}

cublasHandle_t cublas_for(const Launch& launch) { return thread_state().cublas(launch); }

void* scratch_for(const Launch& launch, size_t bytes) { return thread_state().scratch(launch, bytes); }

}  // namespace dpscope::kernels::gpu
