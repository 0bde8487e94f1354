// Measures what the simulator's timing model needs of a real GPU (docs/gpu.md, "Calibrating the simulator")
// and compares the simulated MLP step with the measured one. scripts/gpu-check.sh runs it and puts its output
// in the report's calibration section; docs/gpu.md says how the numbers go into a preset.
//
// The simulator costs a kernel launch_latency + max(flops / peak_flops, bytes / mem_bandwidth)
// (core/timing.hpp) from datasheet numbers. Measured here, each as a fraction of the preset's number:
//   GEMM efficiency        cublasSgemm 8192^3, FP32 with TF32 off (as dpscope's kernels run it)
//   memory bandwidth       a copy kernel over 1 GiB, bytes read + written per second
//   launch latency         back-to-back empty kernels on one stream, time per kernel
//   D2D copy rate          cudaMemcpyAsync device-to-device of 1 GiB, bytes read + written per second
//   model GEMMs            the MLP step's own products at batch 4096 (dpscope's kernels), FLOP/s
// then the MLP 784-512-512-10 training step at batch 128 and 4096: simulated (timing-only, on the
// preset as it is and on the preset calibrated by this run) against measured (cuda:0, data). The
// host time per kernel is fitted on the batch-128 step; batch 4096 is the prediction that checks
// the model (goal: within 10 %). It prints the [calibration] table to paste into the preset.
//
// Usage: gpu_calibrate [PRESET]   (default: h200 on an H200, else h100-sxm)
#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "calibrate_kernels.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "gpu_bench_common.hpp"

