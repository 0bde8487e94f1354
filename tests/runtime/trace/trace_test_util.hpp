// Helpers shared by the trace tests: scratch files, a hand-written header, and a small trace
// recorded with the real TraceRecorder.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dpscope/core/device.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/core/timing.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/cli.hpp"

namespace dpscope::trace::testing {

using ::dpscope::testing::read_file;    // support/temp_files.hpp
using ::dpscope::testing::scratch_dir;  // support/temp_files.hpp

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

inline void append_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

// A 10 ns compute span line ('\n' included) on device 0, step 0.
inline std::string span_line(int64_t ts, const char* name = "k") {
  return fmt::format(
      R"({{"type":"span","ts":{},"rank":0,"dev":0,"step":0,"phase":"forward","name":"{}","cat":"compute","stream":"compute","dur":10}})"
      "\n",
      ts, name);
}

// A header line ('\n' included) with devices 0 = sim:0 (H100), 1 = host, 2 = sim:1 (H100).
inline std::string header_line(const std::string& version = "1.0") {
  return R"({"type":"header","format":"dpscope-trace","version":")" + version +
         R"(","clock":"simulated","run":{"mode":"ddp","devices":2},"devices":[)"
         R"({"id":0,"name":"sim:0","kind":"sim","hardware":"NVIDIA H100 SXM5 80GB","memory_bytes":80000000000,"peak_flops":67000000000000,"mem_bandwidth":3350000000000},)"
         R"({"id":1,"name":"host","kind":"host","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0},)"
         R"({"id":2,"name":"sim:1","kind":"sim","hardware":"NVIDIA H100 SXM5 80GB","memory_bytes":80000000000,"peak_flops":67000000000000,"mem_bandwidth":3350000000000}],)"
         R"("links":[{"src":0,"dst":1,"kind":"pcie5","bandwidth":64000000000,"latency_ns":1000}],)"
         R"("params":[{"index":0,"name":"0.weight","shape":[512,784],"bytes":1605632}],"buckets":[]})"
         "\n";
}

// Records a small but complete trace (every event type) on one simulated H100 with the real
// recorder, `steps` training steps long, and returns its path.
inline std::filesystem::path record_sample_trace(const std::filesystem::path& path, int steps = 2) {
  const Device gpu = Device::sim(0, find_preset("h100-sxm"));
  TraceHeader header;
  header.run_json = R"({"mode":"single","steps":2})";
  add_trace_device(header, gpu);
  header.params = {{0, "0.weight", {512, 784}, 1605632}, {1, "0.bias", {512}, 2048}};
  header.buckets = {{0, {1, 0}, 1607680}};
  const Device devices[] = {gpu};
  auto recorder = TraceRecorder::open(path, header, devices);
  const int host = recorder->host_id();
  for (int step = 0; step < steps; ++step) {
    gpu.set_step(step);
    {
      PhaseScope phase(gpu, Phase::kData);
      const int64_t indices[] = {4 * step, 4 * step + 1, 4 * step + 2, 4 * step + 3};
      recorder->samples(gpu, gpu.clock_ns(StreamKind::kCopy), indices, std::nullopt);
      const int64_t ts = gpu.advance(StreamKind::kCopy, 2638);
      recorder->transfer(gpu, {.src = host,
                               .dst = 0,
                               .bytes = 12544,
                               .ts_ns = ts,
                               .dur_ns = 2638,
                               .name = to_string(EventName::kCopyH2D)});
    }
    {
      PhaseScope phase(gpu, Phase::kForward);
      gpu.wait_until(StreamKind::kCompute, gpu.clock_ns(StreamKind::kCopy));
      KernelScope kernel(gpu, "forward 0.Linear", {.flops = 102760448, .bytes = 1874944});
    }
    {
      PhaseScope phase(gpu, Phase::kBackward);
      { KernelScope kernel(gpu, "backward 0.Linear", {.flops = 205520896, .bytes = 3749888}); }
      recorder->instant(gpu, gpu.clock_ns(StreamKind::kCompute), GradReady{.param = 1});
      const float grad[] = {0.25f, -0.5f, 1.0f};
      recorder->values(
          gpu, gpu.clock_ns(StreamKind::kCompute),
          {.name = EventName::kGrad, .param = 1, .when = ValuesWhen::kLocal, .values = grad, .norm = 1.1456});
      const int64_t ts = gpu.advance(StreamKind::kComm, 1200);
      recorder->span(gpu, {.stream = StreamKind::kComm,
                           .cat = SpanCategory::kCollective,
                           .name = "all_reduce",
                           .ts_ns = ts,
                           .dur_ns = 1200,
                           .args = CollectiveArgs{.coll = 7, .bytes = 2048}});
      recorder->transfer(gpu, {.src = 0,
                               .dst = host,
                               .bytes = 2048,
                               .ts_ns = ts,
                               .dur_ns = 600,
                               .stream = StreamKind::kComm,
                               .name = "ring reduce-scatter",
                               .collective = 7,
                               .algo = "ring",
                               .algo_step = 0,
                               .chunk = 0});
      if (step == 1) recorder->buckets(gpu, ts, header.buckets, BucketReason::kRebuilt);
    }
    {
      PhaseScope phase(gpu, Phase::kOptimizer);
      KernelScope kernel(gpu, "sgd step", {.flops = 1e6, .bytes = 1.2e7});
    }
    const int64_t now = gpu.clock_ns(StreamKind::kCompute);
    gpu.trace_memory();
    recorder->loss_counter(gpu, now, 2.3 - 0.1 * step);
    recorder->flush();
  }
  recorder->close();
  return path;
}

