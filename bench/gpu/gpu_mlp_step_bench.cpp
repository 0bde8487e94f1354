// Times one training step (forward, cross-entropy, backward, SGD with momentum) of an MLP on cuda:0,
// with tracing off and on in alternating blocks, and prints one JSON line.
// bench/torch_mlp_step.py runs it side by side with PyTorch eager on the same GPU and prints the
// ratio; scripts/gpu-check.sh runs that at batch 128 and 4096.
//
// Usage: gpu_mlp_step_bench [MODEL=784-512-512-10] [BATCH=128] [STEPS=200]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "dpscope/trace/recorder.hpp"
#include "gpu_bench_common.hpp"

namespace {

using namespace dpscope;

// Median seconds per step of blocks of `block` steps, each block between synchronized devices,
// blocks alternating tracing off and on (so both see the same GPU clocks and caches): {off, on}.
std::pair<double, double> time_steps(gpu_bench::MlpStep& step, const Device& device, TraceRecorder& tracer,
                                     int trace_id, int steps) {
  for (int i = 0; i < 10; ++i) step.run();  // warm-up: cuBLAS handles, the caching allocator's blocks
  constexpr int kBlock = 10;
  std::vector<double> off, on;
  for (int done = 0; done < 2 * steps; done += kBlock) {
    const bool traced = (done / kBlock) % 2 == 1;
    device.attach_tracer(traced ? &tracer : nullptr, traced ? trace_id : -1);
    device.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBlock; ++i) step.run();
    device.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kBlock;
    (traced ? on : off).push_back(s);
    if (traced) tracer.flush();  // as the training loop does once per step
  }
  device.attach_tracer(nullptr, -1);
  return {gpu_bench::median(off), gpu_bench::median(on)};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string spec = argc > 1 ? argv[1] : "784-512-512-10";
  try {
    const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 128;
    const int steps = argc > 3 ? std::stoi(argv[3]) : 200;
    DPS_CHECK(batch >= 1 && steps >= 10, ErrorKind::kUsage,
              "usage: gpu_mlp_step_bench [MODEL] [BATCH >= 1] [STEPS >= 10]");
    gpu_bench::require_gpu();
    const std::vector<Device> devices = cuda::make_devices({.count = 1});
    const Device& device = devices.front();
    gpu_bench::MlpStep step(spec, batch, device);

    const auto trace_path = std::filesystem::temp_directory_path() / "dpscope_gpu_mlp_step_bench.jsonl";
    TraceHeader header;
    header.clock = "measured";
    add_trace_device(header, device);
    std::pair<double, double> times;
    {
      auto tracer = TraceRecorder::open(trace_path, header, devices);
      const int trace_id = device.trace_id();  // the header's id, before the first detach
      times = time_steps(step, device, *tracer, trace_id, steps);
      tracer->close();
    }
    std::filesystem::remove(trace_path);
    std::printf(
        "{\"impl\":\"dpscope\",\"model\":\"%s\",\"batch\":%lld,\"device\":\"%s\",\"gpu\":\"%s\","
        "\"ms_per_step\":%.4f,\"ms_per_step_traced\":%.4f}\n",
        spec.c_str(), static_cast<long long>(batch), device.name().c_str(),
        cuda::physical_name(device.impl()).c_str(), times.first * 1e3, times.second * 1e3);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_mlp_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
