// The run configuration from a trace header's free-form "run" object, reduced to what the
// visualizer's titles show: "DDP · 4 GPUs · 784-256-10 · batch 32 per rank". No GL, no ImGui.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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
  bool shuffle = false;    // the sampler shuffles (train's "shuffle": true)
  // `dpscope train --timing-only`: the trace holds GPU 0 of a world of `devices` GPUs.
  bool timing_only = false;
  int devices = 0;  // the run's world size (0 when absent)
  // `train --trace-kernels-every K`: kernels traced on the steps that are multiples of K, one span
  // per phase on the others (1: every step).
  int64_t kernels_every = 1;
  bool kernels_traced(int64_t step) const {
    return step < 0 || kernels_every <= 1 || step % kernels_every == 0;
  }
  std::vector<std::string> pitfalls;  // "no-average", "no-set-epoch", "unused-parameter"
  bool has_pitfall(std::string_view name) const;

  // "DistributedDataParallel (DDP)", "DataParallel (DP)", "single device", the mode as written,
  // or for a benchmark "benchmark: all_reduce"; "" when the header says nothing.
  std::string mode_title() const;
};

// Never throws: malformed or missing fields are left empty.
RunInfo parse_run_info(std::string_view run_json);

// What the "after" values of a reduction are, in words checked against the run's mode and
// pitfalls: the ranks' mean (DDP's all-reduce, SUM then ÷ N), their sum in DataParallel (its
// reduce-add onto GPU 0), or their sum in DDP (only with the no-average pitfall, which it names).
// `is_mean` / `is_sum`: whether "after" equals the mean / the sum of the `ranks` "before" rows.
// "" when neither holds.
std::string reduction_verdict(const RunInfo& run, bool is_mean, bool is_sum, size_t ranks);

}  // namespace dpscope::viz
