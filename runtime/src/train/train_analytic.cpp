// run_analytic_training(): `dpscope train --mode ddp --timing-only` — DDP on any number of
// simulated GPUs (train/train.hpp, TrainConfig::timing_only; docs/scaling.md).
//
// Every rank of a DDP world does the same work on the same shapes, so one rank stands for all: rank
// 0 runs the real DistributedDataParallel, model, loss and optimizer code on Tensor::meta tensors
// (kernels are timed by the preset's roofline and nothing is computed), and its process group is
// the registry's `analytic` backend, which times each collective for the whole world (AnalyticCollectives)
// instead of meeting peer threads at every step. The trace holds rank 0's lanes; each collective's
// args say how many ranks took part.
//
// The run then repeats its last step on one GPU (no gradient exchange, untraced): the weak-scaling
// baseline its efficiency is measured against.
#include <algorithm>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/analytic_collectives.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/train/memory_estimate.hpp"
#include "loop.hpp"
#include "train_common.hpp"

namespace dpscope::detail {
namespace {

// Rank 0 of a world of `world_size` GPUs, as the training loop's strategy (train/loop.hpp): its
// device and model, then (join(), once the trace is open, so DDP's broadcast of the weights is
// traced) its process group, DDP, optimizer and loss. A step: the batch's shapes to the GPU,
// forward, backward (DDP's bucketed all-reduces, overlapped), the optimizer.
class AnalyticStrategy final : public TrainStrategy {
 public:
  // `world`: rank 0's GPU alone, from make_world().
  AnalyticStrategy(const TrainConfig& config, World world, int world_size)
      : config_(config),
        sizes_(Sequential::parse_mlp_spec(config.model)),
        world_(std::move(world)),
        world_size_(world_size),
        model_(Sequential::mlp_timing_only(config.model, dev())) {
    // No epochs and no checkpoints: --steps steps (default 1) over shapes.
    const int64_t steps = config.steps > 0 ? config.steps : 1;
    length_ = {.batches_per_epoch = steps, .total_steps = steps, .checkpoint_every = steps, .sync_every = 1};
  }

  void join() {
    group_ = init_process_group("analytic", 0, world_size_, {.world = world_.ranks});
    ddp_.emplace(*model_, *group_, ddp_options(config_));
    optimizer_ = make_optimizer(config_, model_->parameters());
    criterion_ = make_loss(config_);
  }

  const Module& model() const { return *model_; }

  // One step outside the loop, untraced (the one-GPU baseline): its simulated duration, from the
  // step's start to the end of the last stream.
  int64_t timed_step(int64_t index) {
    dev().set_step(index);
    const int64_t start = step_clock();
    run_step(*this, {.step = index});
    const int64_t end = step_clock();
    dev().set_step(-1);
    return end - start;
  }

  const std::vector<Device>& devices() const override { return world_.devices; }
  const RunLength& length() const override { return length_; }
  int64_t step_clock() override { return host_waits_for(world_.devices); }
  void begin_epoch(int64_t /*epoch*/) override {}

  void load_batch(const StepPlan& /*plan*/) override {
    const Device host = Device::cpu();
    const DType target_dtype = config_.loss == "ce" ? DType::kI64 : DType::kF32;
    const Shape target_shape =
        config_.loss == "ce" ? Shape{config_.batch} : Shape{config_.batch, sizes_.back()};
    x_ = Tensor::meta({config_.batch, sizes_.front()}, host).to(dev(), MemoryCategory::kActivations);
    y_ = Tensor::meta(target_shape, host, MemoryCategory::kActivations, target_dtype)
             .to(dev(), MemoryCategory::kActivations);
  }

  std::optional<double> forward(const StepPlan& /*plan*/) override {
    criterion_->forward(ddp_->forward(x_), y_);
    return std::nullopt;  // shapes only: no loss to report
  }

  void backward(const StepPlan& /*plan*/) override { ddp_->backward(criterion_->backward()); }

  void optimizer_step() override {
    optimizer_->step();
    optimizer_->zero_grad();
  }

  std::string checkpoint(const CheckpointSpot& /*spot*/) override {
    DPS_ASSERT(false, "--timing-only writes no checkpoints (TrainConfig::validate refuses --checkpoint-dir)");
    return "";
  }

 private:
  const Device& dev() const { return world_.devices.front(); }

  const TrainConfig& config_;
  std::vector<int64_t> sizes_;
  World world_;  // rank 0's GPU
  int world_size_;
  std::unique_ptr<Sequential> model_;
  std::shared_ptr<ProcessGroup> group_;
  std::optional<DistributedDataParallel> ddp_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Loss> criterion_;
  RunLength length_;
  Tensor x_, y_;  // the step's batch: shapes without data
};

}  // namespace

World make_timing_only_world(const TrainConfig& config) {
  // Rank 0 alone: the other ranks are timed by the analytic backend, never made. Its world does
  // not read $DPSCOPE_ALGO: the analytic backend resolves every algorithm itself.
  World world;
  world.devices.push_back(Device::sim(0, find_preset(config.preset)));
  world.devices.back().set_rank(0);
  world.ranks =
      SimWorld::create(1, {.preset = config.preset, .devices = world.devices, .algorithm = Algorithm::kAuto});
  return world;
}

TrainResult run_analytic_training(const TrainConfig& config, const StepObserver& on_step) {
  const HardwarePreset preset = find_preset(config.preset);
  // No data and no host memory: only the simulated GPU's capacity bounds the model.
  check_training_memory(config, /*rows=*/0);
  AnalyticStrategy rank(config, make_world(config), config.devices);
  // The world's collectives described (the trace's cluster, the summary's world); the analytic
  // backend times them with a model of its own, made from the same preset.
  const AnalyticCollectives world_model(preset, config.devices);
  std::unique_ptr<TraceRecorder> tracer =
      open_trace(config, rank.devices(), rank.model(), world_model.cluster_info());
  rank.join();

  int64_t last_step_ns = 0;
  int64_t sim_total_ns = 0;
  TrainResult result = train_loop(rank, config, {.on_step = [&](const StepReport& report) {
                                    last_step_ns = report.sim_step_ns;
                                    sim_total_ns += report.sim_step_ns;
                                    if (on_step) on_step(report);
                                  }});
  result.sim_total_ns = sim_total_ns;
  result.device_name = fmt::format("sim:0 of {} ({} x {})", config.devices, config.devices, preset.name);
  result.parameter_count = rank.model().parameter_numel();
  result.samples_per_step = config.batch * config.devices;

  // The weak-scaling baseline: the same step on one GPU, after a first step that builds DDP's
  // buckets (DDP rebuilds them after its first iteration, as the world's run did).
  AnalyticStrategy alone(config, make_world(config), 1);
  alone.join();
  alone.timed_step(0);
  const int64_t one_gpu_ns = alone.timed_step(1);
  result.scaling = TrainResult::Scaling{
      .world =
          fmt::format("{} GPU{}: {}", config.devices, config.devices == 1 ? "" : "s", world_model.describe()),
      .step_ns = last_step_ns,
      .one_gpu_step_ns = one_gpu_ns,
      .exposed_comm_ns = std::max<int64_t>(0, last_step_ns - one_gpu_ns),
      .efficiency =
          last_step_ns > 0 ? static_cast<double>(one_gpu_ns) / static_cast<double>(last_step_ns) : 1.0};
  close_trace(tracer, result);
  return result;
}

}  // namespace dpscope::detail
