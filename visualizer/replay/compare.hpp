// Comparing runs: each trace reduced to what a side-by-side view needs — who it is (single device,
// DataParallel, DDP; how many GPUs), its step time, its throughput, and its phases on its own clock
// from zero — and the speedup of one run over another. No GL, no ImGui.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replay/replay_model.hpp"

namespace dpscope::viz {

struct RunSummary {
  std::string title;             // "DistributedDataParallel (DDP) · 4 GPUs"
  int gpus = 0;                  // devices that are neither the host nor a switch
  int64_t samples_per_step = 0;  // the global batch (DDP: batch per rank x ranks); 0: unknown
  int64_t step_ns = 0;           // median step time, the first step left out when there are more
  int steps = 0;
  int64_t duration_ns = 0;  // the whole trace, first event to last end
  struct Segment {
    int64_t t0_ns = 0;  // from the trace's first event
    int64_t t1_ns = 0;
    int64_t step = -1;
    Phase phase = Phase::kNone;
  };
  std::vector<Segment> phases;  // the reference device's phases, in time order
  // Samples per second of simulated (or measured) time; 0 when the batch or the steps are unknown.
  double samples_per_s() const;
};

RunSummary summarize_run(const ReplayModel& model);

// How many times faster `run` trains than `baseline`: samples per second when both know their
// batch, else step time; 0 when neither can be compared.
double speedup(const RunSummary& run, const RunSummary& baseline);

}  // namespace dpscope::viz
