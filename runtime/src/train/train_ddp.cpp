// `--mode ddp`: its spec (mode.hpp: its flags, its launcher, its world, which of its runs) and
// run_ddp_training(), its rank threads: make the world (simulated GPUs, or logical cuda GPUs for
// the cuda and nccl backends), spawn one rank thread per GPU (torch.multiprocessing.spawn), and run
// train_rank() on each; then the run's summary: the loss of a step is the mean over ranks of their
// local losses. Timing-only is train_analytic.cpp's, ranks that are processes train_processes.cpp's.
//
// A rank that fails writes an `error` instant with its message into the trace before the error
// leaves its thread (spawn() then aborts the others, who write theirs), so a failed run still ends
// in a readable trace that says why (lesson 13 narrates one).
//
// What the threads can share is read once here and handed to every rank through RankOptions: the
// dataset, and the --resume checkpoint (so a bad checkpoint is one clear line, not one per rank).
#include <algorithm>
#include <exception>
#include <map>
#include <mutex>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/env_rendezvous.hpp"
#include "dpscope/comm/gpu_backends.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/train/train_rank.hpp"
#include "mode.hpp"
#include "train_common.hpp"

namespace dpscope::detail {
namespace {

// Turns the ranks' per-step reports into one report per step whose loss is the mean over ranks of
// their local losses, summed in rank order (the loss the summary, TrainResult::losses and a
// single-GPU run report), made when the last rank of that step has reported and sent to `observer`
// (if any). Called from the rank threads; a step completes only after every earlier one.
class StepMean {
 public:
  StepMean(int world_size, StepObserver observer) : world_size_(world_size), observer_(std::move(observer)) {}

  void report(const StepReport& rank_report) {
    StepReport whole = rank_report;
    {
      std::lock_guard lock(mutex_);
      Pending& pending = pending_[rank_report.step];
      pending.losses.resize(static_cast<size_t>(world_size_));
      pending.losses[static_cast<size_t>(rank_report.rank)] = rank_report.loss;
      pending.sim_step_ns = std::max(pending.sim_step_ns, rank_report.sim_step_ns);
      if (++pending.ranks < world_size_) return;
      whole.loss = 0.0;
      for (double loss : pending.losses) whole.loss += loss;
      whole.loss /= static_cast<double>(world_size_);
      whole.rank = -1;
      whole.sim_step_ns = pending.sim_step_ns;
      means_.push_back(whole.loss);
      pending_.erase(rank_report.step);
    }
    if (observer_) observer_(whole);
  }

  // Each step's mean, in step order (once every rank has ended).
  std::vector<double> take_means() { return std::move(means_); }

