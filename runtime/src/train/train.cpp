// run_training(): `dpscope train` — the single-device and DataParallel loop here; `--mode ddp` goes
// to run_ddp_training() (train_ddp.cpp), which runs train_rank() on every rank.
//
// Each step: data (copy the batch to the device, trace which samples it holds), forward (model and
// loss), backward (zero_grad, loss and model backward; gradients fire their ready hooks), optimizer
// step; then a loss counter and the trace is flushed, so a live viewer can follow. Sections: the
// devices and their phases, the run's setup (SingleRun), one step (run_step), the loop.
#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/parallel/data_parallel.hpp"
#include "dpscope/train/train.hpp"
#include "train_common.hpp"

namespace dpscope {
namespace {

using namespace detail;

// A point where the host waits for every device (like torch.cuda.synchronize() on each): all
// streams of all devices move to the latest clock among them. Returns that time.
int64_t synchronize_all(const std::vector<Device>& devices) {
  if (devices.front().kind() == DeviceKind::kCuda) {
    // Real GPUs: the host waits for each device's streams (the step time is then measured).
    int64_t latest = 0;
    for (const Device& device : devices) latest = std::max(latest, device.synchronize());
    return latest;
  }
  if (!devices.front().is_simulated()) return 0;
  int64_t latest = 0;
  for (const Device& device : devices) latest = std::max(latest, device.synchronize());
  for (const Device& device : devices)
    for (int s = 0; s < kStreamCount; ++s) device.wait_until(static_cast<StreamKind>(s), latest);
  return latest;
}

// Sets the phase of every device for a scope (the training loop's phases are global).
class AllDevicesPhase {
 public:
  AllDevicesPhase(const std::vector<Device>& devices, Phase phase) : devices_(devices) {
    for (const Device& device : devices_) device.set_phase(phase);
  }
  ~AllDevicesPhase() {
    for (const Device& device : devices_) device.set_phase(Phase::kNone);
  }
  AllDevicesPhase(const AllDevicesPhase&) = delete;
  AllDevicesPhase& operator=(const AllDevicesPhase&) = delete;

 private:
  const std::vector<Device>& devices_;
};

void trace_memory_all(const std::vector<Device>& devices) {
  for (const Device& device : devices) device.trace_memory();
}

// Everything the single-device or DataParallel loop holds. `device` is the model's: the device
// itself (single) or device_ids[0], where DataParallel keeps the master weights (dp).
struct SingleRun {
  explicit SingleRun(const TrainConfig& run_config)
      : config(run_config), data(load_data(run_config)), devices(make_world(run_config).devices) {
    const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(config.model);
    check_data_fits(config, *data, sizes.front(), sizes.back());
    std::unique_ptr<Module> owned_model = make_model(config, device());
    model = owned_model.get();
    if (!config.init.empty()) load_initial_weights(config, *model);
    if (config.mode == TrainMode::kDataParallel) {
      data_parallel.emplace(std::move(owned_model), devices);
    } else {
      single_model = std::move(owned_model);
    }
    optimizer = make_optimizer(config, model->parameters());
    criterion = make_loss(config);
    // Batches are gathered on the host: on a cpu run that is the run's own cpu device (whose trace
    // context the layers' kernels then stamp), else the shared cpu, copied to the GPU by .to().
    const Device host = device().kind() == DeviceKind::kCpu ? device() : Device::cpu();
    loader.emplace(
        data, DataLoaderOptions{.batch_size = config.batch, .shuffle = config.shuffle, .seed = config.seed},
        host);
    length = plan_run(config, loader->num_batches());
    mse_flat_targets = config.loss == "mse" && data->target_sample_shape().empty();
  }
  const Device& device() const { return devices.front(); }

