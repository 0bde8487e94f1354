// A training run as `dpscope train` describes it: configuration, validation and the loop.
//
// The CLI, the examples and the lessons all run training through run_training(), so what a
// student sees in a lesson is exactly what the command does. The configuration mirrors the CLI
// flags (README's "Train on simulated GPUs", `dpscope train --help`). Before anything runs, three
// checks turn every problem into one clear ErrorKind::kUsage line: validate() the values alone,
// check_machine() what this machine and its launcher must provide (GPUs, RANK/WORLD_SIZE), and
// check_output_paths() every file the run will write, so no run is thrown away at its end.
// `--mode ddp` runs one train_rank() (train/train_rank.hpp) per rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/parallel/bucket_assignment.hpp"
#include "dpscope/train/train_kinds.hpp"

namespace dpscope {

struct TrainConfig {
  TrainMode mode = TrainMode::kSingle;  // single | dp | ddp (train/train_kinds.hpp)
  // The kind of device the model trains on: sim (simulated GPUs timed by `preset`), cpu (one host
  // device, measured time; single/dp) or cuda (real GPUs, measured time; `devices` logical GPUs
  // spread over the physical ones, core/cuda.hpp).
  DeviceKind device = DeviceKind::kSim;
  // The process-group backend the ranks of `--mode ddp` communicate through: sim (rank threads on
  // the simulated machine), cuda (our schedules on device buffers, any number of logical GPUs),
  // nccl (one rank per physical GPU), mpi (this process is one rank of `mpirun -np N`, on the CPU:
  // --device cpu). Unused by single/dp.
  PgBackend backend = PgBackend::kSim;
  int devices = 1;
  std::string preset = "h100-sxm";
  double gpu_mem_mb = 0.0;  // --device cuda: each logical GPU's memory cap in MiB (0: an even split)

  std::string model = "784-512-10";  // MLP layer sizes; ReLU between Linear layers
  std::string loss = "ce";           // ce | mse
  std::string optim = "sgd";         // sgd | adam | adamw
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;

  int64_t batch = 64;   // single/dp: the whole mini-batch; ddp: per rank
  std::string data;     // "x.npy,y.npy"
  std::string dataset;  // "spirals:2000" (used when data is empty)
  bool shuffle = true;
  uint64_t seed = 0;    // the CLI refuses a negative --seed instead of wrapping it
  int64_t steps = -1;   // -1: use epochs
  int64_t epochs = -1;  // -1 with steps -1: one epoch

  std::string init;   // safetensors to start from
  std::string save;   // safetensors to write at the end
  std::string trace;  // JSON Lines trace to write
  // Compress traces with zstd: ranks that are processes write DIR/rank-K.jsonl.zst; one trace
  // file must then be named *.zst (its name says how it is written and read).
  bool trace_zstd = false;
  // Sampled tracing: kernels and copies traced on one step in K, one span per phase on the others
  // (Device::set_trace_kernels_every; docs/gpu.md says what it costs on a GPU).
  int64_t trace_kernels_every = 1;

  std::string checkpoint_dir;    // where checkpoints go ("" = none)
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0 = once per epoch (and at the end)
  bool resume = false;           // continue from the newest checkpoint in checkpoint_dir

  // DistributedDataParallel (--mode ddp)
  double bucket_cap_mb = kDefaultBucketCapMb;      // --bucket-mb: DDP's bucket_cap_mb
  double first_bucket_mb = kDefaultFirstBucketMb;  // the first (rebuilt) bucket's limit
  int64_t no_sync_every = 1;  // synchronize (and step) every K-th backward; K-1 run under no_sync()
  bool find_unused_parameters = false;
  bool zero = false;                    // ZeroRedundancyOptimizer around the optimizer
  std::string comm_hook = "allreduce";  // allreduce | fp16
  std::string algo = "auto";            // all-reduce algorithm: auto | ring | tree | naive
  // --timeout: how long a collective, and the rendezvous of processes, may wait for the other
  // ranks before failing (PyTorch's init_process_group(timeout=...)); 0: the defaults (collectives
  // 30 min as gloo's, the store 300 s).
  double timeout_s = 0.0;
  std::chrono::milliseconds timeout() const;  // timeout_s in ms; 0: the defaults

  // --timing-only: DDP on shapes without data, for GPU counts far beyond this machine (up to
  // 65,536 simulated GPUs, in nodes of the preset's [cluster]). One rank runs the real DDP, model
  // and optimizer code on Tensor::meta tensors; its collectives are timed by AnalyticCollectives
  // (comm/analytic_collectives.hpp) for the whole world instead of meeting peer threads
  // (train_analytic.cpp). No data, no loss values, no checkpoints.
  bool timing_only = false;

  // Pitfalls a lesson can switch on: "no-set-epoch" (the sampler/loader repeats epoch 0's order),
  // "no-average" (DDP sums gradients instead of averaging), "unused-parameter" (the model owns a
  // layer its forward never uses: without --find-unused-parameters the next iteration fails with
  // PyTorch's "Expected to have finished reduction in the prior iteration ..."),
  // "mismatched-collective" (ddp: rank 0 alone all-reduces its loss every second step; every rank
  // fails with the process group's "Detected mismatch between collectives on ranks" naming both),
  // "input-on-cpu" (single on a GPU: the run's last step forgets `x.to(device)`, and the first
  // Linear stops with PyTorch's "Expected all tensors to be on the same device, ..."; the steps
  // before it show the right loop, and the trace ends with an `error` event).
  std::vector<std::string> pitfalls;
  bool has_pitfall(const std::string& name) const;

