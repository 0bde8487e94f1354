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

#include "dpscope/core/error.hpp"
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

namespace dpscope {
namespace {

std::shared_ptr<TensorDataset> load_data(const TrainConfig& c) {
  if (!c.dataset.empty()) return make_dataset(c.dataset, c.seed);
  const size_t comma = c.data.find(',');
  return load_npy_dataset(c.data.substr(0, comma), c.data.substr(comma + 1));
}

// Checks that the data fits the model and the loss; every mismatch is one kUsage line.
void check_data_fits(const TrainConfig& c, const Dataset& data, int64_t in_features, int64_t out_features) {
  DPS_CHECK(data.size() > 0, ErrorKind::kUsage, "data mismatch: {} has no samples", data.name());
  DPS_CHECK(data.num_features() == in_features, ErrorKind::kUsage,
            "data mismatch: inputs have {} features per sample but --model {} expects {}",
            data.num_features(), c.model, in_features);
  if (c.loss == "ce") {
    DPS_CHECK(data.target_dtype() == DType::kI64, ErrorKind::kUsage,
              "--loss ce needs int64 class targets, but the targets are {} (use --loss mse)",
              to_string(data.target_dtype()));
    DPS_CHECK(data.num_classes() <= out_features, ErrorKind::kUsage,
              "data mismatch: targets have {} classes but --model {} has {} outputs", data.num_classes(),
              c.model, out_features);
  } else {
    DPS_CHECK(data.target_dtype() == DType::kF32, ErrorKind::kUsage,
              "--loss mse needs float32 targets, but the targets are {} (use --loss ce)",
              to_string(data.target_dtype()));
    const Shape sample = data.target_sample_shape();
    const int64_t per_sample = shape_numel(sample);
    DPS_CHECK(per_sample == out_features, ErrorKind::kUsage,
              "data mismatch: targets have {} values per sample but --model {} has {} outputs", per_sample,
              c.model, out_features);
  }
}

void load_initial_weights(const TrainConfig& c, Module& model) {
  NamedTensors file = load_safetensors(c.init);
  try {
    model.load_state_dict(file);
  } catch (const Error& e) {
    throw Error(ErrorKind::kUsage,
                fmt::format("--init {} does not fit --model {}: {}", c.init, c.model, e.what()));
  }
}

std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& c, std::vector<Parameter*> params) {
  if (c.optim == "sgd")
    return std::make_unique<SGD>(
        std::move(params), SgdOptions{.lr = c.lr, .momentum = c.momentum, .weight_decay = c.weight_decay});
  if (c.optim == "adam") {
    AdamOptions o;
    o.lr = c.lr;
    o.weight_decay = c.weight_decay;
    return std::make_unique<Adam>(std::move(params), o);
  }
  AdamWOptions o;
  o.lr = c.lr;
  if (c.weight_decay > 0.0) o.weight_decay = c.weight_decay;
  return std::make_unique<AdamW>(std::move(params), o);
}

std::unique_ptr<Loss> make_loss(const TrainConfig& c) {
  if (c.loss == "ce") return std::make_unique<CrossEntropyLoss>();
  return std::make_unique<MSELoss>();
}

std::unique_ptr<TraceRecorder> open_trace(const TrainConfig& c, const std::vector<Device>& devices,
                                          const Module& model) {
  if (c.trace.empty()) return nullptr;
  TraceHeader header;
  header.clock = devices.front().is_simulated() ? "simulated" : "measured";
  header.run_json = c.to_json();
  for (const Device& d : devices) header.add_device(d);
  for (const Parameter* p : model.parameters())
    header.params.push_back(
        {.index = p->index, .name = p->name, .shape = p->data.shape(), .bytes = p->data.nbytes()});
  return TraceRecorder::open(c.trace, header, devices);
}

std::string describe_devices(const std::vector<Device>& devices) {
  const Device& d = devices.front();
  const HardwarePreset* hw = d.hardware();
  const std::string names =
      devices.size() == 1 ? d.name() : fmt::format("{}..{}", d.name(), devices.back().name());
  return hw ? fmt::format("{} ({}{})", names, devices.size() > 1 ? fmt::format("{} x ", devices.size()) : "",
                          hw->name)
            : names;
}

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
  if (c.backend == "cpu") return {Device::cpu()};
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
  const auto wall_start = std::chrono::steady_clock::now();

  const std::shared_ptr<TensorDataset> data = load_data(c);
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(c.model);
  check_data_fits(c, *data, sizes.front(), sizes.back());

  const std::vector<Device> devices = make_devices(c);
  const Device& device = devices.front();  // single: the device; dp: device_ids[0] (master weights)
  std::unique_ptr<Sequential> owned_model = Sequential::mlp(c.model, device, c.seed);
  Sequential& model = *owned_model;
  if (!c.init.empty()) load_initial_weights(c, model);
  std::optional<DataParallel> dp;
  if (c.mode == "dp") dp.emplace(std::move(owned_model), devices);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(c, model.parameters());
  std::unique_ptr<Loss> criterion = make_loss(c);

  DataLoader loader(data, {.batch_size = c.batch, .shuffle = c.shuffle, .seed = c.seed, .drop_last = false});
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
    const std::optional<std::filesystem::path> file = latest_checkpoint(c.checkpoint_dir);
    DPS_CHECK(file.has_value(), ErrorKind::kUsage, "--resume: no checkpoint in '{}'", c.checkpoint_dir);
    const CheckpointState state = load_checkpoint(*file);
    check_resumable(state.config_json, c, file->string());
    model.load_state_dict(state.model);
    optimizer->load_state_tensors(state.optimizer);
    step = state.steps_done;
    first_epoch = state.epoch;
    first_batch = state.batch_in_epoch;
    result.resumed_from_step = step;
  }
  // Saves the loop position of the NEXT step: (epoch, batch) after (epoch_done, batch_done).
  auto save = [&](int64_t epoch_done, int64_t batch_done) {
    CheckpointState state;
    state.steps_done = step;
    state.epoch = batch_done + 1 < per_epoch ? epoch_done : epoch_done + 1;
    state.batch_in_epoch = batch_done + 1 < per_epoch ? batch_done + 1 : 0;
    state.config_json = c.to_json();
    state.model = model.state_dict();
    state.optimizer = optimizer->state_tensors();
    result.last_checkpoint = save_checkpoint(c.checkpoint_dir, state).string();
    if (TraceRecorder* t = device.tracer())
      t->instant(device, "checkpoint_saved", device.clock_ns(StreamKind::kCompute),
                 fmt::format(R"({{"steps_done":{}}})", step));
  };
  const int64_t checkpoint_every = c.checkpoint_every > 0 ? c.checkpoint_every : per_epoch;

  for (int64_t epoch = first_epoch; step < total_steps; ++epoch) {
    loader.set_epoch(epoch);
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
        save(epoch, b);
      }
    }
  }
  for (const Device& d : devices) d.set_step(-1);
  result.steps = step;
  result.sim_total_ns = synchronize_all(devices) - sim_start_ns;

  if (!c.save.empty()) {
    // Saved with the plain module's names, so PyTorch's nn.Sequential loads them directly.
    NamedTensors weights;
    for (const auto& [name, tensor] : model.state_dict())
      weights.emplace_back(name, tensor.to(Device::cpu()));
    save_safetensors(c.save, weights, {{"format", "pt"}, {"producer", "dpscope"}});
  }
  if (tracer) {
    result.trace_path = tracer->path().string();
    tracer->close();
    result.trace_events = tracer->events_written();
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

}  // namespace dpscope
