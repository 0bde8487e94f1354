// Times one training step (forward, cross-entropy, backward, SGD with momentum) of an MLP on cuda:0,
// with tracing off and on in alternating blocks, and prints one JSON line: untraced, traced (kernels
// timed by CUPTI), CUPTI timing spans that no recorder writes, and traced with CUDA events.
// bench/torch_mlp_step.py runs it side by side with PyTorch eager on the same GPU and prints the
// ratio; scripts/gpu-check.sh runs that at batch 128 and 4096.
//
// An experiment rides along (docs/gpu.md, "Results", the tracing paragraph): the same step captured once into
// a CUDA graph and replayed, untraced and with CUPTI recording every kernel of the replays. Tracing a step
// costs the launching thread 2-4 us per kernel; a replay launches once per step, so these two columns say
// whether graphs would bring tracing under 5 % before the runtime captures steps. The replayed step's
// parameters are compared with the eager step's ("graph_max_abs_diff").
//
// Usage: gpu_mlp_step_bench [MODEL=784-512-512-10] [BATCH=128] [STEPS=200]
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "dpscope/core/trace_sink.hpp"
#include "dpscope/trace/recorder.hpp"
#include "gpu_bench_common.hpp"

namespace {

using namespace dpscope;

// One way of running a step: tracing off (sink nullptr), or into `sink` with `timer` timing kernels
// on one step in `kernels_every` (sampled tracing: the others are timed per phase).
struct Config {
  TraceSink* sink = nullptr;
  cuda::KernelTimer timer = cuda::KernelTimer::kCupti;
  int64_t kernels_every = 1;
  bool flush_soon = true;  // hands the step's lines to the writer after every step, as training does
};

// Where a sampled configuration's time goes, from the host's clock around each step (at a small
// batch the host issues the step and the GPU keeps up, so host time is step time): the sampled
// step, the step after it (which lets the timer go), and the median of the rest.
struct StepSplit {
  std::vector<double> sampled, after, other;
};

// Kernels never traced: every step of a block timed per phase (the floor of sampled tracing).
constexpr int64_t kPhasesOnly = std::numeric_limits<int64_t>::max();

// Median seconds per step of blocks of steps, each block between synchronized devices, blocks
// taking turns with each configuration, so that all see the same GPU clocks and caches. A block is
// 10 steps, or `kernels_every` steps when sampling: it holds one sampled step (its first), so the
// block's mean carries the sampled step's share. One median per configuration, in order.
std::vector<double> time_steps(gpu_bench::MlpStep& step, const Device& device,
                               std::span<const Config> configs, int trace_id, int steps, size_t split_config,
                               StepSplit& split) {
  for (int i = 0; i < 10; ++i) step.run();  // warm-up: cuBLAS handles, the caching allocator's blocks
  constexpr int64_t kBlock = 10;
  std::vector<std::vector<double>> seconds(configs.size());
  std::vector<int64_t> done(configs.size(), 0);
  for (size_t turn = 0;; ++turn) {
    const size_t which = turn % configs.size();
    if (which == 0 && done[0] >= steps) break;
    const Config& config = configs[which];
    const bool phases_only = config.kernels_every == kPhasesOnly;
    const int64_t block = config.kernels_every > 1 && !phases_only ? config.kernels_every : kBlock;
    cuda::set_kernel_timer(config.timer);
    device.attach_tracer(config.sink, config.sink != nullptr ? trace_id : -1);
    device.set_trace_kernels_every(config.kernels_every);
    device.set_step(phases_only ? 1 : -1);  // phases only: CUPTI never starts
    step.run();  // the timer is chosen, and CUPTI started, at the first traced kernel
    device.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    for (int64_t i = 0; i < block; ++i) {
      device.set_step(phases_only ? i + 1 : i);  // as the training loop numbers its steps
      step.run();
      if (config.sink != nullptr && config.flush_soon)
        config.sink->flush_soon();  // as the training loop does
      if (which == split_config) {
        const auto now = std::chrono::steady_clock::now();
        const double s = std::chrono::duration<double>(now - last).count();
        (i == 0 ? split.sampled : i == 1 ? split.after : split.other).push_back(s);
        last = now;
      }
    }
    device.set_step(-1);
    device.synchronize();
    seconds[which].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                             static_cast<double>(block));
    done[which] += block;
  }
  device.attach_tracer(nullptr, -1);
  device.set_trace_kernels_every(1);
  cuda::set_kernel_timer(cuda::KernelTimer::kCupti);
  std::vector<double> medians;
  for (const std::vector<double>& s : seconds) medians.push_back(gpu_bench::median(s));
  return medians;
}

