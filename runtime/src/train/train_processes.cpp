// Training as one process of a multi-process run (run_process_training): this process is one rank
// (torchrun's one process per rank), started by one of two launchers:
//   - `mpirun -np N dpscope train --mode ddp --device cpu --backend mpi`, the
//     rank from OpenMPI's environment, the `mpi` process group;
//   - `dpscope launch --nproc N -- dpscope train --mode ddp ...` (or torchrun),
//     the rank from RANK/WORLD_SIZE/LOCAL_RANK (env://): the ranks meet in a TCPStore at
//     MASTER_ADDR:MASTER_PORT; with --device cuda --backend nccl rank 0's ncclUniqueId travels
//     through it and each process trains on its own GPU, cuda:LOCAL_RANK; with --device cpu
//     --backend mpi the processes join one MPI world as singletons (comm/mpi/mpi_singletons.hpp).
// Both then run train_rank() like a rank thread does, after checking that every rank runs the same
// configuration, including every flag that changes which collectives run (agree_on_settings: a
// mismatch names the flag and both values), and inside run_as_rank(): an error on one rank aborts
// the group, so its peers fail at once naming it (comm/rank_agreement.hpp). --timeout bounds every
// wait: the store, the rendezvous and each collective. Every rank loads the data itself.
// After each step the ranks average their local losses (a one-float all-reduce), so rank 0
// reports the same loss a simulated DDP run reports; rank 0 also writes --save and the checkpoints.
//
// --trace DIR: each rank writes DIR/rank-K.jsonl on its own clock. Before training every rank
// measures its clock against rank 0's (comm/clock_offset.hpp); each rank's header records it in the
// run object's "process" entry, and `dpscope trace merge DIR OUT` puts the ranks on rank 0's clock.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/clock_offset.hpp"
#include "dpscope/comm/env_rendezvous.hpp"
#include "dpscope/comm/gpu_backends.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/rank_agreement.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"
#include "dpscope/train/train_rank.hpp"
#include "train_common.hpp"

