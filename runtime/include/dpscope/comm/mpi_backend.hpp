// The `mpi` process-group backend: one rank per process, started by `mpirun -np N`, on the cpu
// device, communicating through MPI (OpenMPI from Debian). docs/processes.md shows how to run it.
//
//   // mpirun -np 4 ./prog
//   const mpi::Launch me = mpi::initialize();            // optional: the backend does it at first use
//   auto pg = init_process_group({.backend = "mpi", .rank = me.rank, .world_size = me.size});
//   Tensor g = Tensor::full({1024}, pg->rank() + 1.0f, pg->device());
//   pg->all_reduce(g, {.op = ReduceOp::kAvg})->wait();   // 2.5 everywhere
//
// Ranks and sizes. InitOptions.rank must be this process's MPI rank. world_size may be MPI's size,
// or smaller: the group is then MPI ranks [0, world_size) and processes with a higher MPI rank do
// not join (init_process_group refuses them: their rank is out of range), so one mpirun can host
// runs of several world sizes one after the other. world_size above MPI's size is an error.
//
// MPI itself: initialised once per process with MPI_THREAD_MULTIPLE (the comm worker thread and the
// rank's thread both call MPI), by initialize() or at the first init_process_group("mpi"); if the
// program initialised MPI itself, that is used (it must have asked for MPI_THREAD_MULTIPLE) and the
// program finalises it; otherwise MPI_Finalize runs at exit. A process not started by mpirun is
// refused with one line saying how to start it.
//
// Algorithms. Collectives are MPI's own (MPI_Iallreduce, ...) unless a call asks for ring, tree or
// naive (AllreduceOptions::algorithm, ...): that runs the sim backend's schedule of the algorithm
// over MPI point-to-point, step by step, with the sim backend's results bit for bit and its trace
// events. $DPSCOPE_ALGO, read at init as SimWorld reads it, is the group's default for calls that
// leave the algorithm at kDefault (docs/processes.md, "Our own schedules over MPI").
//
// In a build without MPI (no libopenmpi-dev), built() is false, initialize() throws kUnsupported and
// the registry reports `mpi` as not built.
//
// Thread semantics: every function here is thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "dpscope/comm/backend_registry.hpp"

namespace dpscope::mpi {

// True when this build has the mpi backend.
bool built();

// Where this process stands in its MPI job.
struct Launch {
  int rank = 0;  // MPI_COMM_WORLD's rank
  int size = 1;  // MPI_COMM_WORLD's size
};

// The rank and size mpirun gave this process, read from the environment (OMPI_COMM_WORLD_RANK and
// OMPI_COMM_WORLD_SIZE for OpenMPI; PMI_RANK and PMI_SIZE for MPICH's launcher), without touching
// MPI; nullopt when the process was not started by an MPI launcher.
std::optional<Launch> launch_from_environment();

// A command's check that mpirun started this process as one of `devices` ranks: the launch, or
// kUsage "--backend mpi: this process was not started by mpirun; run mpirun -np 4 dpscope train ...
// --backend mpi" / "--devices 3 but mpirun started 2 processes (-np 2): give the same number".
// `command` is the dpscope subcommand ("train", "bench").
Launch require_mpirun_launch(int devices, const char* command);

// Initialises MPI if nobody has (see the file comment) and returns MPI_COMM_WORLD's rank and size.
// Throws kUnsupported in a build without MPI, kInvalidArgument outside mpirun, kInternal when the
// MPI library cannot give MPI_THREAD_MULTIPLE.
Launch initialize();

}  // namespace dpscope::mpi
