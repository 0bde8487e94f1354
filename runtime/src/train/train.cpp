// run_training(): `dpscope train`, which runs the mode's spec (mode.hpp), and the modes single and
// dp: their specs, their world and their strategy of the training loop (train/loop.hpp), in which
// every device of the run takes part in every phase. `--mode ddp` is train_ddp.cpp's.
#include <algorithm>
#include <chrono>
#include <optional>

#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/parallel/data_parallel.hpp"
#include "dpscope/train/train.hpp"
#include "loop.hpp"
#include "mode.hpp"
#include "train_common.hpp"

namespace dpscope::detail {
namespace {

// The single-device and DataParallel strategy: everything the run holds (with `resumed`: the
// checkpoint's weights and optimizer state). `device()` is the model's: the device itself (single)
// or device_ids[0], where DataParallel keeps the master weights.
class SingleStrategy final : public TrainStrategy {
 public:
  SingleStrategy(const TrainConfig& config, bool data_parallel, const CheckpointState* resumed)
      : config_(config), data_(load_data(config)), devices_(make_world(config).devices) {
    std::unique_ptr<Module> owned_model = make_model(config_, device());
    model_ = owned_model.get();
    if (!config_.init.empty()) load_initial_weights(config_, *model_);
    if (data_parallel) {
      data_parallel_.emplace(std::move(owned_model), devices_);
    } else {
      single_model_ = std::move(owned_model);
    }
    optimizer_ = make_optimizer(config_, model_->parameters());
    if (resumed) {
      model_->load_state_dict(resumed->model);
      optimizer_->load_state_tensors(resumed->optimizer);
    }
    criterion_ = make_loss(config_);
    // Batches are gathered on the host: on a cpu run that is the run's own cpu device (whose trace
    // context the layers' kernels then stamp), else the shared cpu, copied to the GPU by .to().
    const Device host = device().kind() == DeviceKind::kCpu ? device() : Device::cpu();
    loader_.emplace(
        data_,
        DataLoaderOptions{.batch_size = config_.batch, .shuffle = config_.shuffle, .seed = config_.seed},
        host);
    length_ = plan_run(config_, loader_->num_batches());
    mse_flat_targets_ = config_.loss == "mse" && data_->target_sample_shape().empty();
  }

  const Device& device() const { return devices_.front(); }
  const Module& model() const { return *model_; }
  const TensorDataset& data() const { return *data_; }

  const std::vector<Device>& devices() const override { return devices_; }
  const RunLength& length() const override { return length_; }
  int64_t step_clock() override { return host_waits_for(devices_); }

  void begin_epoch(int64_t epoch) override {
    loader_->set_epoch(config_.has_pitfall("no-set-epoch") ? 0 : epoch);  // the pitfall repeats epoch 0
  }

  void load_batch(const StepPlan& plan) override {
    // The input-on-cpu pitfall (`x.to(device)` forgotten) bites at the run's last step, after steps
    // that show the right loop: the inputs stay on the host and the first layer stops with
    // PyTorch's device-mismatch error.
    const bool inputs_stay_on_host = config_.has_pitfall("input-on-cpu") && plan.last;
    const Batch batch = loader_->batch(plan.batch);
    indices_ = batch.indices;
    y_ = batch.targets.to(device(), MemoryCategory::kActivations);
    if (mse_flat_targets_) y_ = y_.reshape({y_.numel(), 1});
    if (data_parallel_) {
      x_ = batch.inputs;  // DataParallel scatters from the host
      return;
    }
    // The samples event says which rows the GPU holds: none when the inputs stay on the host.
    if (TraceSink* t = device().tracer(); t && !inputs_stay_on_host)
      t->samples(device(), device().clock_ns(StreamKind::kCompute), indices_, std::nullopt);
    x_ = inputs_stay_on_host ? batch.inputs : batch.inputs.to(device(), MemoryCategory::kActivations);
  }

  std::optional<double> forward(const StepPlan& /*plan*/) override {
    out_ = data_parallel_ ? data_parallel_->forward(x_, indices_) : model_->forward(x_);
    return criterion_->forward(out_, y_).item();
  }

  void backward(const StepPlan& /*plan*/) override {
    out_ = Tensor();  // the outputs are counted by forward's memory sample, not backward's
    optimizer_->zero_grad();
    if (data_parallel_) {
      data_parallel_->backward(criterion_->backward());
    } else {
      model_->backward(criterion_->backward());
    }
  }

  void optimizer_step() override { optimizer_->step(); }

  std::string checkpoint(const CheckpointSpot& spot) override {
    return write_checkpoint(config_, spot, device(), *model_, optimizer_->state_tensors());
  }

  void step_failed(std::string_view message) override {
    trace_run_error(device(), message);  // the trace says why the run stopped
  }

