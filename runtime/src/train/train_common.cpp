// Shared pieces of the training modes (see train_common.hpp): setup, run length, checkpoints.
#include "train_common.hpp"

#include <filesystem>
#include <limits>
#include <optional>
#include <random>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/io/finite_values.hpp"
#include "dpscope/io/safetensors.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "dpscope/nn/linear.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/nn/unused_parameter.hpp"
#include "dpscope/optim/adam.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/train/memory_estimate.hpp"
#include "loop.hpp"

namespace dpscope::detail {

uint64_t gpu_memory_cap_bytes(const TrainConfig& config) {
  return static_cast<uint64_t>(config.gpu_mem_mb * 1024.0 * 1024.0);
}

RunLength plan_run(const TrainConfig& config, int64_t batches_per_epoch) {
  RunLength length;
  length.batches_per_epoch = batches_per_epoch;
  length.sync_every = config.no_sync_every;  // 1 outside ddp (TrainConfig::validate)
  if (config.steps > 0) {
    length.total_steps = config.steps;
  } else {
    const int64_t epochs = std::max<int64_t>(config.epochs, 1);
    DPS_CHECK(batches_per_epoch <= std::numeric_limits<int64_t>::max() / epochs, ErrorKind::kUsage,
              "--epochs {} x {} batches per epoch is more steps than a run can count", epochs,
              batches_per_epoch);
    length.total_steps = batches_per_epoch * epochs;
  }
  length.checkpoint_every = config.checkpoint_every > 0 ? config.checkpoint_every : batches_per_epoch;
  return length;
}

namespace {

// Refuses (kIo) an input that is not a regular file, before opening it (a FIFO would block).
void refuse_unreadable_input(const char* flag, const std::string& path) {
  if (const std::string why = why_not_readable(path); !why.empty())
    throw Error(ErrorKind::kIo, fmt::format("{} {}: {}", flag, path, why));
}

// Checks that the data fits the model and the loss; every mismatch is one kUsage line.
void check_data_fits(const TrainConfig& config, const Dataset& data) {
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(config.model);
  const int64_t in_features = sizes.front();
  const int64_t out_features = sizes.back();
  DPS_CHECK(data.size() > 0, ErrorKind::kUsage, "data mismatch: {} has no samples", data.name());
  DPS_CHECK(data.num_features() == in_features, ErrorKind::kUsage,
            "data mismatch: inputs have {} features per sample but --model {} expects {}",
            data.num_features(), config.model, in_features);
  if (config.loss == "ce") {
    DPS_CHECK(data.target_dtype() == DType::kI64, ErrorKind::kUsage,
              "--loss ce needs int64 class targets, but the targets are {} (use --loss mse)",
              to_string(data.target_dtype()));
    DPS_CHECK(data.num_classes() <= out_features, ErrorKind::kUsage,
              "data mismatch: targets have {} classes but --model {} has {} outputs", data.num_classes(),
              config.model, out_features);
  } else {
    DPS_CHECK(data.target_dtype() == DType::kF32, ErrorKind::kUsage,
              "--loss mse needs float32 targets, but the targets are {} (use --loss ce)",
              to_string(data.target_dtype()));
    const Shape sample = data.target_sample_shape();
    const int64_t per_sample = shape_numel(sample);
    DPS_CHECK(per_sample == out_features, ErrorKind::kUsage,
              "data mismatch: targets have {} values per sample but --model {} has {} outputs", per_sample,
              config.model, out_features);
  }
  // Every mode calls this once its data is loaded and before its model exists: the moment to refuse
  // a run its devices or this machine cannot hold, before a byte of it is allocated.
  check_training_memory(config, data.size());
}

}  // namespace

std::shared_ptr<TensorDataset> load_data(const TrainConfig& config) {
  std::shared_ptr<TensorDataset> data;
  if (!config.dataset.empty()) {
    data = make_dataset(config.dataset, config.seed);
  } else {
    const size_t comma = config.data.find(',');
    const std::string inputs = config.data.substr(0, comma);
    const std::string targets = config.data.substr(comma + 1);
    refuse_unreadable_input("--data", inputs);
    refuse_unreadable_input("--data", targets);
    data = load_npy_dataset(inputs, targets);  // refuses a NaN or inf value, naming the file and index
  }
  check_data_fits(config, *data);
  return data;
}

void load_initial_weights(const TrainConfig& config, Module& model) {
  refuse_unreadable_input("--init", config.init);
  NamedTensors file = load_safetensors(config.init);
  for (const auto& [name, tensor] : file) {
    if (const std::optional<NonFiniteValue> bad = first_non_finite(tensor))
      throw Error(ErrorKind::kUsage,
                  fmt::format("--init {}: tensor '{}' holds {} at {}; weights must be finite "
                              "numbers",
                              config.init, name, bad->value, bad->position));
  }
  try {
    model.load_state_dict(file);
  } catch (const Error& e) {
    throw Error(ErrorKind::kUsage,
                fmt::format("--init {} does not fit --model {}: {}", config.init, config.model, e.what()));
  }
}

std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& config, std::vector<Parameter*> params) {
  if (config.optim == "sgd")
    return std::make_unique<SGD>(
        std::move(params),
        SgdOptions{.lr = config.lr, .momentum = config.momentum, .weight_decay = config.weight_decay});
  if (config.optim == "adam") {
    AdamOptions options;
    options.lr = config.lr;
    options.weight_decay = config.weight_decay;
    return std::make_unique<Adam>(std::move(params), options);
  }
  AdamWOptions options;
  options.lr = config.lr;
  if (config.weight_decay > 0.0) options.weight_decay = config.weight_decay;
  return std::make_unique<AdamW>(std::move(params), options);
}

