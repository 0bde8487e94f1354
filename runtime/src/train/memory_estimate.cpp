// The training run's memory estimate and check (train/memory_estimate.hpp).
#include "dpscope/train/memory_estimate.hpp"

#include <algorithm>
#include <vector>

#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/format_bytes.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/nn/sequential.hpp"
#include "mode.hpp"

namespace dpscope {
namespace {

constexpr uint64_t kF32Bytes = 4;
constexpr uint64_t kI64Bytes = 8;

// Checked sums and products of user-given sizes; an overflow names the model.
class Sizes {
 public:
  explicit Sizes(const TrainConfig& config) : what_("--model " + config.model + " memory estimate") {}
  uint64_t add(uint64_t a, uint64_t b) const { return checked_add(a, b, what_, ErrorKind::kUsage); }
  uint64_t mul(uint64_t a, uint64_t b) const { return checked_mul(a, b, what_, ErrorKind::kUsage); }

 private:
  std::string what_;
};

// Bytes of activations for `rows` rows through `widths` (input, hidden..., output): the input, each
// Linear's output, each ReLU's output (every hidden layer), the loss's output gradient, and the
// targets (int64 classes for ce, float32 rows for mse).
uint64_t activation_bytes(const Sizes& s, const TrainConfig& config, const std::vector<uint64_t>& widths,
                          uint64_t rows) {
  uint64_t floats_per_row = widths.front();
  for (size_t i = 1; i < widths.size(); ++i) {
    const bool hidden = i + 1 < widths.size();
    floats_per_row = s.add(floats_per_row, s.mul(widths[i], hidden ? 2 : 1));
  }
  floats_per_row = s.add(floats_per_row, widths.back());  // the loss's gradient
  const uint64_t target_bytes = config.loss == "ce" ? kI64Bytes : s.mul(widths.back(), kF32Bytes);
  return s.mul(rows, s.add(s.mul(floats_per_row, kF32Bytes), target_bytes));
}

std::string describe(const MemoryEstimate& e) {
  return fmt::format(
      "parameters {}, gradients {}, optimizer state {}, {}activations {}", format_bytes(e.parameters_bytes),
      format_bytes(e.gradients_bytes), format_bytes(e.optimizer_bytes),
      e.buffers_bytes > 0 ? fmt::format("DDP buckets {}, ", format_bytes(e.buffers_bytes)) : "",
      format_bytes(e.activations_bytes));
}

}  // namespace

MemoryEstimate estimate_training_memory(const TrainConfig& config, int64_t rows) {
  const Sizes s(config);
  std::vector<uint64_t> widths;
  for (int64_t w : Sequential::parse_mlp_spec(config.model)) widths.push_back(static_cast<uint64_t>(w));
  uint64_t params = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    params = s.add(params, s.add(s.mul(widths[i], widths[i + 1]), widths[i + 1]));
  if (config.has_pitfall("unused-parameter"))  // one more Linear(out, out) the forward never uses
    params = s.add(params, s.add(s.mul(widths.back(), widths.back()), widths.back()));
  const uint64_t param_bytes = s.mul(params, kF32Bytes);
  const auto devices = static_cast<uint64_t>(config.devices);
  const detail::TrainModeSpec& spec = detail::mode_spec(config.mode);

  MemoryEstimate e;
  e.parameters_bytes = param_bytes;
  e.gradients_bytes = param_bytes;
  uint64_t optimizer_bytes = 0;
  if (config.optim == "sgd" && config.momentum > 0.0) optimizer_bytes = param_bytes;  // momentum_buffer
  if (config.optim != "sgd") optimizer_bytes = s.mul(param_bytes, 2);                 // exp_avg, exp_avg_sq
  if (spec.ranks && config.zero)
    optimizer_bytes = checked_ceil_div(optimizer_bytes, devices, "ZeRO shard", ErrorKind::kUsage);
  e.optimizer_bytes = optimizer_bytes;
  if (spec.memory.gradient_buckets) e.buffers_bytes = param_bytes;  // not views of .grad

  // The rows one device holds, and what device 0 of a run with replicas holds besides.
  const uint64_t batch = static_cast<uint64_t>(config.batch);
  const uint64_t data_rows = static_cast<uint64_t>(std::max<int64_t>(rows, 0));
  uint64_t device_rows = 0;
  uint64_t gathered_bytes = 0;
  if (config.timing_only) {
    device_rows = batch;
  } else if (spec.memory.batch_per_rank) {  // a rank's DistributedSampler shard bounds its batch
    device_rows = std::min(batch, checked_ceil_div(data_rows, devices, "rows per rank", ErrorKind::kUsage));
  } else {
    const uint64_t whole = std::min(batch, data_rows);
    device_rows = checked_ceil_div(whole, devices, "rows per device", ErrorKind::kUsage);
    // Device 0 gathers every replica's output and computes the loss over the whole batch.
    if (spec.memory.replicas) gathered_bytes = s.mul(s.mul(whole, widths.back()), 2 * kF32Bytes);
  }
  e.activations_bytes = s.add(activation_bytes(s, config, widths, device_rows), gathered_bytes);
  e.device_bytes =
      s.add(s.add(s.add(e.parameters_bytes, e.gradients_bytes), s.add(e.optimizer_bytes, e.buffers_bytes)),
            e.activations_bytes);

  if (config.timing_only || config.device == DeviceKind::kCuda) return e;  // no host memory for the tensors
  if (config.device == DeviceKind::kCpu) {
    e.host_bytes = e.device_bytes;
  } else if (spec.memory.replicas) {
    // Device 0 as above; every other device a replica with its gradients and its chunk.
    const uint64_t replica =
        s.add(s.add(e.parameters_bytes, e.gradients_bytes), activation_bytes(s, config, widths, device_rows));
    e.host_bytes = s.add(e.device_bytes, s.mul(replica, devices - 1));
  } else {
    e.host_bytes = s.mul(e.device_bytes, devices);
  }
  return e;
}

void check_training_memory(const TrainConfig& config, int64_t rows) {
  const MemoryEstimate e = estimate_training_memory(config, rows);
  if (config.device == DeviceKind::kSim) {
    const HardwarePreset preset = find_preset(config.preset);
    DPS_CHECK(
        preset.memory_bytes == 0 || e.device_bytes <= preset.memory_bytes, ErrorKind::kUsage,
        "--model {} needs about {} on sim:0 ({}) ({}), which holds {}; try a smaller --model or "
        "--batch{}",
        config.model, format_bytes(e.device_bytes), preset.name, describe(e),
        format_bytes(preset.memory_bytes),
        detail::mode_spec(config.mode).ranks && !config.zero && e.optimizer_bytes > 0 ? ", or --zero" : "");
  }
  if (e.host_bytes == 0) return;
  const uint64_t available = host_memory_bytes();
  if (available == 0) return;  // unknown: the allocations decide
  const std::string where = config.device == DeviceKind::kCpu
                                ? std::string("the cpu device")
                                : fmt::format("{} simulated GPU{} (their tensors live in host memory)",
                                              config.devices, config.devices == 1 ? "" : "s");
  const std::string parts =
      e.host_bytes == e.device_bytes
          ? describe(e)
          : fmt::format("the busiest holds {}: {}", format_bytes(e.device_bytes), describe(e));
  DPS_CHECK(e.host_bytes <= available, ErrorKind::kUsage,
            "--model {} needs about {} of host memory for {} ({}); this machine has {}", config.model,
            format_bytes(e.host_bytes), where, parts, format_bytes(available));
}

}  // namespace dpscope
