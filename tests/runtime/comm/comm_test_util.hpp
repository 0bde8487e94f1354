// Helpers shared by the collectives' tests: a preset with round numbers (so simulated times have
// closed forms in whole nanoseconds), exactly-summable input patterns, per-rank result slots,
// traced worlds, and a checker for the data-step invariants of a Schedule.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/schedule.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/trace/recorder.hpp"

namespace dpscope::test {

// alpha = 1000 ns, beta = 1 ns per byte (1 GB/s) on every link, memory at 3 GB/s (a reduction of
// b bytes reads 2b and writes b: exactly b ns), no protocol overhead.
inline HardwarePreset round_preset(const std::string& topology = "nvswitch") {
  HardwarePreset p;
  p.id = "round";
  p.name = "Round Numbers GPU";
  p.memory_bytes = 1ull << 40;
  p.peak_flops = 1e12;
  p.mem_bandwidth_bytes_per_s = 3e9;
  p.launch_latency_ns = 0;
  p.host_link = {"pcie", 1e9, 1000.0};
  p.peer_link = {"link", 1e9, 1000.0};
  p.topology = topology;
  return p;
}

inline SimWorldOptions round_options(Milliseconds timeout = Milliseconds(20000)) {
  SimWorldOptions o;
  o.hardware = round_preset();
  o.timeout = timeout;
  o.algorithm = Algorithm::kAuto;  // independent of DPSCOPE_ALGO in the environment
  return o;
}

// Small integers (exact in float whatever the order of additions): rank r, element i.
inline float pattern(int rank, int64_t i) { return static_cast<float>((rank * 7 + i * 3) % 17 - 8); }
// Values whose products stay exact: -2, -1, 1, 2.
inline float product_pattern(int rank, int64_t i) {
  static constexpr float kValues[] = {-2.0f, -1.0f, 1.0f, 2.0f};
  return kValues[(rank + i) % 4];
}

inline std::vector<float> pattern_values(int rank, int64_t count, ReduceOp op) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    v[i] = op == ReduceOp::kProduct ? product_pattern(rank, i) : pattern(rank, i);
  return v;
}

// The naive reference: op over ranks 0..n-1, in rank order, then / n for avg.
inline std::vector<float> reference_reduce(int n, int64_t count, ReduceOp op) {
  std::vector<float> out = pattern_values(0, count, op);
  for (int r = 1; r < n; ++r) {
    const std::vector<float> v = pattern_values(r, count, op);
    for (int64_t i = 0; i < count; ++i) {
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg: out[i] += v[i]; break;
        case ReduceOp::kProduct: out[i] *= v[i]; break;
        case ReduceOp::kMin: out[i] = std::min(out[i], v[i]); break;
        case ReduceOp::kMax: out[i] = std::max(out[i], v[i]); break;
      }
    }
  }
  if (op == ReduceOp::kAvg)
    for (float& x : out) x /= static_cast<float>(n);
  return out;
}

// A world whose devices write to a trace at `path`.
struct TracedWorld {
  std::shared_ptr<SimWorld> world;
  std::unique_ptr<TraceRecorder> recorder;
};

inline TracedWorld traced_world(int n, const std::filesystem::path& path, SimWorldOptions options) {
  const HardwarePreset hw = options.hardware ? *options.hardware : find_preset(options.preset);
  TraceHeader header;
  for (int r = 0; r < n; ++r) options.devices.push_back(Device::sim(r, hw));
  for (const Device& d : options.devices) add_trace_device(header, d);
  TracedWorld t;
  t.recorder = TraceRecorder::open(path, header, options.devices);
  t.world = SimWorld::create(n, std::move(options));
  return t;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::filesystem::path temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "dpscope_comm_tests";
  std::filesystem::create_directories(dir);
  return dir / (std::string(info->test_suite_name()) + "_" + info->name() + "_" + name);
}

// The first violation of the Schedule's data-step rules, or "" (schedule.hpp):
//  * every dependency is an earlier op in an earlier step;
//  * within a step, an op's written elements are not read or written by an op that another rank
//    executes (ops of the same receiving rank run one after another, in list order);
//  * every range lies inside the rank's buffer of `buffer_elems[rank]` elements.
inline std::string schedule_violation(const Schedule& s, const std::vector<int64_t>& buffer_elems) {
  auto overlap = [](Segment a, Segment b) {
    return a.count_elems > 0 && b.count_elems > 0 && a.offset_elems < b.offset_elems + b.count_elems &&
           b.offset_elems < a.offset_elems + a.count_elems;
  };
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const CommOp& op = s.ops[k];
    if (op.from.count_elems != op.to.count_elems) return "op " + std::to_string(k) + " changes the count";
    if (op.from.offset_elems + op.from.count_elems > buffer_elems[op.src] ||
        op.to.offset_elems + op.to.count_elems > buffer_elems[op.dst] || op.from.offset_elems < 0 ||
        op.to.offset_elems < 0)
      return "op " + std::to_string(k) + " leaves its buffer";
    for (int32_t d : s.deps_of(op))
      if (d >= static_cast<int32_t>(k) || s.ops[d].step >= op.step)
        return "op " + std::to_string(k) + " depends on op " + std::to_string(d) + " of a later step";
    for (size_t j = 0; j < s.ops.size(); ++j) {
      const CommOp& other = s.ops[j];
      if (j == k || other.step != op.step || other.dst == op.dst) continue;
      if (other.src == op.dst && overlap(other.from, op.to))
        return "step " + std::to_string(op.step) + ": op " + std::to_string(j) + " reads what op " +
               std::to_string(k) + " writes";
    }
  }
  return "";
}

}  // namespace dpscope::test
