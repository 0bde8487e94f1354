// train_rank(): one rank's run of `dpscope train --mode ddp` (the training loop of every mode over
// this rank's strategy, runtime/src/train/loop.hpp) — what one process of
// `torchrun train.py` runs: DistributedDataParallel around the model, a DistributedSampler shard of
// every epoch, the optimizer (plain or ZeroRedundancyOptimizer, through one Optimizer interface),
// rank-0 checkpoints.
//
// Rank threads call it (run_training spawns one per GPU), and so does a rank that is a process
// (train_processes.cpp), with its own ProcessGroup. It needs nothing but the group and the
// configuration: with default RankOptions the rank loads the data and the --resume checkpoint
// itself. Threads of one process share what they can through RankOptions instead.
//
//   spawn(world, [&](ProcessGroup& group) { train_rank(group, config); });
//
// Per step: data (this rank's batch to its device), forward, backward (DDP all-reduces the bucket
// gradients; with --no-sync-every K, K-1 of every K backwards run under no_sync() and accumulate),
// optimizer step on the synchronized ones. The last step of a run always synchronizes, so no
// accumulated gradient is left unused.
//
// Checkpoints are written only at synchronized boundaries (steps done a multiple of K), where no
// gradient is accumulated: a run stopped and resumed follows the same path bit for bit. Rank 0
// writes; then every rank meets in an all-reduce of each rank's outcome (the barrier of PyTorch's
// recipe, carrying a status), so a failed write ends every rank with an error naming rank 0 and its cause.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpscope/comm/process_group.hpp"
#include "dpscope/data/dataset.hpp"
#include "dpscope/train/checkpoint.hpp"
#include "dpscope/train/train.hpp"

namespace dpscope {

struct RankOptions {
  // The dataset, shared by the rank threads of one process; null: the rank loads --data/--dataset.
  std::shared_ptr<const TensorDataset> data;
  // The --resume checkpoint, read once for all rank threads; null with --resume: the rank reads it.
  std::shared_ptr<const ResumeCheckpoint> resume_from;
  // The id rank 0 writes checkpoints under; empty: the resumed run's, or a new one.
  std::string run_id;
  // Called on every rank after each step with its local loss (StepReport::rank is the rank), from
  // the rank's thread.
  StepObserver on_step;
  // Whether this rank's tracer is its own (ranks that are processes, one trace file each): it is
  // then flushed by this rank after every step, so a followed run's every file grows step by step.
  // False: the rank threads share one tracer, which rank 0 flushes.
  bool own_tracer = false;
};

struct RankResult {
  int64_t steps = 0;             // steps done at the end, including those of a resumed checkpoint
  std::vector<double> losses;    // this rank's loss over its own batch, one per step this call ran
  int64_t parameter_count = 0;   // of the model (the same on every rank)
  int64_t samples_per_step = 0;  // every rank's batch together (see TrainResult::samples_per_step)
  std::string last_checkpoint;   // rank 0: the newest checkpoint written, "" when none
};

// Runs the whole training of `config` (mode ddp, validated) as rank group.rank() of group.size().
// Every rank of the group must call it with the same configuration. Throws dpscope::Error; in a
// collective that a failed peer leaves, the group's backend ends the wait with an error.
RankResult train_rank(ProcessGroup& group, const TrainConfig& config, const RankOptions& options = {});

}  // namespace dpscope
