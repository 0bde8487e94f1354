// run_analytic_training(): `dpscope train --mode ddp --timing-only` — DDP on any number of
// simulated GPUs (train/train.hpp, TrainConfig::timing_only; docs/scaling.md).
//
// Every rank of a DDP world does the same work on the same shapes, so one rank stands for all: rank
// 0 runs the real DistributedDataParallel, model, loss and optimizer code on Tensor::meta tensors
// (kernels are timed by the preset's roofline and nothing is computed), and its process group is
// the analytic backend, which times each collective for the whole world (AnalyticCollectives)
// instead of meeting peer threads at every step. The trace holds rank 0's lanes; each collective's
// args say how many ranks took part.
//
// The run then repeats its last step on one GPU (no gradient exchange, untraced): the weak-scaling
// baseline its efficiency is measured against.
#include <algorithm>
#include <chrono>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/analytic_collectives.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/train/memory_estimate.hpp"
#include "train_common.hpp"

namespace dpscope::detail {
namespace {

// Rank 0 of a world of `world_size` GPUs: its device and model, then (join(), once the trace is
// open, so DDP's broadcast of the weights is traced) its process group, DDP, optimizer and loss.
class AnalyticRank {
 public:
  // `device`: rank 0's GPU, from make_world().
  AnalyticRank(const TrainConfig& config, const HardwarePreset& preset, Device device, int world_size)
      : config_(config),
        sizes_(Sequential::parse_mlp_spec(config.model)),
        device_(std::move(device)),
        model_(Sequential::mlp_timing_only(config.model, device_)),
        collectives_(std::make_shared<const AnalyticCollectives>(preset, world_size)) {}

  void join() {
    group_.emplace(make_analytic_backend(device_, collectives_));
    ddp_.emplace(*model_, *group_, ddp_options(config_));
    optimizer_ = make_optimizer(config_, model_->parameters());
    criterion_ = make_loss(config_);
  }

  const Device& device() const { return device_; }
  const Module& model() const { return *model_; }
  const AnalyticCollectives& collectives() const { return *collectives_; }

  // One step: the batch to the GPU, forward, backward (DDP's bucketed all-reduces, overlapped),
  // the optimizer. Returns its simulated duration (from the step's start to the end of the last
  // stream).
  int64_t step(int64_t index) {
    const Device& dev = device_;
    dev.set_step(index);
    const int64_t start = dev.synchronize();
    const Device host = Device::cpu();
    {
      PhaseScope phase(dev, Phase::kData);
      const DType target_dtype = config_.loss == "ce" ? DType::kI64 : DType::kF32;
      const Shape target_shape =
          config_.loss == "ce" ? Shape{config_.batch} : Shape{config_.batch, sizes_.back()};
      x_ = Tensor::meta({config_.batch, sizes_.front()}, host).to(dev, MemoryCategory::kActivations);
      y_ = Tensor::meta(target_shape, host, MemoryCategory::kActivations, target_dtype)
               .to(dev, MemoryCategory::kActivations);
    }
    {
      PhaseScope phase(dev, Phase::kForward);
      criterion_->forward(ddp_->forward(x_), y_);
      dev.trace_memory();
    }
    {
      PhaseScope phase(dev, Phase::kBackward);
      ddp_->backward(criterion_->backward());
      dev.trace_memory();
    }
    {
      PhaseScope phase(dev, Phase::kOptimizer);
      optimizer_->step();
      optimizer_->zero_grad();
      dev.trace_memory();
    }
    const int64_t end = dev.synchronize();
    dev.set_step(-1);
    return end - start;
  }

 private:
  const TrainConfig& config_;
  std::vector<int64_t> sizes_;
  Device device_;
  std::unique_ptr<Sequential> model_;
  std::shared_ptr<const AnalyticCollectives> collectives_;
  std::optional<ProcessGroup> group_;
  std::optional<DistributedDataParallel> ddp_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Loss> criterion_;
  Tensor x_, y_;
};

}  // namespace

TrainResult run_analytic_training(const TrainConfig& config, const StepObserver& on_step) {
  const auto wall_start = std::chrono::steady_clock::now();
  const HardwarePreset preset = find_preset(config.preset);
  // No data and no host memory: only the simulated GPU's capacity bounds the model.
  check_training_memory(config, /*rows=*/0);
  AnalyticRank rank(config, preset, make_world(config).devices.front(), config.devices);
  std::unique_ptr<TraceRecorder> tracer = open_trace(config, {rank.device()}, rank.model());
  rank.join();

  const int64_t total_steps = config.steps > 0 ? config.steps : 1;
  TrainResult result;
  result.device_name = fmt::format("sim:0 of {} ({} x {})", config.devices, config.devices, preset.name);
  result.parameter_count = rank.model().parameter_numel();
  result.samples_per_step = config.batch * config.devices;
  int64_t last_step_ns = 0;
  for (int64_t step = 0; step < total_steps; ++step) {
    last_step_ns = rank.step(step);
    result.sim_total_ns += last_step_ns;
    if (tracer) tracer->flush_soon();
    if (on_step)
      on_step(
          {.step = step, .total_steps = total_steps, .epoch = 0, .loss = 0.0, .sim_step_ns = last_step_ns});
  }
  result.steps = total_steps;

  // The weak-scaling baseline: the same step on one GPU, after a first step that builds DDP's
  // buckets (DDP rebuilds them after its first iteration, as the world's run did).
  AnalyticRank alone(config, preset, make_world(config).devices.front(), 1);
  alone.join();
  alone.step(0);
  const int64_t one_gpu_ns = alone.step(1);
  result.scaling = TrainResult::Scaling{
      .world = fmt::format("{} GPU{}: {}", config.devices, config.devices == 1 ? "" : "s",
                           rank.collectives().describe()),
      .step_ns = last_step_ns,
      .one_gpu_step_ns = one_gpu_ns,
      .exposed_comm_ns = std::max<int64_t>(0, last_step_ns - one_gpu_ns),
      .efficiency =
          last_step_ns > 0 ? static_cast<double>(one_gpu_ns) / static_cast<double>(last_step_ns) : 1.0};
  finish_run(tracer, wall_start, result);
  return result;
}

}  // namespace dpscope::detail