// ---- process ranks' files (DIR/rank-K.jsonl, trace_tools/rank_traces.hpp) ----

// A rank file's header line ('\n' included): measured clock, the "process" entry, and `devices`
// (name, kind) with ids 0, 1, ...
inline std::string rank_header(int rank, int world_size, int64_t offset_ns,
                               const std::vector<std::pair<std::string, std::string>>& devices = {
                                   {"cpu", "cpu"}}) {
  TraceHeader h;
  h.clock = "measured";
  h.run_json = fmt::format(
      R"({{"mode":"ddp","backend":"mpi","process":{{"rank":{},"world_size":{},"clock_offset_ns":{},"clock_uncertainty_ns":7}}}})",
      rank, world_size, offset_ns);
  for (const auto& [name, kind] : devices)
    h.devices.push_back({.id = static_cast<int>(h.devices.size()), .name = name, .kind = kind});
  fmt::memory_buffer out;
  append_trace_header(out, h);  // ends with its '\n'
  return fmt::to_string(out);
}

// A compute span of `rank` on its device `dev`, 100 ns long ('\n' included).
inline std::string rank_span(int rank, int64_t ts, const std::string& name, int dev = 0) {
  return fmt::format(
      R"({{"type":"span","ts":{},"rank":{},"dev":{},"step":0,"phase":"backward","name":"{}","cat":"compute","stream":"compute","dur":100}})"
      "\n",
      ts, rank, dev, name);
}

// A transfer written by `rank` from `src` to `dst`, 50 ns long; `ends` adds fields such as
// R"(,"dst_rank":1)" ('\n' included).
inline std::string rank_transfer(int rank, int64_t ts, int src, int dst, uint64_t flow,
                                 const std::string& ends = "") {
  return fmt::format(
      R"({{"type":"transfer","ts":{},"rank":{},"dev":0,"step":0,"phase":"backward","name":"send/recv","stream":"comm","dur":50,"src":{},"dst":{},"bytes":64,"flow":{}{}}})"
      "\n",
      ts, rank, src, dst, flow, ends);
}

// Records 3 steps of two kernels each into `path` (plain or .zst) while a TraceFollower reads it:
// nothing shows before a flush, each flush shows its step's 2 events, and the close adds none.
inline void expect_follower_sees_each_flushed_step(const std::filesystem::path& path) {
  const Device gpu = Device::sim(0, find_preset("h100-sxm"));
  TraceHeader header;
  add_trace_device(header, gpu);
  const Device devices[] = {gpu};
  auto recorder = TraceRecorder::open(path, header, devices);
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_TRUE(follower.has_header());
  for (int step = 0; step < 3; ++step) {
    gpu.set_step(step);
    { KernelScope k(gpu, "forward", {.flops = 1e9, .bytes = 1e6}); }
    { KernelScope k(gpu, "backward", {.flops = 2e9, .bytes = 2e6}); }
    EXPECT_EQ(follower.poll(), 0u) << "not flushed yet";
    recorder->flush();
    EXPECT_EQ(follower.poll(), 2u);
    EXPECT_EQ(follower.data().events.back().step, step);
  }
  recorder->close();
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_EQ(follower.data().events.size(), 6u);
}

}  // namespace dpscope::trace::testing
