// What the GPU benchmarks in bench/gpu/ share: CUDA return codes turned into dpscope::Error, a
// CUDA-event stopwatch, medians, the MLP training step they time, and the tab-separated result
// lines ("bench-row", "bench-value") that scripts/gpu-check.sh collects into its report.
// Built only when the build has CUDA (bench/CMakeLists.txt).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"

namespace dpscope::gpu_bench {

// Throws kDevice "<call> on GPU <gpu>: <CUDA's message>" unless `status` is cudaSuccess.
inline void check_cuda(cudaError_t status, const char* call, int gpu) {
  DPS_CHECK(status == cudaSuccess, ErrorKind::kDevice, "{} on GPU {}: {} ({})", call, gpu,
            cudaGetErrorString(status), cudaGetErrorName(status));
}

// Throws kDevice "needs a CUDA GPU: <why>" on a machine (or a build) without one.
inline void require_gpu() {
  const std::string why = cuda::unavailable_reason();
  DPS_CHECK(why.empty(), ErrorKind::kDevice, "needs a CUDA GPU: {}", why);
}

// Times work enqueued on one stream with two CUDA events (about 0.5 us resolution).
class EventTimer {
 public:
  EventTimer(int gpu, cudaStream_t stream) : gpu_(gpu), stream_(stream) {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate", gpu_);
    if (cudaError_t status = cudaEventCreate(&stop_); status != cudaSuccess) {
      cudaEventDestroy(start_);
      check_cuda(status, "cudaEventCreate", gpu_);
    }
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start() { check_cuda(cudaEventRecord(start_, stream_), "cudaEventRecord", gpu_); }
  // Records the stop event, waits for it and returns the seconds since start().
  double stop_seconds() {
    check_cuda(cudaEventRecord(stop_, stream_), "cudaEventRecord", gpu_);
    check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize", gpu_);
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime", gpu_);
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  int gpu_;
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// A device buffer from cudaMalloc, freed on scope exit (the benchmarks' plain-CUDA references).
class DeviceBuffer {
 public:
  DeviceBuffer(int gpu, size_t bytes) : gpu_(gpu), bytes_(bytes) {
    check_cuda(cudaSetDevice(gpu), "cudaSetDevice", gpu);
    check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc", gpu);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  int gpu_;
  size_t bytes_;
  void* data_ = nullptr;
};

inline double median(std::vector<double> values) {
  DPS_ASSERT(!values.empty(), "median of no values");
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2),
                   values.end());
  return values[values.size() / 2];
}

// One row of gpu-check's benchmark table: what was measured, dpscope's number, the reference's,
// their ratio and the goal ("-" for none). Tab-separated so the script needs no parser.
inline void print_row(const std::string& what, const std::string& ours, const std::string& reference,
                      double ratio, const std::string& goal) {
  std::printf("bench-row\t%s\t%s\t%s\t%.2f\t%s\n", what.c_str(), ours.c_str(), reference.c_str(), ratio,
              goal.c_str());
}
// A named number another stage reads (the all-reduce stage reads d2d_copy_gbps).
inline void print_value(const std::string& name, double value) {
  std::printf("bench-value %s %.3f\n", name.c_str(), value);
}

// The benchmarks' training step, the same one train_step_bench and bench/torch_mlp_step.py run:
// an MLP with ReLU, cross-entropy, SGD(lr 0.01, momentum 0.9), on random inputs and labels.
struct MlpStep {
  std::unique_ptr<Sequential> model;
  std::unique_ptr<SGD> optimizer;
  CrossEntropyLoss loss;
  Tensor x;  // [batch, inputs]
  Tensor y;  // [batch] class indices

  // timing_only: no data (meta tensors), as a simulated device's timing-only mode runs.
  MlpStep(const std::string& spec, int64_t batch, const Device& device, bool timing_only = false);
  // One step in the training loop's phases (a traced device that samples its kernels times each
  // phase of the steps it does not sample).
  void run() {
    const Device& device = x.device();
    {
      PhaseScope phase(device, Phase::kForward);
      optimizer->zero_grad();
      const Tensor out = model->forward(x);
      loss.forward(out, y);
    }
    {
      PhaseScope phase(device, Phase::kBackward);
      model->backward(loss.backward());
    }
    PhaseScope phase(device, Phase::kOptimizer);
    optimizer->step();
  }
};

inline MlpStep::MlpStep(const std::string& spec, int64_t batch, const Device& device, bool timing_only)
    : model(timing_only ? Sequential::mlp_timing_only(spec, device) : Sequential::mlp(spec, device, 0)) {
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(spec);
  optimizer = std::make_unique<SGD>(model->parameters(), SgdOptions{.lr = 0.01, .momentum = 0.9});
  if (timing_only) {
    x = Tensor::meta({batch, sizes.front()}, device);
    y = Tensor::meta({batch}, device, MemoryCategory::kActivations, DType::kI64);
    return;
  }
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<float> xs(static_cast<size_t>(batch * sizes.front()));
  for (float& v : xs) v = normal(gen);
  std::vector<int64_t> ys(static_cast<size_t>(batch));
  for (int64_t& v : ys) v = static_cast<int64_t>(gen() % static_cast<uint32_t>(sizes.back()));
  x = Tensor::from_floats(xs, {batch, sizes.front()}, device);
  y = Tensor::from_ints(ys, {batch}, device);
}

}  // namespace dpscope::gpu_bench