 private:
  const TrainConfig& config_;
  std::shared_ptr<TensorDataset> data_;
  std::vector<Device> devices_;
  std::unique_ptr<Module> single_model_;       // single: owns the model
  std::optional<DataParallel> data_parallel_;  // dp: owns the model
  Module* model_ = nullptr;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Loss> criterion_;
  std::optional<DataLoader> loader_;
  RunLength length_;
  bool mse_flat_targets_ = false;
  Tensor x_, y_;  // the step's batch
  std::vector<int64_t> indices_;
  Tensor out_;  // the model's outputs, from forward until backward starts
};

// The single/dp run: `config` is validated.
TrainResult run_single_or_dp(const TrainConfig& config, bool data_parallel, const StepObserver& on_step) {
  std::optional<ResumeCheckpoint> resumed;
  if (config.resume) resumed = load_resume_checkpoint(config);
  SingleStrategy run(config, data_parallel, resumed ? &resumed->state : nullptr);
  if (resumed) check_resume_fits(*resumed, run.length());  // before the trace is written
  std::unique_ptr<TraceRecorder> tracer = open_trace(config, run.devices(), run.model());

  const int64_t sim_start_ns = host_waits_for(run.devices());
  TrainResult result =
      train_loop(run, config, {.resumed = resumed ? &*resumed : nullptr, .on_step = on_step});
  result.sim_total_ns = host_waits_for(run.devices()) - sim_start_ns;
  result.device_name = describe_devices(run.devices());
  result.parameter_count = run.model().parameter_numel();
  result.samples = run.data().size();
  result.samples_per_step = std::min(config.batch, run.data().size());

  save_weights(config, run.model());
  close_trace(tracer, result);
  return result;
}

// single and dp: --device cpu: the host, the run's own (it carries the trace context); --device
// cuda: logical GPUs cuda:0 .. cuda:N-1; --device sim: sim:0 .. sim:N-1 of the preset, which must
// hold N GPUs (the same limit DDP's network model enforces).
World make_process_world(const TrainConfig& config) {
  World world;
  if (config.device == DeviceKind::kCpu) {
    world.devices.push_back(Device::new_cpu());
    return world;
  }
  if (config.device == DeviceKind::kCuda) {
    world.devices =
        cuda::make_devices({.count = config.devices, .memory_cap_bytes = gpu_memory_cap_bytes(config)});
    for (size_t i = 0; i < world.devices.size(); ++i) world.devices[i].set_rank(static_cast<int>(i));
    return world;
  }
  const HardwarePreset preset = find_preset(config.preset);
  const int max_gpus = preset.network.max_gpus;
  DPS_CHECK(max_gpus == 0 || config.devices <= max_gpus, ErrorKind::kUsage,
            "--devices {}: preset {} ({} topology) holds {} GPUs", config.devices, preset.id, preset.topology,
            max_gpus);
  for (int i = 0; i < config.devices; ++i) {
    world.devices.push_back(Device::sim(i, preset));
    world.devices.back().set_rank(i);
  }
  return world;
}

// The flags both modes of one process refuse: --backend mpi, more than one cpu device, --timing-only.
void check_process_flags(const TrainConfig& config) {
  check_mpi_backend(config, /*ranks_on_cpu=*/false);
  DPS_CHECK(config.device != DeviceKind::kCpu || config.devices == 1, ErrorKind::kUsage,
            "--device cpu has one device, got --devices {}", config.devices);
  check_scale(config, /*timing_only_allowed=*/false);
}

constexpr std::string_view kSinglePitfalls[] = {"no-set-epoch", "input-on-cpu"};
constexpr std::string_view kDataParallelPitfalls[] = {"no-set-epoch"};

}  // namespace

const TrainModeSpec kSingleMode{
    .mode = TrainMode::kSingle,
    .word = "single",
    .pitfalls = kSinglePitfalls,
    .check_flags =
        [](const TrainConfig& config) {
          DPS_CHECK(config.devices == 1, ErrorKind::kUsage,
                    "--mode single trains on one device, but --devices is {} (use --mode dp or ddp)",
                    config.devices);
          check_process_flags(config);
        },
    .make_world = make_process_world,
    .run =
        [](const TrainConfig& config, const StepObserver& on_step) {
          return run_single_or_dp(config, /*data_parallel=*/false, on_step);
        },
    .describe_batch =
        [](const TrainConfig& /*config*/, const TrainResult& result) {
          return fmt::format("batch {} (the whole mini-batch), {} samples, {} steps", result.samples_per_step,
                             result.samples, result.steps);
        },
};

const TrainModeSpec kDataParallelMode{
    .mode = TrainMode::kDataParallel,
    .word = "dp",
    .pitfalls = kDataParallelPitfalls,
    .check_flags = check_process_flags,
    .make_world = make_process_world,
    .run =
        [](const TrainConfig& config, const StepObserver& on_step) {
          return run_single_or_dp(config, /*data_parallel=*/true, on_step);
        },
    .memory = {.replicas = true},
    .describe_batch =
        [](const TrainConfig& config, const TrainResult& result) {
          const int64_t batch = result.samples_per_step;
          const int64_t chunk = checked_ceil_div<int64_t>(batch, config.devices, "--batch chunk per GPU");
          return fmt::format(
              "batch {} (the whole mini-batch, scattered in chunks of up to {} over {} GPUs), {} samples, {} "
              "steps",
              batch, chunk, config.devices, result.samples, result.steps);
        },
};

}  // namespace dpscope::detail

namespace dpscope {

TrainResult run_training(const TrainConfig& config, const StepObserver& on_step) {
  config.validate();
  check_machine(config);
  check_output_paths(config);
  if (!config.resume && !config.checkpoint_dir.empty()) check_fresh_checkpoint_dir(config.checkpoint_dir);
  find_preset(config.preset);  // an unknown --preset is refused with --device cpu too
  const auto wall_start = std::chrono::steady_clock::now();
  TrainResult result = detail::mode_spec(config.mode).run(config, on_step);
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

bool runs_ranks(TrainMode mode) { return detail::mode_spec(mode).ranks; }

std::string describe_batch(const TrainConfig& config, const TrainResult& result) {
  return detail::mode_spec(config.mode).describe_batch(config, result);
}

}  // namespace dpscope