 private:
  struct Pending {
    std::vector<double> losses;  // [world_size]
    int ranks = 0;
    int64_t sim_step_ns = 0;
  };
  const int world_size_;
  const StepObserver observer_;
  std::mutex mutex_;
  std::map<int64_t, Pending> pending_;
  std::vector<double> means_;
};

// DDP's flags (TrainModeSpec::check_flags): its ranks run where their backend runs: sim ranks on
// simulated GPUs, cuda and nccl ranks on cuda devices, mpi ranks as processes on the CPU.
void check_ddp_flags(const TrainConfig& config) {
  const DeviceKind device = config.device;
  const PgBackend backend = config.backend;
  check_mpi_backend(config, /*ranks_on_cpu=*/device == DeviceKind::kCpu);
  DPS_CHECK(
      device != DeviceKind::kCpu || backend == PgBackend::kMpi, ErrorKind::kUsage,
      "--mode ddp runs one rank per GPU: use --device sim (simulated) or --device cuda (or --device cpu "
      "--backend mpi, one process per rank under mpirun)");
  DPS_CHECK(device != DeviceKind::kSim || backend == PgBackend::kSim, ErrorKind::kUsage,
            "--backend {} needs --device cuda (simulated GPUs communicate through --backend sim)",
            name(backend));
  DPS_CHECK(device != DeviceKind::kCuda || backend == PgBackend::kCuda || backend == PgBackend::kNccl,
            ErrorKind::kUsage, "--device cuda communicates through --backend cuda or nccl, not {}",
            name(backend));
  check_scale(config, /*timing_only_allowed=*/true);
}

// Ranks that are processes (TrainModeSpec::check_launcher): NCCL runs one rank per physical GPU
// ("Duplicate GPU detected" otherwise), so say so at once; a launcher's WORLD_SIZE is --devices.
bool check_ddp_launcher(const TrainConfig& config) {
  if (config.backend == PgBackend::kNccl) {
    if (const std::optional<EnvRendezvous> env = read_env_rendezvous()) {
      // One process per rank: this machine runs LOCAL_WORLD_SIZE of them.
      check_launcher_world_size(config, env->world_size);
      const int gpus = cuda::physical_device_count();
      DPS_CHECK(env->local_world_size <= gpus, ErrorKind::kUsage,
                "--backend nccl: {} processes on this machine (LOCAL_WORLD_SIZE={}) need {} GPUs, it has {} "
                "(NCCL refuses two ranks on one GPU); start one process per GPU, or one process with "
                "--backend cuda --devices {} for logical GPUs on one",
                env->local_world_size, env->local_world_size, env->local_world_size, gpus,
                env->local_world_size);
    } else {
      const std::string problem = nccl_world_size_problem(config.devices, cuda::physical_device_count());
      DPS_CHECK(problem.empty(), ErrorKind::kUsage, "--backend {}", problem);
    }
    return true;
  }
  if (config.backend != PgBackend::kMpi) return false;
  // mpirun's ranks are checked by the mpi launch; a launcher's by its WORLD_SIZE.
  if (const std::optional<EnvRendezvous> env = read_env_rendezvous(); env && !mpi::launch_from_environment())
    check_launcher_world_size(config, env->world_size);
  return true;
}

// The ranks' world options: the preset, and --timeout for every collective's wait (0: the world's
// default, gloo's 30 min).
SimWorldOptions rank_world_options(const TrainConfig& config) {
  SimWorldOptions options{.preset = config.preset};
  if (config.timeout().count() > 0) options.timeout = config.timeout();
  return options;
}

World make_ddp_world(const TrainConfig& config) {
  if (config.timing_only) return make_timing_only_world(config);
  World world;
  if (config.backend == PgBackend::kMpi) return world;  // the mpi backend's ranks are processes on their CPU
  const std::optional<EnvRendezvous> env =
      config.backend == PgBackend::kNccl ? read_env_rendezvous() : std::nullopt;
  if (env) {
    // One process per rank: its own GPU alone, cuda:LOCAL_RANK.
    world.ranks =
        make_cuda_world(1, rank_world_options(config), gpu_memory_cap_bytes(config), env->local_rank);
  } else {
    // Rank threads: simulated GPUs (sim backend), or logical cuda GPUs (cuda and nccl backends).
    world.ranks =
        config.device == DeviceKind::kCuda
            ? make_cuda_world(config.devices, rank_world_options(config), gpu_memory_cap_bytes(config))
            : SimWorld::create(config.devices, rank_world_options(config));
  }
  world.devices = world.ranks->devices();
  return world;
}

// Which of DDP's runs: timing-only (one rank for a world), ranks that are processes (mpi, or nccl
// under a launcher), or rank threads.
TrainResult run_ddp(const TrainConfig& config, const StepObserver& on_step) {
  if (config.timing_only) return run_analytic_training(config, on_step);
  if (config.one_process_per_rank()) return run_process_training(config, on_step);
  return run_ddp_training(config, on_step);
}

// --batch is each rank's; a rank's sampler shard may hold fewer samples than that.
std::string describe_ddp_batch(const TrainConfig& config, const TrainResult& result) {
  const int64_t per_rank = result.samples_per_step / config.devices;
  return fmt::format(
      "batch {} per rank x {} ranks = {} samples per step (global batch){}, {}, {} steps", config.batch,
      config.devices, result.samples_per_step,
      per_rank < config.batch ? fmt::format(" (a rank holds only {} samples per epoch)", per_rank) : "",
      config.timing_only ? "no data (timing-only)" : fmt::format("{} samples", result.samples), result.steps);
}

constexpr std::string_view kDdpPitfalls[] = {"no-set-epoch", "no-average", "unused-parameter",
                                             "mismatched-collective"};

}  // namespace

const TrainModeSpec kDdpMode{
    .mode = TrainMode::kDdp,
    .word = "ddp",
    .ranks = true,
    .pitfalls = kDdpPitfalls,
    .check_flags = check_ddp_flags,
    .check_launcher = check_ddp_launcher,
    .make_world = make_ddp_world,
    .run = run_ddp,
    .memory = {.batch_per_rank = true, .gradient_buckets = true},
    .describe_batch = describe_ddp_batch,
};

TrainResult run_ddp_training(const TrainConfig& config, const StepObserver& on_step) {
  StepMean step_mean(config.devices, on_step);
  RankOptions shared{.data = load_data(config),
                     .on_step = [&step_mean](const StepReport& report) { step_mean.report(report); }};
  if (config.resume)
    shared.resume_from = std::make_shared<const ResumeCheckpoint>(load_resume_checkpoint(config));
  shared.run_id = run_id_for(shared.resume_from.get());

  // The ranks' machine: simulated GPUs (sim backend), or logical cuda GPUs (cuda and nccl backends).
  const World world = make_world(config);
  const std::vector<Device>& devices = world.devices;
  // The header lists the parameters of the model every rank builds.
  std::unique_ptr<TraceRecorder> tracer = open_trace(config, devices, *make_model(config, Device::cpu()));

  std::vector<RankResult> ranks(static_cast<size_t>(config.devices));
  spawn(
      world.ranks,
      [&](ProcessGroup& group) {
        try {
          ranks[static_cast<size_t>(group.rank())] = train_rank(group, config, shared);  // one slot per rank
        } catch (const std::exception& e) {
          trace_run_error(group.device(), e.what());  // the trace says why this rank stopped
          throw;
        }
      },
      name(config.backend));

  TrainResult result = ranks.front();  // rank 0's, but the losses
  result.losses = step_mean.take_means();
  result.device_name = describe_devices(devices);
  int64_t end_ns = 0;
  for (const Device& device : devices) end_ns = std::max(end_ns, device.synchronize());
  result.sim_total_ns = end_ns;
  close_trace(tracer, result);
  return result;
}

}  // namespace dpscope::detail