// `text` with the characters a JSON string cannot hold as they are replaced by spaces.
std::string json_safe(std::string text) {
  for (char& c : text)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = ' ';
  return text;
}

// The step captured into a CUDA graph on the device's compute stream (the step's kernels all run
// there), or why it could not be.
class GraphStep {
 public:
  GraphStep(gpu_bench::MlpStep& step, const Device& device)
      : stream_(static_cast<cudaStream_t>(cuda::stream_handle(device.impl(), StreamKind::kCompute))),
        gpu_(cuda::physical_index(device.impl())) {
    device.synchronize();
    // Relaxed: the caching allocator may still call cudaMalloc (it should not, after warm-up).
    if (const cudaError_t s = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
        s != cudaSuccess) {
      error_ = fmt::format("cudaStreamBeginCapture: {}", cudaGetErrorString(s));
      return;
    }
    std::string during;
    try {
      step.run();  // recorded, not run: the parameters do not change
    } catch (const std::exception& e) {
      during = e.what();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (!during.empty() || ended != cudaSuccess) {
      error_ = !during.empty() ? during : fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(ended));
      if (graph != nullptr) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      return;
    }
    size_t nodes = 0;
    cudaGraphGetNodes(graph, nullptr, &nodes);
    nodes_ = nodes;
    const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      error_ = fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(made));
      exec_ = nullptr;
    }
  }
  ~GraphStep() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  GraphStep(const GraphStep&) = delete;
  GraphStep& operator=(const GraphStep&) = delete;

  bool ok() const { return exec_ != nullptr; }
  const std::string& error() const { return error_; }
  size_t nodes() const { return nodes_; }
  void replay() { gpu_bench::check_cuda(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch", gpu_); }

 private:
  cudaStream_t stream_;
  int gpu_;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
  std::string error_;
};

// Every parameter of `step`'s model, in order, copied to the host.
std::vector<float> parameters_of(gpu_bench::MlpStep& step) {
  std::vector<float> all;
  for (Parameter* p : step.model->parameters()) {
    const std::vector<float> v = p->data.to_vector();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

struct GraphResult {
  double untraced_s = -1;  // per replayed step
  double cupti_s = -1;     // per replayed step, CUPTI recording its kernels
  double max_abs_diff = -1;
  size_t nodes = 0;
  std::string error;
};

// The experiment: a fresh model (same seed as `eager`, which has run `eager_steps` steps by now)
// warmed up with 10 eager steps, captured, then replayed `steps` times in blocks taking turns
// untraced and with CUPTI on; its parameters are then compared with `eager`'s after as many
// eager steps as this one has taken.
GraphResult time_graph_steps(const std::string& spec, int64_t batch, const Device& device, int steps) {
  GraphResult result;
  gpu_bench::MlpStep eager(spec, batch, device);
  gpu_bench::MlpStep step(spec, batch, device);
  for (int i = 0; i < 10; ++i) step.run();
  step.loss.set_check_targets(false);  // read back on the host: not capturable (the targets stay fixed)
  GraphStep graph(step, device);
  result.nodes = graph.nodes();
  if (!graph.ok()) {
    result.error = graph.error();
    return result;
  }
  NullTraceSink timer_only;
  // Detached on every way out, before timer_only goes (a throw included).
  struct Detach {
    const Device& device;
    ~Detach() {
      try {
        device.attach_tracer(nullptr, -1);
      } catch (...) {
      }
    }
  } detach{device};
  constexpr int kBlock = 10;
  std::vector<double> seconds[2];
  int replays = 0;
  for (int done = 0; done < 2 * steps; done += kBlock) {
    const bool cupti = (done / kBlock) % 2 == 1;
    if (cupti) {
      // CUPTI starts at a traced device's first kernel: one eager step, untimed, starts it.
      cuda::set_kernel_timer(cuda::KernelTimer::kCupti);
      device.attach_tracer(&timer_only, 0);
      step.run();
      ++replays;  // counted with the replays: the parameters moved one step
    } else {
      device.attach_tracer(nullptr, -1);
    }
    device.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBlock; ++i) graph.replay();
    device.synchronize();
    seconds[cupti ? 1 : 0].push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kBlock);
    replays += kBlock;
  }
  device.attach_tracer(nullptr, -1);
  result.untraced_s = gpu_bench::median(seconds[0]);
  result.cupti_s = gpu_bench::median(seconds[1]);
  for (int i = 0; i < 10 + replays; ++i) eager.run();
  const std::vector<float> a = parameters_of(eager);
  const std::vector<float> b = parameters_of(step);
  result.max_abs_diff = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    result.max_abs_diff = std::max(result.max_abs_diff, static_cast<double>(std::fabs(a[i] - b[i])));
  if (a.size() != b.size()) result.max_abs_diff = INFINITY;
  return result;
}

// Microseconds per call of what an unsampled step pays per phase boundary, on an idle GPU: a raw
// cudaEventRecord, the device's record (an event from its pool, then cudaEventRecord), a query and
// an elapsed-time read of a completed event, and the trace's per-step hand-off to its writer.
struct CallCosts {
  double event_record = 0, device_record = 0, event_query = 0, event_elapsed = 0, flush_soon = 0;
};

CallCosts time_calls(const Device& device, TraceSink& sink) {
  constexpr int kCalls = 20000;
  const auto us_per_call = [](auto&& body) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) body();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kCalls;
  };
  const auto stream = static_cast<cudaStream_t>(cuda::stream_handle(device.impl(), StreamKind::kCompute));
  const int gpu = cuda::physical_index(device.impl());
  cudaEvent_t a = nullptr;
  cudaEvent_t b = nullptr;
  gpu_bench::check_cuda(cudaEventCreate(&a), "cudaEventCreate", gpu);
  gpu_bench::check_cuda(cudaEventCreate(&b), "cudaEventCreate", gpu);
  CallCosts costs;
  device.synchronize();
  costs.event_record = us_per_call([&] { (void)cudaEventRecord(a, stream); });
  device.synchronize();
  costs.device_record = us_per_call([&] { (void)device.impl().record(StreamKind::kCompute); });
  device.synchronize();
  gpu_bench::check_cuda(cudaEventRecord(b, stream), "cudaEventRecord", gpu);
  gpu_bench::check_cuda(cudaEventSynchronize(b), "cudaEventSynchronize", gpu);
  costs.event_query = us_per_call([&] { (void)cudaEventQuery(b); });
  float ms = 0;
  costs.event_elapsed = us_per_call([&] { (void)cudaEventElapsedTime(&ms, a, b); });
  costs.flush_soon = us_per_call([&] { sink.flush_soon(); });
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return costs;
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
    StepSplit split;
    CallCosts calls;
    uint64_t untimed = 0;
    {
      auto tracer = TraceRecorder::open(trace_path, header, devices);
      const int trace_id = device.trace_id();  // the header's id, before the first detach
      NullTraceSink timer_only;                // the timer's cost without the recorder's
      using cuda::KernelTimer;
      const std::array<Config, 9> configs{
          Config{}, Config{.sink = tracer.get(), .timer = KernelTimer::kCupti},
          Config{.sink = &timer_only, .timer = KernelTimer::kCupti},
          Config{.sink = tracer.get(), .timer = KernelTimer::kEvents},
          Config{.sink = tracer.get(), .timer = KernelTimer::kCupti, .kernels_every = 10},
          Config{.sink = tracer.get(), .timer = KernelTimer::kCupti, .kernels_every = 50},
          Config{.sink = tracer.get(), .timer = KernelTimer::kCupti, .kernels_every = kPhasesOnly},
          // Where the phases' cost goes: without the per-step hand-off, and without the recorder.
          Config{.sink = tracer.get(),
                 .timer = KernelTimer::kCupti,
                 .kernels_every = kPhasesOnly,
                 .flush_soon = false},
          Config{.sink = &timer_only, .timer = KernelTimer::kCupti, .kernels_every = kPhasesOnly}};
      times = time_steps(step, device, configs, trace_id, steps, /*split_config=*/4, split);
      calls = time_calls(device, *tracer);
      untimed = cuda::untimed_kernel_spans(device.impl());
      tracer->close();
    }
    std::filesystem::remove(trace_path);
    // The experiment never costs the columns above: whatever goes wrong in it is reported in its field.
    GraphResult graph;
    try {
      graph = time_graph_steps(spec, batch, device, steps);
    } catch (const std::exception& e) {
      graph = GraphResult{.error = e.what()};
    }
    std::printf(
        "{\"impl\":\"dpscope\",\"model\":\"%s\",\"batch\":%lld,\"device\":\"%s\",\"gpu\":\"%s\","
        "\"kernel_timer\":\"%s\",\"ms_per_step\":%.4f,\"ms_per_step_traced\":%.4f,"
        "\"ms_per_step_timer_only\":%.4f,\"ms_per_step_traced_events\":%.4f,\"untimed_spans\":%llu,"
        "\"ms_per_step_sampled_10\":%.4f,\"ms_per_step_sampled_50\":%.4f,\"ms_per_step_phases_only\":%.4f,"
        "\"ms_per_step_graph\":%.4f,\"ms_per_step_graph_cupti\":%.4f,\"graph_nodes\":%zu,"
        "\"graph_max_abs_diff\":%.3g,\"graph_error\":\"%s\","
        "\"ms_per_step_phases_no_flush\":%.4f,\"ms_per_step_phases_null_sink\":%.4f,"
        "\"ms_host_sampled_step\":%.4f,\"ms_host_step_after_sampled\":%.4f,\"ms_host_other_step\":%.4f,"
        "\"us_cuda_event_record\":%.3f,\"us_device_record\":%.3f,\"us_cuda_event_query\":%.3f,"
        "\"us_cuda_event_elapsed\":%.3f,\"us_flush_soon\":%.3f}\n",
        spec.c_str(), static_cast<long long>(batch), device.name().c_str(),
        cuda::physical_name(device.impl()).c_str(), cuda::kernel_timer_description().c_str(), times[0] * 1e3,
        times[1] * 1e3, times[2] * 1e3, times[3] * 1e3, static_cast<unsigned long long>(untimed),
        times[4] * 1e3, times[5] * 1e3, times[6] * 1e3, graph.untraced_s * 1e3, graph.cupti_s * 1e3,
        graph.nodes, graph.max_abs_diff, json_safe(graph.error).c_str(), times[7] * 1e3, times[8] * 1e3,
        gpu_bench::median(split.sampled) * 1e3, gpu_bench::median(split.after) * 1e3,
        gpu_bench::median(split.other) * 1e3, calls.event_record, calls.device_record, calls.event_query,
        calls.event_elapsed, calls.flush_soon);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_mlp_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
