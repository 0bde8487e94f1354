// train_rank(): one rank of `dpscope train --mode ddp` (see train/train_rank.hpp). Sections:
// the rank's setup (RankSetup), one step (run_step), a checkpoint every rank takes part in
// (checkpoint_collectively), and the loop (train_rank).
#include "dpscope/train/train_rank.hpp"

#include <algorithm>
#include <exception>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/parallel/zero_redundancy_optimizer.hpp"
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

// Everything one rank holds for the run, built in the order PyTorch's recipe builds it: model
// (rank 0's weights, --init, or the checkpoint's), DDP (which broadcasts rank 0's weights),
// optimizer, loss, and a DataLoader over this rank's DistributedSampler shard.
struct RankSetup {
  RankSetup(ProcessGroup& rank_group, const TrainConfig& run_config,
            std::shared_ptr<const TensorDataset> dataset, const CheckpointState* resumed)
      : group(rank_group),
        config(run_config),
        data(std::move(dataset)),
        model(make_model(config, group.device())),
        sampler(data->size(), {.num_replicas = group.size(),
                               .rank = group.rank(),
                               .shuffle = config.shuffle,
                               .seed = config.seed,
                               .drop_last = false}),
        loader(data, {.batch_size = config.batch, .sampler = [this](int64_t epoch) {
                        // The pitfall: without set_epoch every epoch repeats epoch 0's order.
                        sampler.set_epoch(config.has_pitfall("no-set-epoch") ? 0 : epoch);
                        return sampler.indices();
                      }}) {
    if (!config.init.empty()) load_initial_weights(config, *model);
    if (resumed) model->load_state_dict(resumed->model);
    ddp.emplace(*model, group, ddp_options(config));
    optimizer = make_rank_optimizer(config, *model, group);
    if (resumed) optimizer->load_state_tensors(resumed->optimizer);
    criterion = make_loss(config);
    mse_flat_targets = config.loss == "mse" && data->target_sample_shape().empty();
    length = plan_run(config, loader.num_batches());
  }
  RankSetup(const RankSetup&) = delete;
  RankSetup& operator=(const RankSetup&) = delete;

  ProcessGroup& group;
  const TrainConfig& config;
  std::shared_ptr<const TensorDataset> data;
  std::unique_ptr<Module> model;
  std::optional<DistributedDataParallel> ddp;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Loss> criterion;
  DistributedSampler sampler;
  DataLoader loader;  // its sampler reads `sampler` above
  RunLength length;
  bool mse_flat_targets = false;
  std::string run_id;  // rank 0 writes checkpoints under it
};

// One step on this rank: batch `batch` of the loader's current epoch; the optimizer steps only when
// `sync` (otherwise forward and backward run under no_sync() and the gradients accumulate).
// Returns this rank's loss.
double run_step(RankSetup& rank, int64_t batch_index, bool sync) {
  const Device& dev = rank.group.device();
  Tensor x, y;
  {
    PhaseScope phase(dev, Phase::kData);
    const Batch batch = rank.loader.batch(batch_index);
    // The loop's epoch (its pass over the sampler), not the one given to set_epoch: the trace shows
    // a missing set_epoch as epochs that repeat an order (trace_format/ddp_diagnosis.hpp).
    if (TraceSink* t = dev.tracer())
      t->samples(dev, dev.clock_ns(StreamKind::kCompute), batch.indices, rank.loader.epoch());
    x = batch.inputs.to(dev, MemoryCategory::kActivations);
    y = batch.targets.to(dev, MemoryCategory::kActivations);
    if (rank.mse_flat_targets) y = y.reshape({y.numel(), 1});
  }
  double loss_value = 0.0;
  {
    std::optional<DistributedDataParallel::NoSync> no_sync;
    if (!sync) no_sync.emplace(*rank.ddp);
    {
      PhaseScope phase(dev, Phase::kForward);
      loss_value = rank.criterion->forward(rank.ddp->forward(x), y).item();
      dev.trace_memory();
    }
    {
      PhaseScope phase(dev, Phase::kBackward);
      rank.ddp->backward(rank.criterion->backward());
      dev.trace_memory();
    }
  }
  if (sync) {
    PhaseScope phase(dev, Phase::kOptimizer);
    rank.optimizer->step();  // ZeRO: the local shard's update, then each owner broadcasts its shard
    rank.optimizer->zero_grad();
    dev.trace_memory();
  }
  return loss_value;
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

// Sends `text` (significant on `root`; its first 1024 bytes) from `root` to every rank of the group.
// The bytes travel as floats, which hold 0..255 exactly, because collectives carry float32 tensors.
std::string broadcast_text(ProcessGroup& group, int root, const std::string& text) {
  constexpr size_t kMaxBytes = 1024;
  const Device& dev = group.device();
  const float own_length[] = {static_cast<float>(std::min(text.size(), kMaxBytes))};
  Tensor length = Tensor::from_floats(own_length, {1}, dev, MemoryCategory::kBuffers);
  group.broadcast(length, {.root = root})->wait();
  const auto byte_count = static_cast<int64_t>(length.item());
  if (byte_count == 0) return "";
  std::vector<float> bytes(static_cast<size_t>(byte_count), 0.0f);  // [byte_count]
  if (group.rank() == root)
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(text[i]);
  Tensor payload = Tensor::from_floats(bytes, {byte_count}, dev, MemoryCategory::kBuffers);
  group.broadcast(payload, {.root = root})->wait();
  std::string received;
  for (float byte : payload.to_vector())
    received.push_back(static_cast<char>(static_cast<unsigned char>(byte)));
  return received;
}

// The checkpoint after `steps_done` steps (the last one batch `batch_done` of `epoch_done`). Every
// rank takes part: the optimizer's state gathers on rank 0 (a collective for ZeRO), rank 0 writes,
// then all ranks meet in an all-reduce (max) of their outcome — 0, or the rank + 1 of a rank whose
// write failed — so nobody runs ahead of a half-written checkpoint. When the write failed, its
// message is broadcast too and every rank ends with an error naming rank 0 and the cause (rank 0
// with its own error), instead of a hang — whichever rank's error the launcher reports first.
// Returns the file rank 0 wrote ("" on other ranks).
std::string checkpoint_collectively(RankSetup& rank, int64_t steps_done, int64_t epoch_done,
                                    int64_t batch_done) {
  const Device& dev = rank.group.device();
  PhaseScope phase(dev, Phase::kCheckpoint);
  rank.optimizer->consolidate_state_dict(0);
  std::string file;
  std::exception_ptr failure;
  std::string failure_message;
  if (rank.group.rank() == 0) {
    try {
      file = write_checkpoint(rank.config, rank.run_id, dev, steps_done, epoch_done, batch_done,
                              rank.length.batches_per_epoch, *rank.model, rank.optimizer->state_tensors());
    } catch (const std::exception& e) {
      failure = std::current_exception();
      failure_message = e.what();
    }
  }
  const float own_outcome[] = {failure ? static_cast<float>(rank.group.rank() + 1) : 0.0f};
  Tensor outcome = Tensor::from_floats(own_outcome, {1}, dev, MemoryCategory::kBuffers);
  rank.group.all_reduce(outcome, {.op = ReduceOp::kMax})->wait();
  const int failed_rank = static_cast<int>(outcome.item()) - 1;
  if (failed_rank < 0) return file;
  const std::string cause = broadcast_text(rank.group, failed_rank, failure_message);
  if (failure) std::rethrow_exception(failure);
  throw Error(ErrorKind::kIo,
              fmt::format("rank {} stops: rank {} failed to write the checkpoint after step {}: {}",
                          rank.group.rank(), failed_rank, steps_done, cause));
}

}  // namespace

