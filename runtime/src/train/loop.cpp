// train_loop(): the loop every training mode runs (see loop.hpp). Sections: the phases of a step
// (PhaseOnAll, run_step), the loop.
#include "loop.hpp"

#include <algorithm>
#include <cmath>
#include <exception>

#include "dpscope/base/error.hpp"

namespace dpscope::detail {
namespace {

// Sets the phase of every device for a scope (the loop's phases are those of all its devices),
// then gives each back the phase it had.
class PhaseOnAll {
 public:
  PhaseOnAll(const std::vector<Device>& devices, Phase phase) : devices_(devices) {
    saved_.reserve(devices_.size());
    for (const Device& device : devices_) {
      saved_.push_back(device.phase());
      device.set_phase(phase);
    }
  }
  ~PhaseOnAll() {
    for (size_t i = 0; i < devices_.size(); ++i) devices_[i].set_phase(saved_[i]);
  }
  PhaseOnAll(const PhaseOnAll&) = delete;
  PhaseOnAll& operator=(const PhaseOnAll&) = delete;

 private:
  const std::vector<Device>& devices_;
  std::vector<Phase> saved_;
};

void trace_memory(const std::vector<Device>& devices) {
  for (const Device& device : devices) device.trace_memory();
}

// Whether a checkpoint is written once `steps_done` steps are done: only at a synchronized
// boundary (steps_done a multiple of sync_every: no gradient accumulated under no_sync is lost),
// when --checkpoint-every steps have passed since the previous boundary, or when it is the run's
// last synchronized boundary.
bool checkpoint_due(const TrainConfig& config, const RunLength& length, int64_t steps_done) {
  if (config.checkpoint_dir.empty() || steps_done % length.sync_every != 0) return false;
  // Did (previous boundary, steps_done] pass a multiple of checkpoint_every? (With sync_every 1:
  // is steps_done a multiple of it.)
  const int64_t previous = steps_done - length.sync_every;
  const bool every_passed = steps_done / length.checkpoint_every != previous / length.checkpoint_every;
  const bool last_boundary = steps_done > length.total_steps - length.sync_every;
  return every_passed || last_boundary;
}

}  // namespace

int64_t host_waits_for(const std::vector<Device>& devices) {
  const Device& first = devices.front();
  if (first.kind() != DeviceKind::kCuda && !first.is_simulated()) return 0;
  int64_t latest = 0;
  for (const Device& device : devices) latest = std::max(latest, device.synchronize());
  // Real GPUs are done once synchronized; simulated ones wait for the latest of them.
  if (first.is_simulated())
    for (const Device& device : devices)
      for (int s = 0; s < kStreamCount; ++s) device.wait_until(static_cast<StreamKind>(s), latest);
  return latest;
}

std::optional<double> run_step(TrainStrategy& strategy, const StepPlan& plan) {
  const std::vector<Device>& devices = strategy.devices();
  {
    PhaseOnAll phase(devices, Phase::kData);
    strategy.load_batch(plan);
  }
  std::optional<double> loss;
  {
    PhaseOnAll phase(devices, Phase::kForward);
    loss = strategy.forward(plan);
    trace_memory(devices);
  }
  {
    PhaseOnAll phase(devices, Phase::kBackward);
    strategy.backward(plan);
    trace_memory(devices);
  }
  if (plan.sync) {
    PhaseOnAll phase(devices, Phase::kOptimizer);
    strategy.optimizer_step();
    trace_memory(devices);
  }
  return loss;
}

TrainResult train_loop(TrainStrategy& strategy, const TrainConfig& config, const LoopOptions& options) {
  const std::vector<Device>& devices = strategy.devices();
  const Device& first = devices.front();  // the loss counter's lane
  const RunLength& length = strategy.length();
  const std::string where = options.rank >= 0 ? fmt::format(" on rank {}", options.rank) : "";
  TrainResult result;
  // What each device holds before the first step (the model; a resumed run's optimizer state; a
  // DataParallel replica's GPU nothing yet): the memory row shows it from the start, not from the
  // device's first finished kernel.
  trace_memory(devices);
  // From step 0, or where the --resume checkpoint left off: its epoch and batch are the next step's.
  const CheckpointState* resumed = options.resumed ? &options.resumed->state : nullptr;
  const std::string run_id = !options.run_id.empty()         ? options.run_id
                             : config.checkpoint_dir.empty() ? std::string()
                                                             : run_id_for(options.resumed);
  result.resumed_from_step = resumed ? resumed->steps_done : -1;
  int64_t step = resumed ? resumed->steps_done : 0;
  const int64_t start_epoch = resumed ? resumed->epoch : 0;
  const int64_t start_batch = resumed ? resumed->batch_in_epoch : 0;
  for (int64_t epoch = start_epoch; step < length.total_steps; ++epoch) {
    strategy.begin_epoch(epoch);
    for (int64_t b = epoch == start_epoch ? start_batch : 0;
         b < length.batches_per_epoch && step < length.total_steps; ++b) {
      const StepPlan plan{.step = step,
                          .epoch = epoch,
                          .batch = b,
                          .sync = (step + 1) % length.sync_every == 0 || step + 1 == length.total_steps,
                          .last = step + 1 == length.total_steps};
      for (const Device& device : devices) device.set_step(step);
      const int64_t start_ns = strategy.step_clock();
      std::optional<double> loss;
      try {  // (the loss check too: a run stopped by a non-finite loss says so in its trace)
        loss = run_step(strategy, plan);
        if (loss) {  // the message counts steps from 1, as the progress lines do
          DPS_CHECK(std::isfinite(*loss), ErrorKind::kInvalidArgument,
                    "loss became {} at step {}{} (try a smaller --lr)", *loss, step + 1, where);
          strategy.after_step(plan, *loss);
        }
      } catch (const std::exception& e) {
        strategy.step_failed(e.what());
        throw;
      }
      const int64_t end_ns = strategy.step_clock();
      TraceSink* tracer = first.tracer();
      if (loss) {
        result.losses.push_back(*loss);
        if (tracer) tracer->loss_counter(first, first.clock_ns(StreamKind::kCompute), *loss);
      }
      if (tracer && options.flush_trace) tracer->flush_soon();
      if (options.on_step)
        options.on_step({.step = step,
                         .total_steps = length.total_steps,
                         .epoch = epoch,
                         .loss = loss.value_or(0.0),
                         .rank = options.rank,
                         .sim_step_ns = end_ns - start_ns});
      ++step;
      if (checkpoint_due(config, length, step)) {
        PhaseOnAll phase(devices, Phase::kCheckpoint);
        const CheckpointSpot spot{.steps_done = step,
                                  .last = plan,
                                  .run_id = run_id,
                                  .batches_per_epoch = length.batches_per_epoch};
        if (std::string file = strategy.checkpoint(spot); !file.empty())
          result.last_checkpoint = std::move(file);
      }
    }
  }
  for (const Device& device : devices) device.set_step(-1);
  result.steps = step;
  return result;
}

}  // namespace dpscope::detail
