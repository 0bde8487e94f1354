// train_rank(): one rank of `dpscope train --mode ddp` (see train/train_rank.hpp). Sections: the
// optimizer, the mismatched-collective pitfall, a checkpoint every rank takes part in
// (checkpoint_collectively), the rank's strategy for the training loop (RankStrategy, train/loop.hpp),
// and train_rank.
#include "dpscope/train/train_rank.hpp"

#include <algorithm>
#include <exception>
#include <functional>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/rank_agreement.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/parallel/zero_redundancy_optimizer.hpp"
#include "loop.hpp"
#include "train_common.hpp"

namespace dpscope {
namespace {

using namespace detail;

// The optimizer every rank steps: plain (each rank keeps all the state) or, with --zero, ZeRO-1
// (each rank keeps its shard's state); the loop drives both through the Optimizer interface.
std::unique_ptr<Optimizer> make_rank_optimizer(const TrainConfig& config, Module& model,
                                               ProcessGroup& group) {
  if (!config.zero) return make_optimizer(config, model.parameters());
  return std::make_unique<ZeroRedundancyOptimizer>(
      model.parameters(), group,
      [&config](std::vector<Parameter*> shard) { return make_optimizer(config, std::move(shard)); });
}

// --pitfall mismatched-collective: rank 0 alone all-reduces its loss to log the mean over ranks,
// as `if rank == 0: dist.all_reduce(loss)` does. The other ranks never call it: their next
// collective is the next step's gradient all-reduce, so the group's sequence numbers pair two
// different collectives and every rank fails with the process group's kMismatch error naming both
// (TORCH_DISTRIBUTED_DEBUG=DETAIL's "Detected mismatch between collectives on ranks"), instead of
// the hang or the silently wrong numbers NCCL gives.
void all_reduce_loss_on_rank_zero_only(ProcessGroup& group, double loss) {
  if (group.rank() != 0) return;
  const float own_loss[] = {static_cast<float>(loss)};
  Tensor mean_loss = Tensor::from_floats(own_loss, {1}, group.device(), MemoryCategory::kBuffers);
  group.all_reduce(mean_loss, {.op = ReduceOp::kAvg})->wait();
}

// The checkpoint after `steps_done` steps. Every rank takes part: rank 0 writes, then all ranks meet in an
// all-reduce (max) of their outcome — 0, or the rank + 1 of a rank whose write failed — so nobody runs ahead
// of a half-written checkpoint. When the write failed, its message is broadcast too and every rank ends with
// an error naming rank 0 and the cause (rank 0 with its own error), instead of a hang — whichever rank's
// error the launcher reports first. Returns the file rank 0 wrote ("" on other ranks). `write` is rank 0's
// write of the checkpoint.
std::string checkpoint_collectively(ProcessGroup& group, int64_t steps_done,
                                    const std::function<std::string()>& write) {
  std::string file;
  std::exception_ptr failure;
  std::string failure_message;
  if (group.rank() == 0) {
    try {
      file = write();
    } catch (const std::exception& e) {
      failure = std::current_exception();
      failure_message = e.what();
    }
  }
  const float own_outcome[] = {failure ? static_cast<float>(group.rank() + 1) : 0.0f};
  Tensor outcome = Tensor::from_floats(own_outcome, {1}, group.device(), MemoryCategory::kBuffers);
  group.all_reduce(outcome, {.op = ReduceOp::kMax})->wait();
  const int failed_rank = static_cast<int>(outcome.item()) - 1;
  if (failed_rank < 0) return file;
  const std::string cause = broadcast_text(group, failed_rank, failure_message);
  if (failure) std::rethrow_exception(failure);
  throw Error(ErrorKind::kIo,
              fmt::format("rank {} stops: rank {} failed to write the checkpoint after step {}: {}",
                          group.rank(), failed_rank, steps_done, cause));
}

// One rank's strategy for the training loop (train/loop.hpp): everything the rank holds for the
// run, built in the order PyTorch's recipe builds it: model (rank 0's weights, --init, or the
// checkpoint's), DDP (which broadcasts rank 0's weights), optimizer, loss, and a DataLoader over
// this rank's DistributedSampler shard. On a step that does not synchronize, forward and backward
// run under no_sync() and the gradients accumulate; the optimizer steps only on synchronized ones.
class RankStrategy final : public TrainStrategy {
 public:
  RankStrategy(ProcessGroup& group, const TrainConfig& config, std::shared_ptr<const TensorDataset> data,
               const CheckpointState* resumed)
      : group_(group),
        config_(config),
        devices_{group.device()},
        data_(std::move(data)),
        model_(make_model(config_, group_.device())),
        sampler_(data_->size(), {.num_replicas = group_.size(),
                                 .rank = group_.rank(),
                                 .shuffle = config_.shuffle,
                                 .seed = config_.seed,
                                 .drop_last = false}),
        loader_(data_, {.batch_size = config_.batch, .sampler = [this](int64_t epoch) {
                          // The pitfall: without set_epoch every epoch repeats epoch 0's order.
                          sampler_.set_epoch(config_.has_pitfall("no-set-epoch") ? 0 : epoch);
                          return sampler_.indices();
                        }}) {
    if (!config_.init.empty()) load_initial_weights(config_, *model_);
    if (resumed) model_->load_state_dict(resumed->model);
    ddp_.emplace(*model_, group_, ddp_options(config_));
    optimizer_ = make_rank_optimizer(config_, *model_, group_);
    if (resumed) optimizer_->load_state_tensors(resumed->optimizer);
    criterion_ = make_loss(config_);
    mse_flat_targets_ = config_.loss == "mse" && data_->target_sample_shape().empty();
    length_ = plan_run(config_, loader_.num_batches());
  }