RankResult train_rank(ProcessGroup& group, const TrainConfig& config, const RankOptions& options) {
  DPS_CHECK(config.mode == TrainMode::kDdp, ErrorKind::kUsage, "train_rank runs --mode ddp, got --mode {}",
            name(config.mode));
  DPS_CHECK(group.size() == config.devices, ErrorKind::kUsage,
            "train_rank: the process group has {} ranks but --devices is {}", group.size(), config.devices);
  std::shared_ptr<const TensorDataset> data = options.data;
  if (!data) {
    data = load_data(config);
    const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(config.model);
    check_data_fits(config, *data, sizes.front(), sizes.back());
  }
  std::shared_ptr<const ResumeCheckpoint> resumed = options.resume_from;
  if (config.resume && !resumed)
    resumed = std::make_shared<const ResumeCheckpoint>(load_resume_checkpoint(config));
  const CheckpointState* resumed_state = resumed ? &resumed->state : nullptr;

  RankSetup rank(group, config, data, resumed_state);
  if (resumed) check_resume_fits(*resumed, rank.length);
  rank.run_id = options.run_id.empty() ? run_id_for(resumed.get()) : options.run_id;
  const Device& dev = group.device();
  const int rank_id = group.rank();
  const RunLength& length = rank.length;
  RankResult result;
  result.parameter_count = rank.model->parameter_numel();
  result.samples_per_step = std::min(config.batch, rank.sampler.num_samples()) * group.size();

  const LoopPosition start = start_position(resumed_state);
  const std::string where = fmt::format(" on rank {}", rank_id);
  int64_t step = start.steps_done;
  for (int64_t epoch = start.epoch; step < length.total_steps; ++epoch) {
    rank.loader.set_epoch(epoch);
    for (int64_t b = epoch == start.epoch ? start.batch : 0;
         b < length.batches_per_epoch && step < length.total_steps; ++b) {
      dev.set_step(step);
      const int64_t step_start_ns = dev.clock_ns(StreamKind::kCompute);
      const bool sync = (step + 1) % length.sync_every == 0 || step + 1 == length.total_steps;
      const double loss_value = run_step(rank, b, sync);
      check_loss_finite(loss_value, step, where);
      // The pitfall logs every second step, so that the others' next collective is a gradient
      // all-reduce (step 1 rebuilds the buckets with a broadcast first).
      if (sync && step % 2 == 1 && config.has_pitfall("mismatched-collective"))
        all_reduce_loss_on_rank_zero_only(group, loss_value);
      result.losses.push_back(loss_value);
      if (TraceSink* t = dev.tracer()) {
        t->loss_counter(dev, dev.clock_ns(StreamKind::kCompute), loss_value);
        if (rank_id == 0 || options.own_tracer) t->flush_soon();
      }
      if (options.on_step)
        options.on_step({.step = step,
                         .total_steps = length.total_steps,
                         .epoch = epoch,
                         .loss = loss_value,
                         .rank = rank_id,
                         .sim_step_ns = dev.clock_ns(StreamKind::kCompute) - step_start_ns});
      ++step;
      if (checkpoint_due(config, length, step)) {
        std::string file = checkpoint_collectively(rank, step, epoch, b);
        if (!file.empty()) result.last_checkpoint = std::move(file);
      }
    }
  }
  dev.set_step(-1);
  result.steps = step;
  if (rank_id == 0) save_weights(config, *rank.model);  // every rank holds the same weights
  return result;
}

}  // namespace dpscope
