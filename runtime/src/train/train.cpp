// run_training(): the single-device training loop behind `dpscope train --mode single`.
//
// Each step: data (copy the batch to the device, trace which samples it holds), forward (model and
// loss), backward (zero_grad, loss and model backward; gradients fire their ready hooks), optimizer
// step; then a loss counter and the trace is flushed, so a live viewer can follow.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/io/safetensors.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/adam.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/data_parallel.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/train/checkpoint.hpp"
#include "dpscope/train/train.hpp"
#include "train_common.hpp"

namespace dpscope {
namespace {

using namespace detail;

// A point where the host waits for every device (like torch.cuda.synchronize() on each): all
// streams of all devices move to the latest clock among them. Returns that time.
int64_t synchronize_all(const std::vector<Device>& devices) {
  if (!devices.front().is_simulated()) return 0;
  int64_t latest = 0;
  for (const Device& d : devices) latest = std::max(latest, d.synchronize());
  for (const Device& d : devices)
    for (int s = 0; s < kStreamCount; ++s) d.wait_until(static_cast<StreamKind>(s), latest);
  return latest;
}

// Sets the phase of every device for a scope (the training loop's phases are global).
class AllDevicesPhase {
 public:
  AllDevicesPhase(const std::vector<Device>& devices, Phase phase) : devices_(devices) {
    for (const Device& d : devices_) d.set_phase(phase);
  }
  ~AllDevicesPhase() {
    for (const Device& d : devices_) d.set_phase(Phase::kNone);
  }
  AllDevicesPhase(const AllDevicesPhase&) = delete;
  AllDevicesPhase& operator=(const AllDevicesPhase&) = delete;

