// run_ddp_training(): `dpscope train --mode ddp` — one rank thread per simulated GPU, like
// torch.multiprocessing.spawn + DistributedDataParallel + DistributedSampler in every process.
//
// Each rank: builds the model on sim:rank, wraps it in DDP (which broadcasts rank 0's weights),
// reads its own shard of every epoch through a DistributedSampler (set_epoch(e) each epoch) with
// --batch samples per step, and steps its optimizer on the averaged gradients. With
// --no-sync-every K, K-1 of every K backwards run under no_sync() and only the K-th synchronizes
// and steps. Rank 0 writes checkpoints, then every rank meets at a barrier.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/io/safetensors.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/parallel/zero_redundancy_optimizer.hpp"
#include "dpscope/train/checkpoint.hpp"
#include "train_common.hpp"

namespace dpscope::detail {
namespace {

DdpOptions ddp_options(const TrainConfig& c) {
  DdpOptions o;
  o.bucket_cap_mb = c.bucket_mb;
  o.first_bucket_mb = c.first_bucket_mb;
  o.find_unused_parameters = c.find_unused_parameters;
  o.comm_hook = c.comm_hook == "fp16" ? CommHook::kFp16Compress : CommHook::kAllreduce;
  o.average_gradients = !c.has_pitfall("no-average");
  o.algorithm = parse_algorithm(c.algo, "--algo");
  return o;
}

struct Position {
  int64_t steps_done = 0;
  int64_t epoch = 0;
  int64_t batch = 0;
};

}  // namespace

TrainResult run_ddp_training(const TrainConfig& c, const StepObserver& on_step) {
  const auto wall_start = std::chrono::steady_clock::now();
  const std::shared_ptr<TensorDataset> data = load_data(c);
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(c.model);
  check_data_fits(c, *data, sizes.front(), sizes.back());

  const std::shared_ptr<SimWorld> world = SimWorld::create(c.devices, {.preset = c.preset});
  const std::vector<Device>& devices = world->devices();
  std::unique_ptr<TraceRecorder> tracer;
  {
    // The header lists the parameters of the model every rank builds.
    const std::unique_ptr<Module> shape_model = make_model(c, Device::cpu());
    tracer = open_trace(c, devices, *shape_model);
  }
  const int64_t per_rank =
      DistributedSampler(data->size(), {.num_replicas = c.devices, .rank = 0}).num_samples();
  const int64_t per_epoch = (per_rank + c.batch - 1) / c.batch;
  const int64_t total_steps = c.steps > 0 ? c.steps : per_epoch * std::max<int64_t>(c.epochs, 1);
  const int64_t checkpoint_every = c.checkpoint_every > 0 ? c.checkpoint_every : per_epoch;

  Position start;
  std::optional<CheckpointState> resumed;
  if (c.resume) {
    resumed = load_resume_checkpoint(c);
    start = {resumed->steps_done, resumed->epoch, resumed->batch_in_epoch};
  }

  TrainResult result;
  result.device_name = describe_devices(devices);
  result.samples = data->size();
  result.resumed_from_step = resumed ? start.steps_done : -1;
  std::vector<std::vector<double>> losses(static_cast<size_t>(c.devices));
  std::mutex result_mutex;

  spawn(world, [&](ProcessGroup& pg) {
    const Device& dev = pg.device();
    const int rank = pg.rank();
    std::unique_ptr<Module> model = make_model(c, dev);
    if (!c.init.empty()) load_initial_weights(c, *model);
    if (resumed) model->load_state_dict(resumed->model);
    DistributedDataParallel ddp(*model, pg, ddp_options(c));
    // The optimizer: plain (every rank keeps all state) or ZeRO-1 (each rank keeps its shard's).
    std::unique_ptr<Optimizer> optimizer;
    std::unique_ptr<ZeroRedundancyOptimizer> zero;
    if (c.zero) {
      zero = std::make_unique<ZeroRedundancyOptimizer>(
          model->parameters(), pg,
          [&](std::vector<Parameter*> shard) { return make_optimizer(c, std::move(shard)); });
      if (resumed) zero->load_state_dict(resumed->optimizer);
    } else {
      optimizer = make_optimizer(c, model->parameters());
      if (resumed) optimizer->load_state_tensors(resumed->optimizer);
    }
    std::unique_ptr<Loss> criterion = make_loss(c);
    if (rank == 0) {
      std::lock_guard lock(result_mutex);
      result.parameter_count = model->parameter_numel();
    }

    DistributedSampler sampler(
        data->size(),
        {.num_replicas = c.devices, .rank = rank, .shuffle = c.shuffle, .seed = c.seed, .drop_last = false});
    const bool set_epoch = !c.has_pitfall("no-set-epoch");
    DataLoader loader(data, {.batch_size = c.batch, .sampler = [&](int64_t epoch) {
                               sampler.set_epoch(set_epoch ? epoch : 0);
                               return sampler.indices();
                             }});
    const bool mse_flat_targets = c.loss == "mse" && data->target_sample_shape().empty();
    auto save = [&](int64_t steps_done, int64_t epoch_done, int64_t batch_done) {
      PhaseScope phase(dev, Phase::kCheckpoint);
      if (zero) zero->consolidate_state_dict(0);  // collective: the shards' state gathers on rank 0
      if (rank == 0) {
        const std::string file =
            write_checkpoint(c, dev, steps_done, epoch_done, batch_done, per_epoch, *model,
                             zero ? zero->state_dict() : optimizer->state_tensors());
        std::lock_guard lock(result_mutex);
        result.last_checkpoint = file;
      }
      pg.barrier()->wait();  // nobody runs ahead of (or reads) a half-written checkpoint
    };

    int64_t step = start.steps_done;
    for (int64_t epoch = start.epoch; step < total_steps; ++epoch) {
      loader.set_epoch(epoch);
      for (int64_t b = epoch == start.epoch ? start.batch : 0; b < loader.num_batches() && step < total_steps;
           ++b) {
        dev.set_step(step);
        const int64_t step_start_ns = dev.clock_ns(StreamKind::kCompute);
        const bool sync = (step + 1) % c.no_sync_every == 0 || step + 1 == total_steps;
        Tensor x, y;
        {
          PhaseScope phase(dev, Phase::kData);
          const Batch batch = loader.batch(b);
          if (TraceSink* t = dev.tracer()) t->samples(dev, dev.clock_ns(StreamKind::kCompute), batch.indices);
          x = batch.inputs.to(dev, MemoryCategory::kActivations);
          y = batch.targets.to(dev, MemoryCategory::kActivations);
          if (mse_flat_targets) y = y.reshape({y.numel(), 1});
        }
        double loss_value = 0.0;
        {
          std::optional<DistributedDataParallel::NoSync> no_sync;
          if (!sync) no_sync.emplace(ddp);
          {
            PhaseScope phase(dev, Phase::kForward);
            loss_value = criterion->forward(ddp.forward(x), y).item();
            dev.trace_memory();
          }
          {
            PhaseScope phase(dev, Phase::kBackward);
            ddp.backward(criterion->backward());
            dev.trace_memory();
          }
        }
        if (sync) {
          PhaseScope phase(dev, Phase::kOptimizer);
          if (zero) {
            zero->step();  // local shard update, then each owner broadcasts its parameters
            zero->zero_grad();
          } else {
            optimizer->step();
            optimizer->zero_grad();
          }
          dev.trace_memory();
        }
        DPS_CHECK(std::isfinite(loss_value), ErrorKind::kInvalidArgument,
                  "loss became {} at step {} on rank {} (try a smaller --lr)", loss_value, step, rank);
        losses[static_cast<size_t>(rank)].push_back(loss_value);
        if (TraceSink* t = dev.tracer()) {
          t->loss_counter(dev, dev.clock_ns(StreamKind::kCompute), loss_value);
          if (rank == 0) t->flush();
        }
        if (rank == 0 && on_step)
          on_step({.step = step,
                   .total_steps = total_steps,
                   .epoch = epoch,
                   .loss = loss_value,
                   .sim_step_ns = dev.clock_ns(StreamKind::kCompute) - step_start_ns});
        ++step;
        if (!c.checkpoint_dir.empty() && (step % checkpoint_every == 0 || step == total_steps))
          save(step, epoch, b);
      }
    }
    dev.set_step(-1);
    if (rank == 0) save_weights(c, *model);  // every rank holds the same weights
  });

  // The reported loss of a step is the mean over ranks (each rank's loss is over its own batch).
  result.steps = static_cast<int64_t>(losses[0].size()) + std::max<int64_t>(start.steps_done, 0);
  for (size_t s = 0; s < losses[0].size(); ++s) {
    double sum = 0.0;
    for (const auto& rank_losses : losses) sum += rank_losses[s];
    result.losses.push_back(sum / static_cast<double>(losses.size()));
  }
  int64_t end_ns = 0;
  for (const Device& d : devices) end_ns = std::max(end_ns, d.synchronize());
  result.sim_total_ns = end_ns;
  finish_run(tracer, wall_start, result);
  return result;
}

}  // namespace dpscope::detail