std::unique_ptr<Loss> make_loss(const TrainConfig& config) {
  if (config.loss == "ce") return std::make_unique<CrossEntropyLoss>();
  return std::make_unique<MSELoss>();
}

std::unique_ptr<TraceRecorder> open_trace(const TrainConfig& config, const std::vector<Device>& devices,
                                          const Module& model,
                                          const std::optional<TraceClusterInfo>& cluster) {
  if (config.trace.empty()) return nullptr;
  return open_trace_at(config.trace, config.to_json(), devices, model, config.trace_kernels_every, cluster);
}

std::unique_ptr<TraceRecorder> open_trace_at(const std::filesystem::path& path, std::string run_json,
                                             const std::vector<Device>& devices, const Module& model,
                                             int64_t kernels_every,
                                             const std::optional<TraceClusterInfo>& cluster) {
  for (const Device& device : devices) kernels::warm_up(device);  // not inside the first traced step
  TraceHeader header;
  header.clock = devices.front().is_simulated() ? "simulated" : "measured";
  header.run_json = std::move(run_json);
  std::vector<int> trace_ids;
  for (const Device& device : devices) trace_ids.push_back(add_trace_device(header, device));
  if (const HardwarePreset* hw = devices.front().hardware(); hw != nullptr && devices.front().is_simulated())
    add_network_links(header, *hw, trace_ids);  // the simulated machine's links, not a full mesh
  for (const Parameter* p : model.parameters())
    header.params.push_back(
        {.index = p->index, .name = p->name, .shape = p->data.shape(), .bytes = p->data.nbytes()});
  header.cluster = cluster;
  std::unique_ptr<TraceRecorder> recorder = TraceRecorder::open(path, header, devices);
  for (const Device& device : devices) device.set_trace_kernels_every(kernels_every);
  return recorder;
}

std::string describe_devices(const std::vector<Device>& devices) {
  const Device& first = devices.front();
  const HardwarePreset* hw = first.hardware();
  const std::string names =
      devices.size() == 1 ? first.name() : fmt::format("{}..{}", first.name(), devices.back().name());
  return hw ? fmt::format("{} ({}{})", names, devices.size() > 1 ? fmt::format("{} x ", devices.size()) : "",
                          hw->name)
            : names;
}

DdpOptions ddp_options(const TrainConfig& config) {
  DdpOptions options;
  options.bucket_cap_mb = config.bucket_cap_mb;
  options.first_bucket_mb = config.first_bucket_mb;
  options.find_unused_parameters = config.find_unused_parameters;
  options.comm_hook = config.comm_hook == "fp16" ? CommHook::kFp16Compress : CommHook::kAllreduce;
  options.average_gradients = !config.has_pitfall("no-average");
  options.algorithm = parse_algorithm(config.algo, "--algo");
  return options;
}

