// MPI processes that mpirun did not start: `dpscope launch` (or torchrun) starts N processes with
// RANK and WORLD_SIZE, each becomes an MPI *singleton* (MPI_Init without mpirun), and they join
// one communicator with MPI's own dynamic-process calls, meeting in the env:// TCPStore:
//
//   1. rank 0 starts OpenMPI's `ompi-server` ($DPSCOPE_OMPI_SERVER, else the one on PATH, else
//      /usr/bin's; a child process that dies with it) and puts its URI
//      in the store; every rank sets OMPI_MCA_pmix_server_uri to it before MPI_Init, which is
//      what lets singletons of different jobs connect;
//   2. rank 0 opens an MPI port (MPI_Open_port) and puts its name in the store;
//   3. in rounds k = 1 .. N-1, the ranks joined so far MPI_Comm_accept on that port (collective
//      over their communicator) while rank k MPI_Comm_connect's, and the two sides merge
//      (MPI_Intercomm_merge, the newcomer last): after round k, ranks 0..k are one communicator
//      in rank order. Rank 0 opens round k in the store, so no rank connects out of turn.
//
// All communication after that is MPI's; the store only carries the two names and the turns.
// MPI calls cannot be interrupted, so a watchdog bounds the join: a rank that has not joined
// within the timeout prints one line naming the round it waited in and exits with status 3
// (the launcher then stops the others and names it).
#pragma once

#include <mpi.h>

#include "dpscope/comm/store.hpp"

namespace dpscope::mpi::detail {

// Initialises MPI as a singleton of a world of `world_size` ranks that meet in `store` and
// returns the communicator of ranks [0, world_size), this process being rank `rank`. Every rank
// calls it; a second call in the same process returns a duplicate of the first world (of the
// same size, or kInvalidArgument). Throws kUnsupported when ompi-server is not found,
// kTimeout when a peer does not show up in the store.
MPI_Comm join_singletons(Store& store, int rank, int world_size, Milliseconds timeout);

// MPI_Init_thread(MPI_THREAD_MULTIPLE) with MPI_Finalize at exit (mpi_runtime.cpp); throws
// kInternal naming `who` when the library cannot give MPI_THREAD_MULTIPLE. Call with MPI not
// initialised.
void init_thread_multiple(const char* who);

}  // namespace dpscope::mpi::detail
