// Where a run's machine is checked and made, for every mode: check_machine() (what this machine and
// its launcher must provide) and make_world() (the devices, and the rank world of ddp), each with
// the mode's own part from its TrainModeSpec (mode.hpp). With those parts (the modes' make_world and
// check_launcher), the only code in train/ that probes the GPUs or reads the launcher's environment,
// so TrainConfig::validate() checks values alone.
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/env_rendezvous.hpp"
#include "dpscope/core/cuda.hpp"
#include "mode.hpp"
#include "train_common.hpp"

namespace dpscope {

bool TrainConfig::one_process_per_rank() const {
  return backend == PgBackend::kMpi ||
         (detail::mode_spec(mode).ranks && backend == PgBackend::kNccl && read_env_rendezvous().has_value());
}

void check_machine(const TrainConfig& config) {
  if (config.device == DeviceKind::kCuda) {
    // Cheap and decisive: a machine without a GPU (or a build without CUDA) stops here, one line.
    const std::string reason = cuda::unavailable_reason();
    DPS_CHECK(reason.empty(), ErrorKind::kUsage, "--device cuda: {}", reason);
  }
  const detail::TrainModeSpec& spec = detail::mode_spec(config.mode);
  if (spec.check_launcher && spec.check_launcher(config)) return;
  if (const std::optional<EnvRendezvous> env = read_env_rendezvous(); env && env->world_size > 1) {
    // A launcher started several copies of this command: only nccl ranks are processes (mpi
    // ranks are mpirun's, checked by the mpi launch).
    DPS_CHECK(config.backend == PgBackend::kMpi, ErrorKind::kUsage,
              "this process is rank {} of {} (RANK and WORLD_SIZE are set, as dpscope launch and torchrun "
              "do), but --mode {}{} runs the whole run in one process: use --mode ddp --device cuda "
              "--backend nccl for one process per GPU, or start one process",
              env->rank, env->world_size, name(config.mode),
              spec.ranks ? " --backend " + name(config.backend) : "");
  }
}

namespace detail {

void check_launcher_world_size(const TrainConfig& config, int world_size) {
  DPS_CHECK(world_size == config.devices, ErrorKind::kUsage,
            "--devices {} but the launcher started {} processes (WORLD_SIZE={}): give the same number",
            config.devices, world_size, world_size);
}

World make_world(const TrainConfig& config) { return mode_spec(config.mode).make_world(config); }

}  // namespace detail
}  // namespace dpscope
