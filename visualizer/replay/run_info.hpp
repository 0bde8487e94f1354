// The run configuration from a trace header's free-form "run" object, reduced to what the
// visualizer's titles show: "DDP · 4 GPUs · 784-256-10 · batch 32 per rank". No GL, no ImGui.
#pragma once

#include <string>
#include <string_view>

namespace dpscope::viz {

struct RunInfo {
  std::string mode;     // "single", "dp", "ddp" ("" when absent)
  std::string backend;  // "sim", "nccl", ...
  std::string model;    // "784-512-10"
  std::string preset;
  std::string batch;       // as written
  std::string algo;        // collective algorithm, when given
  std::string command;     // "train", "bench", ... when the writer says
  std::string collective;  // `dpscope bench`: "all_reduce", ...

  // "DistributedDataParallel (DDP)", "DataParallel (DP)", "single device", the mode as written,
  // or for a benchmark "benchmark: all_reduce"; "" when the header says nothing.
  std::string mode_title() const;
};

// Never throws: malformed or missing fields are left empty.
RunInfo parse_run_info(std::string_view run_json);

}  // namespace dpscope::viz
