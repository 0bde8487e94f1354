// trace_reader_bench: how fast dpscope reads, exports and summarizes a large trace.
//
//   trace_reader_bench [EVENTS=1000000] [PATH=/tmp/dpscope-bench-trace.jsonl] [--reuse]
//
// Writes a trace of EVENTS events with the real TraceRecorder (kernel spans, comm spans, ring
// transfers, instants, memory and loss counters: about 150 bytes per line, like a training run),
// then times read_trace (best of 3), compute_stats and export_chrome, and prints events/s.
// --reuse reads the trace already at PATH instead of writing a new one.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "dpscope/base/error.hpp"
#include "dpscope/core/device.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/core/timing.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/chrome_export.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/trace_tools/stats.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU time of this process: on a shared machine it shows the cost when wall time is inflated.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void write_trace(const std::filesystem::path& path, int64_t events) {
  using namespace dpscope;
  const Device gpu = Device::sim(0, find_preset("h100-sxm"));
  TraceHeader header;
  add_trace_device(header, gpu);
  const Device devices[] = {gpu};
  auto recorder = TraceRecorder::open(path, header, devices);
  const int host = recorder->host_id();
  static const char* const kLayers[] = {"forward 0.Linear",  "forward 1.ReLU",  "forward 2.Linear",
                                        "backward 2.Linear", "backward 1.ReLU", "backward 0.Linear"};
  int64_t written = 0;
  for (int64_t step = 0; written < events; ++step) {
    gpu.set_step(step);
    gpu.set_phase(Phase::kForward);
    for (int layer = 0; layer < 6 && written < events; ++layer) {
      if (layer == 3) gpu.set_phase(Phase::kBackward);
      { KernelScope kernel(gpu, kLayers[layer], {.flops = 1.0e8 + layer, .bytes = 1.8e6}); }
      ++written;
      if (layer >= 3 && written + 3 <= events) {
        const int64_t ts = gpu.clock_ns(StreamKind::kCompute);
        recorder->instant(gpu, ts, GradReady{.param = 3});
        const int64_t start = gpu.advance(StreamKind::kComm, 1200);
        recorder->transfer(gpu, {.src = 0,
                                 .dst = host,
                                 .bytes = 65536,
                                 .ts_ns = start,
                                 .dur_ns = 1200,
                                 .stream = StreamKind::kComm,
                                 .name = "ring reduce-scatter",  // collective_transfer_name
                                 .collective = step,
                                 .algo = "ring",
                                 .algo_step = layer - 3,
                                 .chunk = 0});
        recorder->span(gpu, {.stream = StreamKind::kComm,
                             .cat = SpanCategory::kCollective,
                             .name = "all_reduce",
                             .ts_ns = start,
                             .dur_ns = 1200,
                             .args = CollectiveArgs{.coll = 1}});
        written += 3;
      }
    }
    if (written < events) {
      gpu.trace_memory();
      ++written;
    }
    recorder->flush();
  }
  recorder->close();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int64_t events = argc > 1 ? std::atoll(argv[1]) : 1000000;
    const std::filesystem::path path = argc > 2 ? argv[2] : "/tmp/dpscope-bench-trace.jsonl";

    const bool reuse = argc > 3 && std::string(argv[3]) == "--reuse" && std::filesystem::exists(path);

    Clock::time_point t0 = Clock::now();
    if (!reuse) write_trace(path, events);
    const double write_s = seconds_since(t0);
    const double bytes = static_cast<double>(std::filesystem::file_size(path));
    if (!reuse) {
      std::printf("wrote   %lld events, %.1f MB (%.0f B/line) in %.3f s\n", static_cast<long long>(events),
                  bytes / 1e6, bytes / static_cast<double>(events + 1), write_s);
    }

    double best_s = 1e30;
    double best_cpu_s = 1e30;
    dpscope::trace::TraceData data;
    for (int round = 0; round < 3; ++round) {
      data = {};
      t0 = Clock::now();
      const double cpu0 = cpu_seconds();
      data = dpscope::trace::read_trace(path);
      best_cpu_s = std::min(best_cpu_s, cpu_seconds() - cpu0);
      best_s = std::min(best_s, seconds_since(t0));
    }
    std::printf(
        "read    %zu events in %.3f s wall, %.3f s cpu (best of 3): %.2f M events/s, %.0f MB/s (wall)\n",
        data.events.size(), best_s, best_cpu_s, static_cast<double>(data.events.size()) / best_s / 1e6,
        bytes / best_s / 1e6);

    t0 = Clock::now();
    const dpscope::trace::TraceStats stats = dpscope::trace::compute_stats(data);
    std::printf("stats   %.3f s (%zu devices, %zu device-steps)\n", seconds_since(t0), stats.devices.size(),
                stats.steps.size());

    std::filesystem::path chrome = path;
    chrome += ".chrome.json";
    t0 = Clock::now();
    dpscope::trace::export_chrome(data, chrome);
    std::printf("export  %.3f s, %.1f MB of Chrome JSON\n", seconds_since(t0),
                static_cast<double>(std::filesystem::file_size(chrome)) / 1e6);
    std::filesystem::remove(chrome);
    return 0;
  } catch (const dpscope::Error& e) {
    std::fprintf(stderr, "trace_reader_bench: %s\n", e.what());
    return 2;
  }
}