namespace {

using namespace dpscope;
using gpu_bench::check_cuda;

constexpr int kGpu = 0;  // logical GPUs all share physical GPU 0 on the machines at hand

void check_cublas(cublasStatus_t status, const char* call) {
  DPS_CHECK(status == CUBLAS_STATUS_SUCCESS, ErrorKind::kDevice, "{} on GPU {}: {}", call, kGpu,
            cublasGetStatusString(status));
}

// A cuBLAS handle on `stream`, destroyed on scope exit.
class Cublas {
 public:
  explicit Cublas(cudaStream_t stream) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    // TF32 off: PyTorch's default for matmul, and what dpscope's kernels use.
    check_cublas(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// A non-blocking stream on kGpu, destroyed on scope exit.
class CudaStream {
 public:
  CudaStream() {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate", kGpu);
  }
  ~CudaStream() { cudaStreamDestroy(stream_); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Median seconds of `body` (which enqueues work on `stream`) over `repeats` runs after 2 warm-ups.
template <typename Body>
double event_seconds(cudaStream_t stream, int repeats, Body body) {
  gpu_bench::EventTimer timer(kGpu, stream);
  std::vector<double> seconds;
  for (int r = 0; r < repeats + 2; ++r) {
    timer.start();
    body();
    const double s = timer.stop_seconds();
    if (r >= 2) seconds.push_back(s);
  }
  return gpu_bench::median(seconds);
}

// C = A B for square n x n matrices of values in [-1, 1): achieved FLOP/s.
double gemm_flops(cudaStream_t stream, int n) {
  const size_t bytes = static_cast<size_t>(n) * n * sizeof(float);
  gpu_bench::DeviceBuffer a(kGpu, bytes), b(kGpu, bytes), c(kGpu, bytes);
  const size_t count = static_cast<size_t>(n) * n;
  check_cuda(gpu_bench::launch_fill_kernel(static_cast<float*>(a.data()), count, 1, 1024, stream),
             "fill_kernel<<<>>>", kGpu);
  check_cuda(gpu_bench::launch_fill_kernel(static_cast<float*>(b.data()), count, 2, 1024, stream),
             "fill_kernel<<<>>>", kGpu);
  Cublas cublas(stream);
  const float one = 1.0f, zero = 0.0f;
  const double s = event_seconds(stream, 5, [&] {
    check_cublas(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                             static_cast<const float*>(a.data()), n, static_cast<const float*>(b.data()), n,
                             &zero, static_cast<float*>(c.data()), n),
                 "cublasSgemm");
  });
  return 2.0 * n * static_cast<double>(n) * n / s;
}

// Bytes read + written per second by the copy kernel over `bytes`.
double kernel_bandwidth(cudaStream_t stream, size_t bytes) {
  gpu_bench::DeviceBuffer in(kGpu, bytes), out(kGpu, bytes);
  check_cuda(cudaMemsetAsync(in.data(), 0, bytes, stream), "cudaMemsetAsync", kGpu);
  int sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, kGpu), "cudaDeviceGetAttribute",
             kGpu);
  const double s = event_seconds(stream, 10, [&] {
    check_cuda(gpu_bench::launch_copy_kernel(in.data(), out.data(), bytes, sms * 8, stream),
               "copy_kernel<<<>>>", kGpu);
  });
  return 2.0 * static_cast<double>(bytes) / s;
}

// Bytes read + written per second by cudaMemcpyAsync device-to-device of `bytes`.
double memcpy_bandwidth(cudaStream_t stream, size_t bytes) {
  gpu_bench::DeviceBuffer src(kGpu, bytes), dst(kGpu, bytes);
  check_cuda(cudaMemsetAsync(src.data(), 0, bytes, stream), "cudaMemsetAsync", kGpu);
  const double s = event_seconds(stream, 10, [&] {
    check_cuda(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync", kGpu);
  });
  return 2.0 * static_cast<double>(bytes) / s;
}

// Seconds per kernel of `count` empty kernels launched back to back on one stream.
double launch_seconds(cudaStream_t stream, int count) {
  return event_seconds(stream, 5,
                       [&] {
                         for (int i = 0; i < count; ++i)
                           check_cuda(gpu_bench::launch_empty_kernel(stream), "empty_kernel<<<>>>", kGpu);
                       }) /
         count;
}

// Achieved FLOP/s of the matrix products of one training step of the MLP `spec` at `batch` rows,
// run by dpscope's own kernels (cuBLAS as the runtime calls it) on `device`: forward, weight and
// input gradients of every Linear (the first one has no input gradient), timed between
// synchronizations over `repeats` steps. These shapes, not a square 8192^3, are what a training
// step's GEMMs reach.
double model_gemm_flops(const Device& device, const std::string& spec, int64_t batch, int repeats) {
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(spec);
  struct Layer {
    Tensor x, w, y, dw, dx;
  };
  std::vector<Layer> layers;
  double flops_per_step = 0.0;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    const int64_t in = sizes[i], out = sizes[i + 1];
    layers.push_back({Tensor::full({batch, in}, 0.5f, device), Tensor::full({out, in}, 0.25f, device),
                      Tensor::zeros({batch, out}, device), Tensor::zeros({out, in}, device),
                      Tensor::zeros({batch, in}, device)});
    flops_per_step += 2.0 * static_cast<double>(batch * in * out) * (i == 0 ? 2 : 3);
  }
  const auto step = [&] {
    for (Layer& l : layers) kernels::linear_forward(l.x, l.w, Tensor(), l.y);
    for (size_t i = layers.size(); i-- > 0;) {
      Layer& l = layers[i];
      kernels::linear_grad_weight(l.y, l.x, l.dw, false);
      if (i > 0) kernels::linear_grad_input(l.y, l.w, l.dx);
    }
  };
  for (int i = 0; i < 3; ++i) step();
  device.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) step();
  device.synchronize();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / repeats;
  return flops_per_step / s;
}

// Seconds per MLP training step: simulated (timing-only on `preset`) and measured on `cuda0`.
double simulated_step_seconds(const HardwarePreset& preset, const std::string& spec, int64_t batch) {
  constexpr int kSteps = 50;
  const Device sim = Device::sim(0, preset);
  gpu_bench::MlpStep simulated(spec, batch, sim, /*timing_only=*/true);
  simulated.run();  // the first step allocates the optimizer state, as on the GPU
  const int64_t sim_start_ns = sim.synchronize();
  for (int i = 0; i < kSteps; ++i) simulated.run();
  return static_cast<double>(sim.synchronize() - sim_start_ns) * 1e-9 / kSteps;
}

std::pair<double, double> step_seconds(const HardwarePreset& preset, const Device& cuda0,
                                       const std::string& spec, int64_t batch) {
  constexpr int kSteps = 50;
  const double sim_s = simulated_step_seconds(preset, spec, batch);
  gpu_bench::MlpStep measured(spec, batch, cuda0);
  for (int i = 0; i < 10; ++i) measured.run();
  cuda0.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) measured.run();
  cuda0.synchronize();
  const double real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kSteps;
  return {sim_s, real_s};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    gpu_bench::require_gpu();
    cudaDeviceProp props{};
    check_cuda(cudaGetDeviceProperties(&props, kGpu), "cudaGetDeviceProperties", kGpu);
    const std::string gpu_name = props.name;
    const std::string preset_id =
        argc > 1 ? argv[1] : (gpu_name.find("H200") != std::string::npos ? "h200" : "h100-sxm");
    const HardwarePreset preset = find_preset(preset_id);
    check_cuda(cudaSetDevice(kGpu), "cudaSetDevice", kGpu);

