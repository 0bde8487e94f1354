// Shared pieces of the training modes (see train_common.hpp).
#include "train_common.hpp"

#include <filesystem>
#include <optional>
#include <random>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/io/safetensors.hpp"
#include "dpscope/nn/linear.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/nn/unused_parameter.hpp"
#include "dpscope/optim/adam.hpp"
#include "dpscope/optim/sgd.hpp"

namespace dpscope::detail {

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
  std::vector<int> trace_ids;
  for (const Device& d : devices) trace_ids.push_back(add_trace_device(header, d));
  if (const HardwarePreset* hw = devices.front().hardware(); hw != nullptr && devices.front().is_simulated())
    add_network_links(header, *hw, trace_ids);  // the simulated machine's links, not a full mesh
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

std::unique_ptr<Module> make_model(const TrainConfig& c, const Device& device) {
  std::unique_ptr<Module> model = Sequential::mlp(c.model, device, c.seed);
  if (!c.has_pitfall("unused-parameter")) return model;
  const int64_t out = Sequential::parse_mlp_spec(c.model).back();
  std::mt19937 generator(static_cast<uint32_t>(c.seed + 1));
  return std::make_unique<WithUnusedParameter>(std::move(model),
                                               std::make_unique<Linear>(out, out, device, generator));
}

CheckpointState load_resume_checkpoint(const TrainConfig& c) {
  const std::optional<std::filesystem::path> file = latest_checkpoint(c.checkpoint_dir);
  DPS_CHECK(file.has_value(), ErrorKind::kUsage, "--resume: no checkpoint in '{}'", c.checkpoint_dir);
  CheckpointState state = load_checkpoint(*file);
  check_resumable(state.config_json, c, file->string());
  return state;
}

std::string write_checkpoint(const TrainConfig& c, const Device& device, int64_t steps_done,
                             int64_t epoch_done, int64_t batch_done, int64_t per_epoch, const Module& model,
                             StateDict optimizer_state) {
  CheckpointState state;
  state.steps_done = steps_done;
  const bool epoch_ended = batch_done + 1 >= per_epoch;
  state.epoch = epoch_ended ? epoch_done + 1 : epoch_done;
  state.batch_in_epoch = epoch_ended ? 0 : batch_done + 1;
  state.config_json = c.to_json();
  state.model = model.state_dict();
  state.optimizer = std::move(optimizer_state);
  std::string file = save_checkpoint(c.checkpoint_dir, state).string();
  if (TraceSink* tracer = device.tracer())
    tracer->instant(device, device.clock_ns(StreamKind::kCompute), CheckpointSaved{.steps_done = steps_done});
  return file;
}

void save_weights(const TrainConfig& c, const Module& model) {
  if (c.save.empty()) return;
  NamedTensors weights;
  for (const auto& [name, tensor] : model.state_dict()) weights.emplace_back(name, tensor.to(Device::cpu()));
  save_safetensors(c.save, weights, {{"format", "pt"}, {"producer", "dpscope"}});
}

void finish_run(std::unique_ptr<TraceRecorder>& tracer, std::chrono::steady_clock::time_point wall_start,
                TrainResult& result) {
  if (tracer) {
    result.trace_path = tracer->path().string();
    tracer->close();
    result.trace_events = tracer->events_written();
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
}

}  // namespace dpscope::detail
