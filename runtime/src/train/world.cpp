// Where a run's machine is made: check_machine() (what this machine and its launcher must provide)
// and make_world() (the devices, and the rank world of ddp), for every mode. The only place in
// train/ that probes the GPUs or reads the launcher's environment, so TrainConfig::validate()
// checks values alone.
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/env_rendezvous.hpp"
#include "dpscope/comm/gpu_backends.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/core/preset.hpp"
#include "train_common.hpp"

namespace dpscope {

bool TrainConfig::one_process_per_rank() const {
  return backend == PgBackend::kMpi ||
         (mode == TrainMode::kDdp && backend == PgBackend::kNccl && read_env_rendezvous().has_value());
}

void check_machine(const TrainConfig& config) {
  const int devices = config.devices;
  if (config.device == DeviceKind::kCuda) {
    // Cheap and decisive: a machine without a GPU (or a build without CUDA) stops here, one line.
    const std::string reason = cuda::unavailable_reason();
    DPS_CHECK(reason.empty(), ErrorKind::kUsage, "--device cuda: {}", reason);
  }
  if (config.mode == TrainMode::kDdp && config.backend == PgBackend::kNccl) {
    // NCCL runs one rank per physical GPU ("Duplicate GPU detected" otherwise): say so at once.
    if (const std::optional<EnvRendezvous> env = read_env_rendezvous()) {
      // One process per rank: this machine runs LOCAL_WORLD_SIZE of them.
      DPS_CHECK(env->world_size == devices, ErrorKind::kUsage,
                "--devices {} but the launcher started {} processes (WORLD_SIZE={}): give the same number",
                devices, env->world_size, env->world_size);
      const int gpus = cuda::physical_device_count();
      DPS_CHECK(env->local_world_size <= gpus, ErrorKind::kUsage,
                "--backend nccl: {} processes on this machine (LOCAL_WORLD_SIZE={}) need {} GPUs, it has {} "
                "(NCCL refuses two ranks on one GPU); start one process per GPU, or one process with "
                "--backend cuda --devices {} for logical GPUs on one",
                env->local_world_size, env->local_world_size, env->local_world_size, gpus,
                env->local_world_size);
    } else {
      const std::string problem = nccl_world_size_problem(devices, cuda::physical_device_count());
      DPS_CHECK(problem.empty(), ErrorKind::kUsage, "--backend {}", problem);
    }
  } else if (const std::optional<EnvRendezvous> env = read_env_rendezvous();
             config.backend == PgBackend::kMpi && env && !mpi::launch_from_environment()) {
    DPS_CHECK(env->world_size == devices, ErrorKind::kUsage,
              "--devices {} but the launcher started {} processes (WORLD_SIZE={}): give the same number",
              devices, env->world_size, env->world_size);
  } else if (env && env->world_size > 1) {
    // A launcher started several copies of this command: only nccl ranks are processes (mpi
    // ranks are mpirun's, checked by the mpi launch).
    DPS_CHECK(config.backend == PgBackend::kMpi, ErrorKind::kUsage,
              "this process is rank {} of {} (RANK and WORLD_SIZE are set, as dpscope launch and torchrun "
              "do), but --mode {}{} runs the whole run in one process: use --mode ddp --device cuda "
              "--backend nccl for one process per GPU, or start one process",
              env->rank, env->world_size, name(config.mode),
              config.mode == TrainMode::kDdp ? " --backend " + name(config.backend) : "");
  }
}

namespace detail {
namespace {

uint64_t gpu_memory_cap_bytes(const TrainConfig& config) {
  return static_cast<uint64_t>(config.gpu_mem_mb * 1024.0 * 1024.0);
}

// The ranks' world options: the preset, and --timeout for every collective's wait (0: the world's
// default, gloo's 30 min).
SimWorldOptions rank_world_options(const TrainConfig& config) {
  SimWorldOptions options{.preset = config.preset};
  if (config.timeout().count() > 0) options.timeout = config.timeout();
  return options;
}

}  // namespace

World make_world(const TrainConfig& config) {
  World world;
  if (config.timing_only) {
    // Rank 0 alone: the other ranks are timed by the analytic backend, never made.
    world.devices.push_back(Device::sim(0, find_preset(config.preset)));
    world.devices.back().set_rank(0);
    return world;
  }
  if (config.backend == PgBackend::kMpi) return world;  // the mpi backend's ranks are processes on their CPU
  if (config.mode == TrainMode::kDdp && config.backend == PgBackend::kNccl) {
    if (const std::optional<EnvRendezvous> env = read_env_rendezvous()) {
      // One process per rank: its own GPU alone, cuda:LOCAL_RANK.
      world.ranks =
          make_cuda_world(1, rank_world_options(config), gpu_memory_cap_bytes(config), env->local_rank);
      world.devices = world.ranks->devices();
      return world;
    }
  }
  if (config.mode == TrainMode::kDdp) {
    // Rank threads: simulated GPUs (sim backend), or logical cuda GPUs (cuda and nccl backends).
    world.ranks =
        config.device == DeviceKind::kCuda
            ? make_cuda_world(config.devices, rank_world_options(config), gpu_memory_cap_bytes(config))
            : SimWorld::create(config.devices, rank_world_options(config));
    world.devices = world.ranks->devices();
    return world;
  }
  // single and dp: --device cpu: the host, the run's own (it carries the trace context); --device
  // cuda: logical GPUs cuda:0 .. cuda:N-1; --device sim: sim:0 .. sim:N-1 of the preset, which must
  // hold N GPUs (the same limit DDP's network model enforces).
  if (config.device == DeviceKind::kCpu) {
    world.devices.push_back(Device::new_cpu());
    return world;
  }
  if (config.device == DeviceKind::kCuda) {
    world.devices =
        cuda::make_devices({.count = config.devices, .memory_cap_bytes = gpu_memory_cap_bytes(config)});
    for (size_t i = 0; i < world.devices.size(); ++i) world.devices[i].set_rank(static_cast<int>(i));
    return world;
  }
  const HardwarePreset preset = find_preset(config.preset);
  const int max_gpus = preset.network.max_gpus;
  DPS_CHECK(max_gpus == 0 || config.devices <= max_gpus, ErrorKind::kUsage,
            "--devices {}: preset {} ({} topology) holds {} GPUs", config.devices, preset.id, preset.topology,
            max_gpus);
  for (int i = 0; i < config.devices; ++i) {
    world.devices.push_back(Device::sim(i, preset));
    world.devices.back().set_rank(i);
  }
  return world;
}

}  // namespace detail
}  // namespace dpscope
