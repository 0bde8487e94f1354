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
  // The trained model: its parameters' names and shapes ("" for a trace without any, a bench run).
  // Only runs of one model have a speedup over each other: of different work it would mean nothing.
  std::string model;
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

// ---- a lesson's compare chapter: each run at its own moment (lesson `compare`, docs/lessons.md) ----

// What one compared run is doing at its moment `t_ns` (on its own clock): the step that holds the
// moment — a training step, or one size of a `dpscope bench` run (each size is a step) — drawn from
// the step's first event, so runs line up step against step whatever came before.
struct RunMoment {
  int64_t t_ns = 0;   // the moment
  int64_t step = -1;  // the step that holds it; -1: the run has no steps (then the whole run)
  int64_t t0_ns = 0;  // the step's window on the run's clock: its first event to the next step's
  int64_t t1_ns = 0;
  // The reference device's work in the window, clipped to it: its phases (empty for a bench run,
  // whose events have no phase) and its collective spans (a DDP run's all-reduces, a bench run's).
  struct Span {
    int64_t t0_ns = 0;
    int64_t t1_ns = 0;
    Phase phase = Phase::kNone;  // phases only
    std::string name;            // collectives only: "all_reduce tree 4.00 KiB"
  };
  std::vector<Span> phases;
  std::vector<Span> collectives;
  // The collective that holds the moment on the reference device ("all_reduce tree 4.00 KiB") and
  // its duration; "" and 0 when none does.
  std::string collective;
  int64_t collective_ns = 0;
  // The messages (transfers) the reference rank sends in the step's collectives: a bench size's
  // all-reduce sends 2(N-1) in a ring, fewer in a tree.
  int messages = 0;
};
RunMoment run_moment(const ReplayModel& model, int64_t t_ns);

// The rows of data each rank has read by a moment, batch by batch, epoch by epoch — and which
// batches repeat the previous epoch's batch at the same place (the same rows in the same order: the
// `no-set-epoch` pitfall; a shuffling sampler draws new ones every epoch).
struct SampleRows {
  struct Batch {
    int64_t step = -1;
    int64_t epoch = 0;          // 0-based, as the trace (and the code) counts
    std::vector<int64_t> rows;  // data-set indices, in the order the rank reads them
    bool repeats = false;       // the same rows as the previous epoch's batch at the same place
  };
  struct Rank {
    int32_t rank = 0;
    std::vector<Batch> batches;  // in step order, those read by the moment
  };
  std::vector<Rank> ranks;  // by rank
  int64_t epochs = 0;       // epochs seen by the moment
  int repeated = 0;         // batches that repeat, over every rank
};
SampleRows sample_rows(const ReplayModel& model, int64_t t_ns);

// How many times faster `run` trains than `baseline`: samples per second when both know their
// batch, else step time; 0 when neither can be compared.
double speedup(const RunSummary& run, const RunSummary& baseline);

}  // namespace dpscope::viz
