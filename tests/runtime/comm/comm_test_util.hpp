// Helpers shared by the collectives' tests: a preset with round numbers (so simulated times have
// closed forms in whole nanoseconds), traced worlds, and a checker for the data-step invariants of a
// Schedule.
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
#include "support/cli.hpp"

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

using ::dpscope::testing::read_file;  // support/cli.hpp

inline std::filesystem::path temp_path(const std::string& name) {
  return ::dpscope::testing::unique_temp_path(name);  // support/temp_files.hpp
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