  const TrainConfig& config;
  std::shared_ptr<TensorDataset> data;
  std::vector<Device> devices;
  std::unique_ptr<Module> single_model;       // single: owns the model
  std::optional<DataParallel> data_parallel;  // dp: owns the model
  Module* model = nullptr;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Loss> criterion;
  std::optional<DataLoader> loader;
  RunLength length;
  bool mse_flat_targets = false;
};

// One step on batch `batch_index` of the loader's current epoch. Returns the loss. With
// `inputs_stay_on_host` the batch's inputs are never copied to the GPU (the input-on-cpu pitfall:
// `x.to(device)` forgotten), so the first layer stops with PyTorch's device-mismatch error.
double run_step(SingleRun& run, TraceRecorder* tracer, int64_t batch_index, bool inputs_stay_on_host) {
  const std::vector<Device>& devices = run.devices;
  const Device& device = run.device();
  Tensor x, y;
  std::vector<int64_t> indices;
  {
    AllDevicesPhase phase(devices, Phase::kData);
    const Batch batch = run.loader->batch(batch_index);
    indices = batch.indices;
    y = batch.targets.to(device, MemoryCategory::kActivations);
    if (run.mse_flat_targets) y = y.reshape({y.numel(), 1});
    if (run.data_parallel) {
      x = batch.inputs;  // DataParallel scatters from the host
    } else {
      // The samples event says which rows the GPU holds: none when the inputs stay on the host.
      if (tracer && !inputs_stay_on_host)
        tracer->samples(device, device.clock_ns(StreamKind::kCompute), indices, std::nullopt);
      x = inputs_stay_on_host ? batch.inputs : batch.inputs.to(device, MemoryCategory::kActivations);
    }
  }
  double loss_value = 0.0;
  {
    AllDevicesPhase phase(devices, Phase::kForward);
    const Tensor out = run.data_parallel ? run.data_parallel->forward(x, indices) : run.model->forward(x);
    loss_value = run.criterion->forward(out, y).item();
    trace_memory_all(devices);
  }
  {
    AllDevicesPhase phase(devices, Phase::kBackward);
    run.optimizer->zero_grad();
    if (run.data_parallel) {
      run.data_parallel->backward(run.criterion->backward());
    } else {
      run.model->backward(run.criterion->backward());
    }
    trace_memory_all(devices);
  }
  {
    AllDevicesPhase phase(devices, Phase::kOptimizer);
    run.optimizer->step();
    trace_memory_all(devices);
  }
  return loss_value;
}

// The single/dp run: `config` is validated.
TrainResult run_single_or_dp(const TrainConfig& config, const StepObserver& on_step) {
  const auto wall_start = std::chrono::steady_clock::now();
  SingleRun run(config);
  const Device& device = run.device();
  std::optional<ResumeCheckpoint> resumed;
  if (config.resume) {
    resumed = load_resume_checkpoint(config);
    check_resume_fits(*resumed, run.length);
    run.model->load_state_dict(resumed->state.model);
    run.optimizer->load_state_tensors(resumed->state.optimizer);
  }
  const std::string run_id = run_id_for(resumed ? &*resumed : nullptr);
  std::unique_ptr<TraceRecorder> tracer = open_trace(config, run.devices, *run.model);

  TrainResult result;
  result.device_name = describe_devices(run.devices);
  result.parameter_count = run.model->parameter_numel();
  result.samples = run.data->size();
  result.samples_per_step = std::min(config.batch, run.data->size());
  result.resumed_from_step = resumed ? resumed->state.steps_done : -1;
  const int64_t sim_start_ns = synchronize_all(run.devices);

  const RunLength& length = run.length;
  const LoopPosition start = start_position(resumed ? &resumed->state : nullptr);
  int64_t step = start.steps_done;
  for (int64_t epoch = start.epoch; step < length.total_steps; ++epoch) {
    run.loader->set_epoch(config.has_pitfall("no-set-epoch") ? 0 : epoch);  // the pitfall repeats epoch 0
    for (int64_t b = epoch == start.epoch ? start.batch : 0;
         b < length.batches_per_epoch && step < length.total_steps; ++b) {
      for (const Device& d : run.devices) d.set_step(step);
      const int64_t step_start_ns = synchronize_all(run.devices);
      // The input-on-cpu pitfall bites at the run's last step, after steps that show the right loop.
      const bool forget_to_device = config.has_pitfall("input-on-cpu") && step + 1 == length.total_steps;
      double loss_value = 0.0;
      try {
        loss_value = run_step(run, tracer.get(), b, forget_to_device);
      } catch (const std::exception& e) {
        trace_run_error(device, e.what());  // the trace says why the run stopped
        throw;
      }
      check_loss_finite(loss_value, step, "");
      const int64_t step_end_ns = synchronize_all(run.devices);
      if (tracer) {
        tracer->loss_counter(device, device.clock_ns(StreamKind::kCompute), loss_value);
        tracer->flush_soon();
      }
      result.losses.push_back(loss_value);
      if (on_step)
        on_step({.step = step,
                 .total_steps = length.total_steps,
                 .epoch = epoch,
                 .loss = loss_value,
                 .sim_step_ns = step_end_ns - step_start_ns});
      ++step;
      if (checkpoint_due(config, length, step)) {
        AllDevicesPhase phase(run.devices, Phase::kCheckpoint);
        result.last_checkpoint =
            write_checkpoint(config, run_id, device, step, epoch, b, length.batches_per_epoch, *run.model,
                             run.optimizer->state_tensors());
      }
    }
  }
  for (const Device& d : run.devices) d.set_step(-1);
  result.steps = step;
  result.sim_total_ns = synchronize_all(run.devices) - sim_start_ns;

  save_weights(config, *run.model);
  finish_run(tracer, wall_start, result);
  return result;
}

}  // namespace

TrainResult run_training(const TrainConfig& config, const StepObserver& on_step) {
  config.validate();
  check_machine(config);
  check_output_paths(config);
  if (!config.resume && !config.checkpoint_dir.empty()) check_fresh_checkpoint_dir(config.checkpoint_dir);
  find_preset(config.preset);  // an unknown --preset is refused with --device cpu too
  if (config.timing_only) return run_analytic_training(config, on_step);
  if (config.backend == PgBackend::kMpi) return run_mpi_training(config, on_step);
  if (config.one_process_per_rank()) return run_env_training(config, *read_env_rendezvous(), on_step);
  return config.mode == TrainMode::kDdp ? run_ddp_training(config, on_step)
                                        : run_single_or_dp(config, on_step);
}

}  // namespace dpscope