  const Module& model() const { return *model_; }
  const DistributedSampler& sampler() const { return sampler_; }

  const std::vector<Device>& devices() const override { return devices_; }
  const RunLength& length() const override { return length_; }
  int64_t step_clock() override { return dev().clock_ns(StreamKind::kCompute); }

  void begin_epoch(int64_t epoch) override { loader_.set_epoch(epoch); }

  void load_batch(const StepPlan& plan) override {
    const Batch batch = loader_.batch(plan.batch);
    // The loop's epoch (its pass over the sampler), not the one given to set_epoch: the trace shows
    // a missing set_epoch as epochs that repeat an order (trace_tools/ddp_diagnosis.hpp).
    if (TraceSink* t = dev().tracer())
      t->samples(dev(), dev().clock_ns(StreamKind::kCompute), batch.indices, loader_.epoch());
    x_ = batch.inputs.to(dev(), MemoryCategory::kActivations);
    y_ = batch.targets.to(dev(), MemoryCategory::kActivations);
    if (mse_flat_targets_) y_ = y_.reshape({y_.numel(), 1});
  }

  std::optional<double> forward(const StepPlan& plan) override {
    if (!plan.sync) no_sync_.emplace(*ddp_);  // until the end of backward
    return criterion_->forward(ddp_->forward(x_), y_).item();
  }

  void backward(const StepPlan& /*plan*/) override {
    ddp_->backward(criterion_->backward());
    no_sync_.reset();
  }

  void optimizer_step() override {
    optimizer_->step();  // ZeRO: the local shard's update, then each owner broadcasts its shard
    optimizer_->zero_grad();
  }

  void after_step(const StepPlan& plan, double loss) override {
    // The pitfall logs every second step, so that the others' next collective is a gradient
    // all-reduce (step 1 rebuilds the buckets with a broadcast first).
    if (plan.sync && plan.step % 2 == 1 && config_.has_pitfall("mismatched-collective"))
      all_reduce_loss_on_rank_zero_only(group_, loss);
  }

  // The optimizer's state gathers on rank 0 first (a collective for ZeRO).
  std::string checkpoint(const CheckpointSpot& spot) override {
    optimizer_->consolidate_state_dict(0);
    return checkpoint_collectively(group_, spot.steps_done, [&] {
      return write_checkpoint(config_, spot, dev(), *model_, optimizer_->state_tensors());
    });
  }

 private:
  const Device& dev() const { return devices_.front(); }

  ProcessGroup& group_;
  const TrainConfig& config_;
  std::vector<Device> devices_;  // the rank's own GPU
  std::shared_ptr<const TensorDataset> data_;
  std::unique_ptr<Module> model_;
  std::optional<DistributedDataParallel> ddp_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Loss> criterion_;
  DistributedSampler sampler_;
  DataLoader loader_;  // its sampler reads sampler_ above
  RunLength length_;
  bool mse_flat_targets_ = false;
  std::optional<DistributedDataParallel::NoSync> no_sync_;
  Tensor x_, y_;  // the step's batch
};

}  // namespace

RankResult train_rank(ProcessGroup& group, const TrainConfig& config, const RankOptions& options) {
  DPS_CHECK(config.mode == TrainMode::kDdp, ErrorKind::kUsage, "train_rank runs --mode ddp, got --mode {}",
            name(config.mode));
  DPS_CHECK(group.size() == config.devices, ErrorKind::kUsage,
            "train_rank: the process group has {} ranks but --devices is {}", group.size(), config.devices);
  const std::shared_ptr<const TensorDataset> data = options.data ? options.data : load_data(config);
  std::shared_ptr<const ResumeCheckpoint> resumed = options.resume_from;
  if (config.resume && !resumed)
    resumed = std::make_shared<const ResumeCheckpoint>(load_resume_checkpoint(config));
  RankStrategy rank(group, config, data, resumed ? &resumed->state : nullptr);
  if (resumed) check_resume_fits(*resumed, rank.length());
  RankResult result = train_loop(rank, config,
                                 {.rank = group.rank(),
                                  .flush_trace = group.rank() == 0 || options.own_tracer,
                                  .resumed = resumed.get(),
                                  .run_id = options.run_id,
                                  .on_step = options.on_step});
  result.samples = data->size();
  result.parameter_count = rank.model().parameter_numel();
  result.samples_per_step = std::min(config.batch, rank.sampler().num_samples()) * group.size();
  if (group.rank() == 0) save_weights(config, rank.model());  // every rank holds the same weights
  return result;
}

}  // namespace dpscope