namespace dpscope::detail {
namespace {

// The run object of rank K's trace: the configuration plus where the rank stands and its clock.
std::string rank_run_json(const TrainConfig& config, int rank, int world_size, ClockOffset clock) {
  nlohmann::ordered_json run = nlohmann::ordered_json::parse(config.to_json());
  run["process"] = {{"rank", rank},
                    {"world_size", world_size},
                    {"clock_offset_ns", clock.offset_ns},
                    {"clock_uncertainty_ns", clock.uncertainty_ns}};
  return run.dump();
}

// This process's rank of a multi-process run, however it was launched.
struct ProcessRank {
  std::shared_ptr<ProcessGroup> group;
  std::string device_name;  // TrainResult::device_name
};

// The flags every rank must share (comm/rank_agreement.hpp): the run object (TrainConfig::to_json,
// whose keys are the flags' names with '_' for '-'), and the flags that decide which collectives
// run without changing the numbers: --trace (clock ping-pongs with rank 0), --checkpoint-dir,
// --checkpoint-every and --resume (checkpoints are collective), --save, --timeout, and $DPSCOPE_ALGO.
std::vector<RunSetting> collective_settings(const TrainConfig& config) {
  std::vector<RunSetting> settings;
  const nlohmann::ordered_json run = nlohmann::ordered_json::parse(config.to_json());
  for (const auto& [key, value] : run.items()) {
    std::string flag = "--" + (key == "pitfalls" ? std::string("pitfall") : key);
    std::replace(flag.begin(), flag.end(), '_', '-');
    settings.push_back({flag, value.dump()});
  }
  auto text = [](const std::string& s) { return s.empty() ? std::string() : nlohmann::json(s).dump(); };
  settings.push_back({"--trace", text(config.trace)});
  settings.push_back({"--trace-zstd", config.trace_zstd ? "true" : ""});
  settings.push_back({"--checkpoint-dir", text(config.checkpoint_dir)});
  settings.push_back(
      {"--checkpoint-every", config.checkpoint_every > 0 ? std::to_string(config.checkpoint_every) : ""});
  settings.push_back({"--resume", config.resume ? "true" : ""});
  settings.push_back({"--save", text(config.save)});
  settings.push_back({"--timeout", config.timeout_s > 0 ? fmt::format("{}", config.timeout_s) : ""});
  // The group's default algorithm (read by every backend at init) decides which schedules run.
  const char* algo = std::getenv("DPSCOPE_ALGO");
  settings.push_back({"DPSCOPE_ALGO", algo != nullptr && *algo != '\0' ? nlohmann::json(algo).dump() : ""});
  return settings;
}

TrainResult train_as_process(const TrainConfig& config, const ProcessRank& process,
                             const StepObserver& on_step) {
  ProcessGroup& group = *process.group;
  TrainResult result;
  std::vector<double> mean_losses;  // the run's: each step's mean over ranks
  std::unique_ptr<TraceRecorder> tracer;
  // Every rank learns of a difference at once (no rank needs telling, so no notice goes to a peer
  // that may have left already); after it, an error on this rank aborts the group, so that no peer
  // waits for it (comm/rank_agreement.hpp).
  agree_on_settings(group, collective_settings(config));
  run_as_rank(group, [&] {
    RankOptions options;
    options.own_tracer = true;  // one trace file per process
    options.data = load_data(config);
    if (!config.trace.empty()) {
      const ClockOffset clock = measure_clock_offset(group);
      std::filesystem::create_directories(config.trace);
      const std::string file = trace::rank_file_name(group.rank()) + (config.trace_zstd ? ".zst" : "");
      tracer = open_trace_at(std::filesystem::path(config.trace) / file,
                             rank_run_json(config, group.rank(), group.size(), clock), {group.device()},
                             *make_model(config, Device::cpu()), config.trace_kernels_every);
    }
    options.on_step = [&](const StepReport& report) {
      Tensor loss = Tensor::from_floats(std::vector<float>{static_cast<float>(report.loss)}, {1},
                                        group.device(), MemoryCategory::kBuffers);
      group.all_reduce(loss, {.op = ReduceOp::kAvg})->wait();  // every rank, every step: the same order
      StepReport whole = report;
      whole.loss = loss.item();
      whole.rank = -1;
      mean_losses.push_back(whole.loss);
      if (on_step && group.rank() == 0) on_step(whole);
    };
    result = train_rank(group, config, options);
  });
  result.losses = std::move(mean_losses);
  result.process_rank = group.rank();
  result.device_name = process.device_name;
  close_trace(tracer, result);
  return result;
}

}  // namespace

TrainResult run_process_training(const TrainConfig& config, const StepObserver& on_step) {
  ProcessRank process;
  // mpi under mpirun: the rank from OpenMPI's environment. Otherwise a launcher's RANK/WORLD_SIZE
  // (dpscope launch or torchrun): mpi singletons, or nccl ranks, joined through env://.
  const std::optional<EnvRendezvous> env = config.backend == PgBackend::kMpi && mpi::launch_from_environment()
                                               ? std::nullopt
                                               : read_env_rendezvous();
  if (!env) {
    const mpi::Launch launch = mpi::require_mpirun_launch(config.devices, "train");
    process.group = init_process_group(
        {.backend = "mpi", .rank = launch.rank, .world_size = launch.size, .timeout = config.timeout()});
    process.device_name = fmt::format("{} processes on the CPU (rank {} of {}, mpi)", launch.size,
                                      process.group->rank(), launch.size);
    return train_as_process(config, process, on_step);
  }
  DPS_ASSERT(config.backend == PgBackend::kNccl || config.backend == PgBackend::kMpi,
             "env:// training on --backend {}", name(config.backend));
  // The store outlives the group: rank 0 hosts it, and peers may still read from it while it ends.
  // --timeout bounds the store's waits and the rendezvous as well as the collectives. nccl's rank
  // trains on its own GPU, cuda:LOCAL_RANK (make_world reads the same environment as `env`).
  const std::shared_ptr<Store> store =
      config.timeout().count() > 0 ? env_store(*env, config.timeout()) : env_store(*env);
  process.group = init_process_group({.backend = name(config.backend),
                                      .store = store,
                                      .rank = env->rank,
                                      .world_size = env->world_size,
                                      .timeout = config.timeout(),
                                      .world = make_world(config).ranks});
  const Device& device = process.group->device();
  process.device_name =
      config.backend == PgBackend::kMpi
          ? fmt::format("{} processes on the CPU (rank {} of {}, mpi, started by a launcher)",
                        env->world_size, env->rank, env->world_size)
          : fmt::format("{} ({}), rank {} of {} processes (nccl)", device.name(),
                        cuda::physical_name(device.impl()), env->rank, env->world_size);
  return train_as_process(config, process, on_step);
}

}  // namespace dpscope::detail