 private:
  const std::vector<Device>& devices_;
};

void trace_memory_all(const std::vector<Device>& devices) {
  for (const Device& d : devices) d.trace_memory();
}

std::vector<Device> make_devices(const TrainConfig& c) {
  if (c.backend == "cpu") return {Device::new_cpu()};  // the run's own: it carries the trace context
  const HardwarePreset preset = find_preset(c.preset);
  std::vector<Device> devices;
  for (int i = 0; i < c.devices; ++i) {
    devices.push_back(Device::sim(i, preset));
    devices.back().set_rank(i);
  }
  return devices;
}

}  // namespace

TrainResult run_training(const TrainConfig& c, const StepObserver& on_step) {
  c.validate();
  if (c.mode == "ddp") return run_ddp_training(c, on_step);
  const auto wall_start = std::chrono::steady_clock::now();

  const std::shared_ptr<TensorDataset> data = load_data(c);
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(c.model);
  check_data_fits(c, *data, sizes.front(), sizes.back());

  const std::vector<Device> devices = make_devices(c);
  const Device& device = devices.front();  // single: the device; dp: device_ids[0] (master weights)
  std::unique_ptr<Module> owned_model = make_model(c, device);
  Module& model = *owned_model;
  if (!c.init.empty()) load_initial_weights(c, model);
  std::optional<DataParallel> dp;
  if (c.mode == "dp") dp.emplace(std::move(owned_model), devices);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(c, model.parameters());
  std::unique_ptr<Loss> criterion = make_loss(c);

  // Batches are gathered on the host: on a cpu run that is the run's own cpu device (whose trace
  // context the layers' kernels then stamp), else the shared cpu, copied to the GPU by .to().
  const Device host = device.kind() == DeviceKind::kCpu ? device : Device::cpu();
  DataLoader loader(data, {.batch_size = c.batch, .shuffle = c.shuffle, .seed = c.seed, .drop_last = false},
                    host);
  const int64_t per_epoch = loader.num_batches();
  const int64_t total_steps = c.steps > 0 ? c.steps : per_epoch * std::max<int64_t>(c.epochs, 1);

  std::unique_ptr<TraceRecorder> tracer = open_trace(c, devices, model);
  const bool mse_flat_targets = c.loss == "mse" && data->target_sample_shape().empty();

  TrainResult result;
  result.device_name = describe_devices(devices);
  result.parameter_count = model.parameter_numel();
  result.samples = data->size();
  const int64_t sim_start_ns = synchronize_all(devices);

  int64_t step = 0;
  int64_t first_epoch = 0;
  int64_t first_batch = 0;
  if (c.resume) {
    const CheckpointState state = load_resume_checkpoint(c);
    model.load_state_dict(state.model);
    optimizer->load_state_tensors(state.optimizer);
    step = state.steps_done;
    first_epoch = state.epoch;
    first_batch = state.batch_in_epoch;
    result.resumed_from_step = step;
  }
  const int64_t checkpoint_every = c.checkpoint_every > 0 ? c.checkpoint_every : per_epoch;

  for (int64_t epoch = first_epoch; step < total_steps; ++epoch) {
    loader.set_epoch(c.has_pitfall("no-set-epoch") ? 0 : epoch);  // the pitfall: every epoch repeats epoch 0
    for (int64_t b = epoch == first_epoch ? first_batch : 0; b < per_epoch && step < total_steps; ++b) {
      for (const Device& d : devices) d.set_step(step);
      const int64_t step_start_ns = synchronize_all(devices);
      Tensor x, y;
      std::vector<int64_t> indices;
      {
        AllDevicesPhase phase(devices, Phase::kData);
        const Batch batch = loader.batch(b);
        indices = batch.indices;
        y = batch.targets.to(device, MemoryCategory::kActivations);
        if (mse_flat_targets) y = y.reshape({y.numel(), 1});
        if (dp) {
          x = batch.inputs;  // DataParallel scatters from the host
        } else {
          if (tracer) tracer->samples(device, device.clock_ns(StreamKind::kCompute), indices);
          x = batch.inputs.to(device, MemoryCategory::kActivations);
        }
      }
      double loss_value = 0.0;
      {
        AllDevicesPhase phase(devices, Phase::kForward);
        const Tensor out = dp ? dp->forward(x, indices) : model.forward(x);
        loss_value = criterion->forward(out, y).item();
        trace_memory_all(devices);
      }
      {
        AllDevicesPhase phase(devices, Phase::kBackward);
        optimizer->zero_grad();
        if (dp) {
          dp->backward(criterion->backward());
        } else {
          model.backward(criterion->backward());
        }
        trace_memory_all(devices);
      }
      {
        AllDevicesPhase phase(devices, Phase::kOptimizer);
        optimizer->step();
        trace_memory_all(devices);
      }
      DPS_CHECK(std::isfinite(loss_value), ErrorKind::kInvalidArgument,
                "loss became {} at step {} (try a smaller --lr)", loss_value, step);
      const int64_t step_end_ns = synchronize_all(devices);
      if (tracer) {
        const std::pair<std::string_view, double> loss_counter[] = {{"loss", loss_value}};
        tracer->counter(device, "loss", device.clock_ns(StreamKind::kCompute), loss_counter);
        tracer->flush();
      }
      result.losses.push_back(loss_value);
      if (on_step)
        on_step({.step = step,
                 .total_steps = total_steps,
                 .epoch = epoch,
                 .loss = loss_value,
                 .sim_step_ns = step_end_ns - step_start_ns});
      ++step;
      if (!c.checkpoint_dir.empty() && (step % checkpoint_every == 0 || step == total_steps)) {
        AllDevicesPhase phase(devices, Phase::kCheckpoint);
        result.last_checkpoint =
            write_checkpoint(c, device, step, epoch, b, per_epoch, model, optimizer->state_tensors());
      }
    }
  }
  for (const Device& d : devices) d.set_step(-1);
  result.steps = step;
  result.sim_total_ns = synchronize_all(devices) - sim_start_ns;

  save_weights(c, model);
  finish_run(tracer, wall_start, result);
  return result;
}

}  // namespace dpscope
