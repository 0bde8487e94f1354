// mpi::require_mpirun_launch() (comm/mpi_backend.hpp): in every build, with or without MPI.
#include "dpscope/base/error.hpp"
#include "dpscope/comm/mpi_backend.hpp"

namespace dpscope::mpi {

Launch require_mpirun_launch(int devices, const char* command) {
  const std::optional<Launch> launch = launch_from_environment();
  DPS_CHECK(
      launch.has_value(), ErrorKind::kUsage,
      "--backend mpi: this process was not started by mpirun; run mpirun -np {} dpscope {} ... --backend mpi "
      "(or dpscope launch --nproc {} -- dpscope {} ... --backend mpi)",
      devices, command, devices, command);
  DPS_CHECK(launch->size == devices, ErrorKind::kUsage,
            "--devices {} but mpirun started {} processes (-np {}): give the same number", devices,
            launch->size, launch->size);
  return *launch;
}

}  // namespace dpscope::mpi
