// Times one training step (forward, cross-entropy, backward, SGD with momentum) of an MLP on cuda:0,
// with tracing off and on in alternating blocks, and prints one JSON line: untraced, traced (kernels
// timed by CUPTI), CUPTI timing spans that no recorder writes, and traced with CUDA events.
// bench/torch_mlp_step.py runs it side by side with PyTorch eager on the same GPU and prints the
// ratio; scripts/gpu-check.sh runs that at batch 128 and 4096.
//
// Usage: gpu_mlp_step_bench [MODEL=784-512-512-10] [BATCH=128] [STEPS=200]
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "dpscope/core/trace_sink.hpp"
#include "dpscope/trace/recorder.hpp"
#include "gpu_bench_common.hpp"

namespace {

using namespace dpscope;

// One way of running a step: tracing off (sink nullptr), or into `sink` with `timer` timing kernels.
struct Config {
  TraceSink* sink = nullptr;
  cuda::KernelTimer timer = cuda::KernelTimer::kCupti;
};

// Median seconds per step of blocks of `block` steps, each block between synchronized devices,
// blocks taking turns with each configuration, so that all see the same GPU clocks and caches. One
// median per configuration, in order.
std::vector<double> time_steps(gpu_bench::MlpStep& step, const Device& device,
                               std::span<const Config> configs, int trace_id, int steps) {
  for (int i = 0; i < 10; ++i) step.run();  // warm-up: cuBLAS handles, the caching allocator's blocks
  constexpr int kBlock = 10;
  std::vector<std::vector<double>> seconds(configs.size());
  for (int done = 0; done < static_cast<int>(configs.size()) * steps; done += kBlock) {
    const size_t which = static_cast<size_t>(done / kBlock) % configs.size();
    const Config& config = configs[which];
    cuda::set_kernel_timer(config.timer);
    device.attach_tracer(config.sink, config.sink != nullptr ? trace_id : -1);
    step.run();  // the timer is chosen, and CUPTI started, at the first traced kernel
    device.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBlock; ++i) step.run();
    device.synchronize();
    seconds[which].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                             kBlock);
    if (config.sink != nullptr) config.sink->flush();  // as the training loop does once per step
  }
  device.attach_tracer(nullptr, -1);
  cuda::set_kernel_timer(cuda::KernelTimer::kCupti);
  std::vector<double> medians;
  for (const std::vector<double>& s : seconds) medians.push_back(gpu_bench::median(s));
  return medians;
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
    std::vector<double> times;
    uint64_t untimed = 0;
    {
      auto tracer = TraceRecorder::open(trace_path, header, devices);
      const int trace_id = device.trace_id();  // the header's id, before the first detach
      NullTraceSink timer_only;                // the timer's cost without the recorder's
      using cuda::KernelTimer;
      const std::array<Config, 4> configs{Config{},
                                          Config{.sink = tracer.get(), .timer = KernelTimer::kCupti},
                                          Config{.sink = &timer_only, .timer = KernelTimer::kCupti},
                                          Config{.sink = tracer.get(), .timer = KernelTimer::kEvents}};
      times = time_steps(step, device, configs, trace_id, steps);
      untimed = cuda::untimed_kernel_spans(device.impl());
      tracer->close();
    }
    std::filesystem::remove(trace_path);
    std::printf(
        "{\"impl\":\"dpscope\",\"model\":\"%s\",\"batch\":%lld,\"device\":\"%s\",\"gpu\":\"%s\","
        "\"kernel_timer\":\"%s\",\"ms_per_step\":%.4f,\"ms_per_step_traced\":%.4f,"
        "\"ms_per_step_timer_only\":%.4f,\"ms_per_step_traced_events\":%.4f,\"untimed_spans\":%llu}\n",
        spec.c_str(), static_cast<long long>(batch), device.name().c_str(),
        cuda::physical_name(device.impl()).c_str(), cuda::kernel_timer_description().c_str(), times[0] * 1e3,
        times[1] * 1e3, times[2] * 1e3, times[3] * 1e3, static_cast<unsigned long long>(untimed));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_mlp_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