  // Whether each rank is a process of its own: --backend mpi (under mpirun), or --mode ddp
  // --backend nccl in a process a launcher started with RANK and WORLD_SIZE set (dpscope launch,
  // torchrun; comm/env_rendezvous.hpp). --trace then names a directory of rank-K.jsonl files.
  // Reads the environment; throws kUsage on malformed launcher variables.
  bool one_process_per_rank() const;

  // Throws Error(kUsage) naming the flag and the reason. Checks values only: no file access, no
  // GPU probe, no environment (check_machine() does those).
  void validate() const;
  // The configuration as a JSON object (the trace header's "run").
  std::string to_json() const;
};

// Throws Error(kUsage) when this machine cannot make the world a validated `config` asks for:
// --device cuda without a usable GPU (or in a build without CUDA), --backend nccl with more ranks
// on this machine than physical GPUs, or a launcher's RANK/WORLD_SIZE that disagree with --devices
// or with a mode that runs in one process. Probes the GPUs and reads the environment
// (train/world.cpp, where the run's devices are made).
void check_machine(const TrainConfig& config);

// Throws Error(kUsage) unless every output of `config` can be written and overwrites no input:
// --save and --trace name files in existing, writable directories and are not directories;
// --checkpoint-dir is (or can be created as) a writable directory; no output is the same file as
// --data's files or --init, and --trace is not --save. Run before any work starts.
void check_output_paths(const TrainConfig& config);

struct StepReport {
  int64_t step = 0;  // 0-based (progress lines print step + 1, as the error messages do)
  int64_t total_steps = 0;
  int64_t epoch = 0;
  // The step's loss: over the whole mini-batch (single/dp), the mean over ranks of their local
  // losses (run_training in ddp, as TrainResult::losses and the trace's global loss), or one
  // rank's own loss (train_rank's reports, where `rank` says whose).
  double loss = 0.0;
  int rank = -1;            // -1: the whole run; else the rank whose local loss this is
  int64_t sim_step_ns = 0;  // simulated duration of this step (0 on cpu)
};

struct TrainResult {
  int64_t steps = 0;
  std::vector<double> losses;  // one per step; in ddp the mean over ranks of their local losses
  double wall_seconds = 0.0;
  int64_t sim_total_ns = 0;  // simulated time of the whole run (0 on cpu)
  std::string trace_path;    // "" when no trace was written
  uint64_t trace_events = 0;
  std::string device_name;  // "sim:0 (NVIDIA H100 SXM5 80GB)"
  int64_t parameter_count = 0;
  int64_t samples = 0;  // dataset rows
  // Samples one full step reads: single/dp min(--batch, rows); ddp the ranks' batches together,
  // each at most what a rank holds per epoch (so never more than the data, never overflowing).
  int64_t samples_per_step = 0;
  int64_t resumed_from_step = -1;  // steps done by the checkpoint resumed from, -1 when not resumed
  std::string last_checkpoint;     // the newest checkpoint written, "" when none
  // --backend mpi: this process's rank (rank 0 prints the run's summary; the others print nothing).
  int process_rank = 0;
  // --timing-only: the world simulated and the scaling it reaches (weak scaling: each GPU keeps its
  // batch, so the ideal step takes as long as on one GPU).
  struct Scaling {
    std::string world;    // "1024 GPUs: 128 nodes x 8 GPUs: nvswitch, ...; ib-ndr 40 GB/s per GPU, 2.0 us"
    int64_t step_ns = 0;  // the last step on the whole world
    int64_t one_gpu_step_ns = 0;  // the same step on one GPU (no gradient exchange)
    int64_t exposed_comm_ns = 0;  // step_ns - one_gpu_step_ns: communication backward did not hide
    double efficiency = 0.0;      // one_gpu_step_ns / step_ns
  };
  std::optional<Scaling> scaling;
};

using StepObserver = std::function<void(const StepReport&)>;

// Throws Error(kUsage) naming the first flag whose value differs between the run that wrote a
// checkpoint (its config JSON) and `current` (only --steps, --epochs and --init may differ).
void check_resumable(const std::string& checkpoint_config, const TrainConfig& current,
                     const std::string& file);

// What `dpscope train` says of a mode, from its spec (runtime/src/train/mode.hpp): whether it runs
// ranks with a process group (it takes --backend, and its loss is the mean over ranks),
bool runs_ranks(TrainMode mode);
// and its summary's line of the batch: "batch 64 (the whole mini-batch), 2000 samples, 10 steps".
std::string describe_batch(const TrainConfig& config, const TrainResult& result);

// Runs the whole training described by `config` (validated first, outputs checked). `on_step` is
// called after each step (in ddp, on rank 0's thread). Throws dpscope::Error with a clear message on
// bad input (files, shapes, unsupported mode).
TrainResult run_training(const TrainConfig& config, const StepObserver& on_step = {});

}  // namespace dpscope
