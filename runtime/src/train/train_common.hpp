// Pieces every training mode shares (the world, data, model, optimizer, loss, trace header, run
// length, checkpoints); private to runtime/src/train. The training loop
// (loop.hpp) and each mode's strategy use them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/comm/env_rendezvous.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/data/dataset.hpp"
#include "dpscope/io/checkpoint.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/optim/optimizer.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/train/train.hpp"

namespace dpscope::detail {

// The machine a run trains on (train/world.cpp), made in one place for every mode.
struct World {
  // single/dp: the devices the model runs on; ddp: one GPU per rank of this process (all of them
  // on rank threads, its own as a process of nccl); --timing-only: rank 0's GPU. Empty for mpi
  // ranks, whose backend runs each on its CPU.
  std::vector<Device> devices;
  // ddp: the world the ranks' process groups run on (spawn() for rank threads, init_process_group
  // for a process of nccl); null otherwise.
  std::shared_ptr<SimWorld> ranks;
};
// Makes the world of a validated `config` on a machine check_machine() accepted: the mode's own
// (TrainModeSpec::make_world, mode.hpp). Throws kUsage when the preset holds fewer GPUs than
// --devices (single/dp on sim), kDevice when a GPU cannot be used.
World make_world(const TrainConfig& config);
// --timing-only's world (train_analytic.cpp): rank 0's GPU alone, in a world of one device that the
// analytic backend times the whole world's collectives from.
World make_timing_only_world(const TrainConfig& config);
// --gpu-mem in bytes: each cuda device's memory cap (0: an even split).
uint64_t gpu_memory_cap_bytes(const TrainConfig& config);

// Loads --data or --dataset and checks that the data fits the model and the loss, and that the run
// fits the devices' and this machine's memory (check_training_memory, train/memory_estimate.hpp);
// every mismatch is one kUsage line. Called before the model is built.
std::shared_ptr<TensorDataset> load_data(const TrainConfig& config);
// Loads --init into `model`; a mismatch is one kUsage line naming the file and the model.
void load_initial_weights(const TrainConfig& config, Module& model);
std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& config, std::vector<Parameter*> params);
std::unique_ptr<Loss> make_loss(const TrainConfig& config);
// Opens --trace (nullptr when not tracing) with every device and the model's parameters in the header.
// `cluster`: the modelled cluster of a timing-only world that spans nodes (the header's "cluster").
std::unique_ptr<TraceRecorder> open_trace(const TrainConfig& config, const std::vector<Device>& devices,
                                          const Module& model,
                                          const std::optional<TraceClusterInfo>& cluster = std::nullopt);
// The same at `path` with the header's "run" object `run_json` (mpi ranks: one file per rank, the
// run object carrying the rank's "process" entry).
// Its devices trace kernels on one step in `kernels_every` (--trace-kernels-every).
std::unique_ptr<TraceRecorder> open_trace_at(const std::filesystem::path& path, std::string run_json,
                                             const std::vector<Device>& devices, const Module& model,
                                             int64_t kernels_every,
                                             const std::optional<TraceClusterInfo>& cluster = std::nullopt);
// "sim:0..sim:3 (4 x NVIDIA H100 SXM5 80GB)".
std::string describe_devices(const std::vector<Device>& devices);
// DistributedDataParallel's options from the --bucket-mb, --first-bucket-mb, --find-unused-parameters,
// --comm-hook, --algo flags and the no-average pitfall.
DdpOptions ddp_options(const TrainConfig& config);
// The model --model describes, on `device` (with --pitfall unused-parameter: plus an unused layer).
std::unique_ptr<Module> make_model(const TrainConfig& config, const Device& device);

// How long a run is and when it checkpoints.
struct RunLength {
  int64_t batches_per_epoch = 0;
  int64_t total_steps = 0;       // --steps, or --epochs (default 1) x batches_per_epoch
  int64_t checkpoint_every = 0;  // --checkpoint-every, or one epoch
  int64_t sync_every = 1;        // --no-sync-every in ddp; 1 otherwise
};
// Throws kUsage when --epochs x batches per epoch does not fit in 64 bits.
RunLength plan_run(const TrainConfig& config, int64_t batches_per_epoch);

// --resume: the newest checkpoint in --checkpoint-dir that verifies, checked against `config`. A
// damaged newer checkpoint is skipped with one warning line on stderr naming both files.
ResumeCheckpoint load_resume_checkpoint(const TrainConfig& config);
// Refuses (kUsage) a resumed position this run cannot continue from (more steps done than the run
// has, or an epoch and batch that do not add up with this run's batches per epoch).
void check_resume_fits(const ResumeCheckpoint& resumed, const RunLength& length);
// The run id checkpoints are written under: the resumed run's, or a new one for a fresh run.
std::string run_id_for(const ResumeCheckpoint* resumed);
struct CheckpointSpot;  // loop.hpp
// Writes the checkpoint at `spot` and traces `checkpoint_saved` on `device`; returns the file.
std::string write_checkpoint(const TrainConfig& config, const CheckpointSpot& spot, const Device& device,
                             const Module& model, StateDict optimizer_state);
// --save: the model's weights with plain nn.Sequential names, so PyTorch loads them directly.
void save_weights(const TrainConfig& config, const Module& model);
// Writes an `error` instant (docs/trace-format.md) on `device` at its compute clock, when it is
// traced: the rank stopped with `message`. Called where a failing rank's exception passes, before
// the trace is closed, so the trace of a failed run says why and where it ended.
void trace_run_error(const Device& device, std::string_view message);
// Closes the trace (if any) and fills the result's trace fields.
void close_trace(std::unique_ptr<TraceRecorder>& tracer, TrainResult& result);

// The runs of --mode ddp, which its spec's run picks from (`config` validated; each file's comment
// says more): rank threads (train_ddp.cpp), rank 0 standing for a whole --timing-only world
// (train_analytic.cpp), and this process as one rank of mpirun or dpscope launch (train_processes.cpp).
TrainResult run_ddp_training(const TrainConfig& config, const StepObserver& on_step);
TrainResult run_analytic_training(const TrainConfig& config, const StepObserver& on_step);
TrainResult run_process_training(const TrainConfig& config, const StepObserver& on_step);

}  // namespace dpscope::detail
