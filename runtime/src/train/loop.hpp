// The one training loop. Every mode — single device, DataParallel, a DDP rank (a thread or a
// process), timing-only — runs train_loop() over a TrainStrategy that says what its step's phases
// do; private to runtime/src/train.
//
// The loop owns what all modes share: the epochs and batches (from where a resumed checkpoint left
// off), the step counter on every device, the four phases with their memory samples, the loss check
// and its trace counter, the flush a live viewer follows, the step report, and the checkpoint
// schedule. A strategy owns its model, data and optimizer and fills in each phase
// (docs/architecture.md, "Adding a training mode").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/core/device.hpp"
#include "dpscope/train/train.hpp"
#include "train_common.hpp"

namespace dpscope::detail {

// One step, as the loop plans it.
struct StepPlan {
  int64_t step = 0;   // 0-based, counting the steps of a resumed checkpoint
  int64_t epoch = 0;  // the loop's pass over the data
  int64_t batch = 0;  // within the epoch
  bool sync = true;   // gradients are synchronized and the optimizer steps (false: under no_sync())
  bool last = false;  // the run's last step
};

// Where a checkpoint is taken: after `steps_done` steps, the last of which was `last`; written under
// the run's id.
struct CheckpointSpot {
  int64_t steps_done = 0;
  StepPlan last;
  std::string_view run_id;
  int64_t batches_per_epoch = 0;
};

// What one mode does in each phase of a step. The loop calls each phase method inside that phase
// (Device::set_phase) on every device of devices(), and samples their memory after forward,
// backward and the optimizer. All calls come from the thread that runs the loop.
class TrainStrategy {
 public:
  virtual ~TrainStrategy() = default;

  // The devices this process drives: every device of a single or DataParallel run, a rank's own GPU.
  virtual const std::vector<Device>& devices() const = 0;
  // How long the run is and when it checkpoints (train_common.hpp).
  virtual const RunLength& length() const = 0;
  // The clock a step is timed on, read at its start and end: single, dp and timing-only wait for
  // every device (host_waits_for); a DDP rank reads its compute stream, because a rank never waits
  // for the others between steps (its step starts when its own last one ended).
  virtual int64_t step_clock() = 0;

  virtual void begin_epoch(int64_t epoch) = 0;
  virtual void load_batch(const StepPlan& plan) = 0;  // Phase::kData
  // Phase::kForward; returns the step's loss, or nothing where nothing is computed (timing-only).
  virtual std::optional<double> forward(const StepPlan& plan) = 0;
  virtual void backward(const StepPlan& plan) = 0;  // Phase::kBackward
  virtual void optimizer_step() = 0;                // Phase::kOptimizer, on synchronized steps only
  // After a step whose loss is known (DDP's mismatched-collective pitfall adds a collective here).
  virtual void after_step(const StepPlan& /*plan*/, double /*loss*/) {}
  // Inside Phase::kCheckpoint, when a checkpoint is due. Returns the file written, "" when this
  // process wrote none.
  virtual std::string checkpoint(const CheckpointSpot& spot) = 0;
  // The message of an error leaving a step, before it propagates (single and dp trace it here;
  // rank threads and processes trace theirs where they catch them, which covers their setup too).
  virtual void step_failed(std::string_view /*message*/) {}
};

struct LoopOptions {
  // StepReport::rank, and " on rank K" in a non-finite loss error; -1: the loop runs the whole run.
  int rank = -1;
  // Whether this loop flushes the trace after each step: rank threads share one recorder, which
  // rank 0 flushes.
  bool flush_trace = true;
  // Start where this checkpoint left off (its mode checked that its run can: check_resume_fits).
  const ResumeCheckpoint* resumed = nullptr;
  std::string run_id;  // the id checkpoints are written under; empty: the resumed run's, or a new one
  StepObserver on_step;
};

// Runs `strategy` from `options.resumed` (or step 0) to strategy.length().total_steps. Returns the
// part of the run's result the loop knows: the steps done (counting those of a resumed checkpoint),
// the losses of the steps it ran (none when forward computes none), the newest checkpoint this
// process wrote and the step it resumed after; the mode fills in the rest.
TrainResult train_loop(TrainStrategy& strategy, const TrainConfig& config, const LoopOptions& options);

// One step: data, forward, backward, and (when plan.sync) the optimizer, each in its phase.
// Returns forward's loss.
std::optional<double> run_step(TrainStrategy& strategy, const StepPlan& plan);

// A point where the host waits for every device (torch.cuda.synchronize() on each): on simulated
// devices every stream of every device moves to the latest clock among them. Returns that time (0
// on the CPU, whose work is done when its calls return).
int64_t host_waits_for(const std::vector<Device>& devices);

}  // namespace dpscope::detail