    double flops = 0.0, kernel_bps = 0.0, copy_bps = 0.0, launch_s = 0.0;
    {
      CudaStream stream;
      flops = gemm_flops(stream.get(), 8192);
      kernel_bps = kernel_bandwidth(stream.get(), size_t{1} << 30);
      copy_bps = memcpy_bandwidth(stream.get(), size_t{1} << 30);
      launch_s = launch_seconds(stream.get(), 10000);
    }
    const double gemm_fraction = flops / preset.peak_flops;
    const double bandwidth_fraction = kernel_bps / preset.mem_bandwidth_bytes_per_s;
    const double copy_fraction = copy_bps / preset.mem_bandwidth_bytes_per_s;

    std::printf("# gpu_calibrate: GPU %d = %s (%d SMs), against preset %s (%s)\n", kGpu, gpu_name.c_str(),
                props.multiProcessorCount, preset.id.c_str(), preset.name.c_str());
    std::printf("%-44s%16s%16s%10s\n", "quantity", "measured", "preset", "fraction");
    std::printf("%-44s%11.2f TF/s%11.2f TF/s%10.3f\n", "GEMM FP32 8192^3, TF32 off (cublasSgemm)",
                flops / 1e12, preset.peak_flops / 1e12, gemm_fraction);
    std::printf("%-44s%11.1f GB/s%11.1f GB/s%10.3f\n", "memory bandwidth (copy kernel, read + write)",
                kernel_bps / 1e9, preset.mem_bandwidth_bytes_per_s / 1e9, bandwidth_fraction);
    std::printf("%-44s%11.1f GB/s%11.1f GB/s%10.3f\n", "D2D cudaMemcpy rate (read + write)", copy_bps / 1e9,
                preset.mem_bandwidth_bytes_per_s / 1e9, copy_fraction);
    std::printf("%-44s%13.2f us%13.2f us%10.3f\n", "launch latency (back-to-back empty kernels)",
                launch_s * 1e6, preset.launch_latency_ns / 1e3, launch_s * 1e9 / preset.launch_latency_ns);

    const std::vector<Device> devices = cuda::make_devices({.count = 1});
    const std::string spec = "784-512-512-10";
    const double model_flops = model_gemm_flops(devices.front(), spec, 4096, 20);
    const double model_gemm_fraction = std::min(1.0, model_flops / preset.peak_flops);
    std::printf("%-44s%11.2f TF/s%11.2f TF/s%10.3f\n", "GEMMs of the MLP step, batch 4096 (dpscope)",
                model_flops / 1e12, preset.peak_flops / 1e12, model_gemm_fraction);

    // Measured steps, and the datasheet preset's simulation of them.
    const std::vector<int64_t> batches{128, 4096};
    std::vector<std::pair<double, double>> steps;  // {simulated as is, measured} per batch
    for (const int64_t batch : batches) steps.push_back(step_seconds(preset, devices.front(), spec, batch));

