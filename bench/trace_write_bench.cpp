// The trace recorder's cost per event on the thread that emits it: what a traced kernel pays to
// be written (on a GPU, on top of the timer's cost: docs/gpu.md). Emits N events of each kind into
// a recorder attached to a cpu device, from 1 and from 4 threads at once, in steps of 35 events
// (about one MLP training step's kernels) each followed by flush_soon(), as the training loop
// flushes once per step. Prints one JSON line per case: nanoseconds per event (formatting and
// appending, the median over steps), nanoseconds per flush (handing a step's lines to the
// recorder's writing thread), and the file's bytes per event.
//
// Usage: trace_write_bench [EVENTS=1000000] [OUT_DIR=temp]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dpscope/core/device.hpp"
#include "dpscope/core/device_impl.hpp"
#include "dpscope/trace/recorder.hpp"

namespace {

using namespace dpscope;
using Clock = std::chrono::steady_clock;

constexpr int kStep = 35;  // events between flushes

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

struct Case {
  const char* name;
  std::function<void(TraceRecorder&, const Device&, int64_t)> emit;
};

struct Result {
  double ns_per_event = 0;
  double ns_per_flush = 0;
  uint64_t file_bytes = 0;
};

// Runs `events` emits per thread in steps; thread 0 flushes after each of its steps.
Result run_case(const Case& c, const std::filesystem::path& path, int threads, int64_t events) {
  std::vector<Device> devices;
  TraceHeader header;
  header.clock = "measured";
  for (int i = 0; i < threads; ++i) {
    devices.push_back(Device::new_cpu());
    add_trace_device(header, devices.back());
  }
  std::vector<std::vector<double>> per_thread(static_cast<size_t>(threads));
  std::vector<double> flushes;
  {
    auto recorder = TraceRecorder::open(path, header, devices);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const Device& device = devices[static_cast<size_t>(t)];
        device.set_step(3);
        device.set_phase(Phase::kBackward);
        for (int64_t done = 0; done + kStep <= events; done += kStep) {
          const auto t0 = Clock::now();
          for (int64_t i = done; i < done + kStep; ++i) c.emit(*recorder, device, i);
          const auto t1 = Clock::now();
          per_thread[static_cast<size_t>(t)].push_back(
              std::chrono::duration<double, std::nano>(t1 - t0).count() / kStep);
          if (t == 0) {
            recorder->flush_soon();
            flushes.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t1).count());
          }
        }
      });
    }
    for (std::thread& w : workers) w.join();
    recorder->close();
  }
  std::vector<double> all;
  for (const auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  return {.ns_per_event = median(all),
          .ns_per_flush = median(flushes),
          .file_bytes = std::filesystem::file_size(path)};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int64_t events = argc > 1 ? std::stoll(argv[1]) : 1'000'000;
    const std::filesystem::path dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path();
    DPS_CHECK(events >= 4 * kStep, ErrorKind::kUsage, "usage: trace_write_bench [EVENTS >= {}] [OUT_DIR]",
              4 * kStep);
    const std::vector<Case> cases = {
        {"kernel_span",
         [](TraceRecorder& r, const Device& d, int64_t i) {
           r.kernel_span(d, StreamKind::kCompute, "linear.backward.grad_weight", 1'000'000 + i * 1000, 812,
                         KernelCost{.flops = 67'108'864, .bytes = 1'572'864});
         }},
        {"grad_ready",
         [](TraceRecorder& r, const Device& d, int64_t i) {
           r.instant(d, 1'000'000 + i * 1000, GradReady{.param = static_cast<int>(i % 6)});
         }},
        {"memory_counter",
         [](TraceRecorder& r, const Device& d, int64_t i) {
           MemoryStats m;
           m.capacity_bytes = 80ull << 30;
           m.bytes[0] = 1u << 20;
           m.bytes[1] = static_cast<uint64_t>(i);
           r.memory_counter(d, 1'000'000 + i * 1000, m);
         }},
    };
    for (const char* ext : {".jsonl", ".jsonl.zst"}) {
      for (const Case& c : cases) {
        for (int threads : {1, 4}) {
          const std::filesystem::path path = dir / (std::string("dpscope_trace_write_bench") + ext);
          const Result r = run_case(c, path, threads, events / threads);
          std::filesystem::remove(path);
          std::printf(
              "{\"event\":\"%s\",\"file\":\"%s\",\"threads\":%d,\"ns_per_event\":%.1f,"
              "\"ns_per_flush\":%.0f,\"bytes_per_event\":%.1f}\n",
              c.name, ext, threads, r.ns_per_event, r.ns_per_flush,
              static_cast<double>(r.file_bytes) / static_cast<double>(events));
          std::fflush(stdout);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_write_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