std::unique_ptr<Module> make_model(const TrainConfig& config, const Device& device) {
  std::unique_ptr<Module> model = Sequential::mlp(config.model, device, config.seed);
  if (!config.has_pitfall("unused-parameter")) return model;
  const int64_t out = Sequential::parse_mlp_spec(config.model).back();
  std::mt19937 generator(static_cast<uint32_t>(config.seed + 1));
  return std::make_unique<WithUnusedParameter>(std::move(model),
                                               std::make_unique<Linear>(out, out, device, generator));
}

ResumeCheckpoint load_resume_checkpoint(const TrainConfig& config) {
  ResumeCheckpoint resumed = load_newest_valid_checkpoint(config.checkpoint_dir);
  if (!resumed.warning.empty()) fmt::print(stderr, "dpscope: warning: {}\n", printable_line(resumed.warning));
  const std::string file = resumed.file.string();
  check_resumable(resumed.state.config_json, config, file);
  // Gradients accumulated under no_sync are not in a checkpoint: resuming between two synchronized
  // steps would drop them (this version writes none there; an older one did).
  const int64_t sync_every = config.no_sync_every;  // 1 outside ddp (TrainConfig::validate)
  DPS_CHECK(resumed.state.steps_done % sync_every == 0, ErrorKind::kUsage,
            "--resume: {} was written after step {}, between two synchronized steps of --no-sync-every {}, "
            "so gradients it accumulated are missing; resume from a checkpoint at a multiple of {} steps",
            file, resumed.state.steps_done, sync_every, sync_every);
  return resumed;
}

void check_resume_fits(const ResumeCheckpoint& resumed, const RunLength& length) {
  check_resume_position(resumed.state, resumed.file, length.total_steps, length.batches_per_epoch);
}

std::string run_id_for(const ResumeCheckpoint* resumed) {
  return resumed != nullptr && !resumed->state.run_id.empty() ? resumed->state.run_id : new_run_id();
}

std::string write_checkpoint(const TrainConfig& config, const CheckpointSpot& spot, const Device& device,
                             const Module& model, StateDict optimizer_state) {
  CheckpointState state;
  state.run_id = spot.run_id;
  state.steps_done = spot.steps_done;
  // The position of the next step.
  const bool epoch_ended = spot.last.batch + 1 >= spot.batches_per_epoch;
  state.epoch = epoch_ended ? spot.last.epoch + 1 : spot.last.epoch;
  state.batch_in_epoch = epoch_ended ? 0 : spot.last.batch + 1;
  state.config_json = config.to_json();
  state.model = model.state_dict();
  state.optimizer = std::move(optimizer_state);
  std::string file = save_checkpoint(config.checkpoint_dir, state).string();
  if (TraceSink* tracer = device.tracer())
    tracer->instant(device, device.clock_ns(StreamKind::kCompute),
                    CheckpointSaved{.steps_done = spot.steps_done});
  return file;
}

void save_weights(const TrainConfig& config, const Module& model) {
  if (config.save.empty()) return;
  NamedTensors weights;
  for (const auto& [name, tensor] : model.state_dict()) weights.emplace_back(name, tensor.to(Device::cpu()));
  try {
    save_safetensors(config.save, weights, {{"format", "pt"}, {"producer", "dpscope"}});
  } catch (const Error& e) {
    // The run is done: weights that cannot be written (disk full) are a runtime failure, not a
    // usage error (check_output_paths refused an unwritable --save before training).
    if (e.kind() != ErrorKind::kIo && e.kind() != ErrorKind::kWriteFailed) throw;
    throw Error(ErrorKind::kWriteFailed, fmt::format("--save: {}", e.what()));
  }
}

void trace_run_error(const Device& device, std::string_view message) {
  if (TraceSink* tracer = device.tracer()) {
    tracer->instant(device, device.clock_ns(StreamKind::kCompute), RunError{.message = message});
    try {
      tracer->flush();
    } catch (const Error&) {
      // The trace cannot be written (disk full): the error being reported is the one that matters.
    }
  }
}

void close_trace(std::unique_ptr<TraceRecorder>& tracer, TrainResult& result) {
  if (!tracer) return;
  result.trace_path = tracer->path().string();
  tracer->close();
  result.trace_events = tracer->events_written();
}

}  // namespace dpscope::detail