    // What a preset takes from this run (assets/presets/<id>.toml; docs/gpu.md "Calibration"): the
    // fractions measured above, and the runtime's host time per kernel, fitted so that the
    // simulated batch-128 step (host-bound: its kernels are shorter than issuing them) lasts the
    // measured one. Batch 4096 (GPU-bound) is then the prediction that checks the model.
    HardwarePreset calibrated = preset;
    calibrated.compute_efficiency = model_gemm_fraction;
    calibrated.bandwidth_fraction = std::min(1.0, bandwidth_fraction);
    calibrated.launch_latency_ns = launch_s * 1e9;
    double low_ns = 0.0, high_ns = 100e3;
    for (int i = 0; i < 40; ++i) {
      calibrated.host_issue_ns = (low_ns + high_ns) / 2;
      (simulated_step_seconds(calibrated, spec, batches.front()) < steps.front().second ? low_ns : high_ns) =
          calibrated.host_issue_ns;
    }
    calibrated.host_issue_ns = std::round((low_ns + high_ns) / 2 / 10) * 10;
    std::printf("%-44s%13.2f us%16s%10s\n", "host time per kernel (fitted, batch 128)",
                calibrated.host_issue_ns / 1e3, "-", "-");

    std::printf("\n# proposed calibration for assets/presets/%s.toml, measured on %s\n", preset.id.c_str(),
                gpu_name.c_str());
    std::printf("[calibration]\n");
    std::printf("measured_on = \"%s (gpu_calibrate)\"\n", gpu_name.c_str());
    std::printf(
        "gemm_efficiency = %.3f            # the MLP step's GEMMs / fp32_tflops (8192^3 reaches %.3f)\n",
        calibrated.compute_efficiency, gemm_fraction);
    std::printf("memory_bandwidth_fraction = %.3f  # achieved kernel bandwidth / memory_bandwidth_gbps\n",
                calibrated.bandwidth_fraction);
    std::printf("launch_latency_us = %.2f           # measured per back-to-back kernel\n", launch_s * 1e6);
    std::printf("host_issue_us = %.2f               # dpscope's host time per kernel (fitted, batch 128)\n",
                calibrated.host_issue_ns / 1e3);
    std::printf("# (D2D cudaMemcpy reaches %.3f of memory_bandwidth_gbps)\n\n", copy_fraction);

    std::printf("%-40s%16s%16s%16s%12s\n", "MLP training step (SGD momentum, CE)", "preset as is",
                "calibrated", "measured", "calib/real");
    for (size_t i = 0; i < batches.size(); ++i) {
      const int64_t batch = batches[i];
      const auto [sim_s, real_s] = steps[i];
      const double calibrated_s = simulated_step_seconds(calibrated, spec, batch);
      const std::string role = i == 0 ? "fitted" : "predicted";
      std::printf("%-40s%13.1f us%13.1f us%13.1f us%12.2f\n",
                  fmt::format("{} batch {} ({})", spec, batch, role).c_str(), sim_s * 1e6, calibrated_s * 1e6,
                  real_s * 1e6, calibrated_s / real_s);
      gpu_bench::print_row(
          fmt::format("MLP {} batch {}: simulated step ({} as is) vs measured (us)", spec, batch, preset.id),
          fmt::format("{:.1f}", sim_s * 1e6), fmt::format("measured {:.1f}", real_s * 1e6), sim_s / real_s,
          preset.calibrated_on.empty() ? "-" : "0.90 - 1.10");
      gpu_bench::print_row(fmt::format("MLP {} batch {}: simulated step (calibrated by this run, {}) vs "
                                       "measured (us)",
                                       spec, batch, role),
                           fmt::format("{:.1f}", calibrated_s * 1e6),
                           fmt::format("measured {:.1f}", real_s * 1e6), calibrated_s / real_s,
                           "0.90 - 1.10");
    }
    gpu_bench::print_row("FP32 GEMM 8192^3 (TFLOP/s)", fmt::format("{:.2f}", flops / 1e12),
                         fmt::format("preset {:.1f}", preset.peak_flops / 1e12), gemm_fraction, "-");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_calibrate: %s\n", e.what());
    return 1;
  }
  return 0;
}
