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
// With --no-sync-every K, K-1 of every K backwards run under no_sync() and accumulate; the optimizer
// steps on the synchronized ones (the run's last among them), and checkpoints come only there, so a
// run stopped and resumed follows the same path bit for bit. Rank 0 writes them; a failed write ends
// every rank with an error naming rank 0 and its cause.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpscope/comm/process_group.hpp"
#include "dpscope/data/dataset.hpp"
#include "dpscope/io/checkpoint.hpp"
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

// A rank's part of the run's result: steps, parameter_count, samples, samples_per_step (every
// rank's batch together) and resumed_from_step as the run's, but `losses` this rank's own, over its
// batch, one per step this call ran, and last_checkpoint rank 0's alone.
using RankResult = TrainResult;

// Runs the whole training of `config` (mode ddp, validated) as rank group.rank() of group.size().
// Every rank of the group must call it with the same configuration. Throws dpscope::Error; in a
// collective that a failed peer leaves, the group's backend ends the wait with an error.
RankResult train_rank(ProcessGroup& group, const TrainConfig& config, const RankOptions& options = {});

}  // namespace dpscope
