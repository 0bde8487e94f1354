// Helpers shared by the lesson tests (lesson_tests): scratch directories, files, running the
// built `dpscope`, a small hand-written trace whose every aggregate can be computed by hand, and a
// small real DDP trace made with run_training (as tests/visualizer/trace_fixtures does).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/train/train.hpp"
#include "support/cli.hpp"

namespace dpscope::lesson::testing {

using ::dpscope::testing::read_file;    // support/temp_files.hpp
using ::dpscope::testing::scratch_dir;  // support/temp_files.hpp

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

using CliResult = dpscope::testing::CommandResult;

// Runs the built `dpscope ARGS` (DPSCOPE_CLI) and collects its output.
inline CliResult run_cli(const std::string& args) { return dpscope::testing::run_dpscope(args); }

// A trace small enough to add up by hand. Devices: 0 = sim:0, 1 = host, 2 = sim:1; one parameter
// of 1,605,632 bytes. Events (ts in ns):
//   samples  ts 5    rank 0  indices [7, 3, 5], step 0, data
//   counter  ts 10   rank 0  memory  parameters 100, gradients 0
//   span     ts 0    rank 0  compute "backward 0.Linear grad_weight" dur 80, step 0, backward
//   instant  ts 50   rank 0  grad_ready param 1;  ts 60 rank 0 grad_ready param 0
//   span     ts 90   rank 0  collective "all_reduce ring 1.95 KiB" dur 200, coll 3, bytes 2000
//   transfer ts 100  rank 0 / rank 1  ring reduce-scatter, 1000 B, dur 50, algo_step 0, chunks 0 / 1
//   transfer ts 200  rank 0 / rank 1  ring all-gather,     1000 B, dur 60, algo_step 1, chunks 1 / 0
//   values   ts 300  rank 0 / rank 1  grad param 0 before_reduce [1, 2] / [3, 4], norms 2 / 5
//   counter  ts 310  rank 0  memory  parameters 100, gradients 100
inline std::string hand_trace_text() {
  return R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{"mode":"ddp","devices":2},"devices":[)"
         R"({"id":0,"name":"sim:0","kind":"sim","hardware":"NVIDIA H100 SXM5 80GB","memory_bytes":80000000000,"peak_flops":67000000000000,"mem_bandwidth":3350000000000},)"
         R"({"id":1,"name":"host","kind":"host","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0},)"
         R"({"id":2,"name":"sim:1","kind":"sim","hardware":"NVIDIA H100 SXM5 80GB","memory_bytes":80000000000,"peak_flops":67000000000000,"mem_bandwidth":3350000000000}],)"
         R"("links":[],"params":[{"index":0,"name":"0.weight","shape":[512,784],"bytes":1605632}],"buckets":[]})"
         "\n"
         R"({"type":"samples","ts":5,"rank":0,"dev":0,"step":0,"phase":"data","indices":[7,3,5]})"
         "\n"
         R"({"type":"counter","ts":10,"rank":0,"dev":0,"step":0,"phase":"forward","name":"memory","values":{"parameters":100,"gradients":0}})"
         "\n"
         R"({"type":"span","ts":0,"rank":0,"dev":0,"step":0,"phase":"backward","name":"backward 0.Linear grad_weight","cat":"compute","stream":"compute","dur":80})"
         "\n"
         R"({"type":"instant","ts":60,"rank":0,"dev":0,"step":0,"phase":"backward","name":"grad_ready","args":{"param":0}})"
         "\n"
         R"({"type":"instant","ts":50,"rank":0,"dev":0,"step":0,"phase":"backward","name":"grad_ready","args":{"param":1}})"
         "\n"
         R"({"type":"span","ts":90,"rank":0,"dev":0,"step":0,"phase":"backward","name":"all_reduce ring 1.95 KiB","cat":"collective","stream":"comm","dur":200,"args":{"coll":3,"bytes":2000}})"
         "\n"
         R"({"type":"transfer","ts":100,"rank":1,"dev":2,"step":0,"phase":"backward","name":"ring reduce-scatter","stream":"comm","dur":50,"src":2,"dst":0,"bytes":1000,"flow":2,"coll":3,"algo":"ring","algo_step":0,"chunk":1})"
         "\n"
         R"({"type":"transfer","ts":100,"rank":0,"dev":0,"step":0,"phase":"backward","name":"ring reduce-scatter","stream":"comm","dur":50,"src":0,"dst":2,"bytes":1000,"flow":1,"coll":3,"algo":"ring","algo_step":0,"chunk":0})"
         "\n"
         R"({"type":"transfer","ts":200,"rank":0,"dev":0,"step":0,"phase":"backward","name":"ring all-gather","stream":"comm","dur":60,"src":0,"dst":2,"bytes":1000,"flow":3,"coll":3,"algo":"ring","algo_step":1,"chunk":1})"
         "\n"
         R"({"type":"transfer","ts":200,"rank":1,"dev":2,"step":0,"phase":"backward","name":"ring all-gather","stream":"comm","dur":60,"src":2,"dst":0,"bytes":1000,"flow":4,"coll":3,"algo":"ring","algo_step":1,"chunk":0})"
         "\n"
         R"({"type":"values","ts":300,"rank":0,"dev":0,"step":0,"phase":"backward","name":"grad","param":0,"when":"before_reduce","values":[1.0,2.0],"norm":2.0})"
         "\n"
         R"({"type":"values","ts":300,"rank":1,"dev":2,"step":0,"phase":"backward","name":"grad","param":0,"when":"before_reduce","values":[3.0,4.0],"norm":5.0})"
         "\n"
         R"({"type":"counter","ts":310,"rank":0,"dev":0,"step":0,"phase":"backward","name":"memory","values":{"parameters":100,"gradients":100}})"
         "\n";
}

inline trace::TraceData hand_trace() { return trace::parse_trace(hand_trace_text(), "hand.jsonl"); }

// A real 2-step DDP run on 2 simulated GPUs (ring all-reduce), traced to `path`.
inline trace::TraceData real_ddp_trace(const std::filesystem::path& path) {
  TrainConfig config;
  config.mode = TrainMode::kDdp;
  config.devices = 2;
  config.model = "16-32-4";
  config.batch = 8;
  config.steps = 2;
  config.dataset = "blobs:64:16:4";
  config.shuffle = false;
  config.algo = "ring";
  config.trace = path.string();
  run_training(config);
  return trace::read_trace(path);
}

}  // namespace dpscope::lesson::testing
