// Helpers of the mpi backend's tests (tests/mpi): every test runs in each process of one mpirun,
// and each process runs its own rank's part.
//
// join(n) makes the group of MPI ranks [0, n) (the backend's sub-world: comm/mpi_backend.hpp) and
// returns nullptr on ranks >= n, which sit that world size out; so one mpirun -np 4 covers world
// sizes 1 to 4. Under plain ctest (no mpirun) every test but MpiOutsideMpirun skips.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/process_group.hpp"

namespace dpscope::test {

inline bool under_mpirun() { return mpi::launch_from_environment().has_value(); }
inline int mpi_rank() { return mpi::launch_from_environment()->rank; }
inline int mpi_size() { return mpi::launch_from_environment()->size; }

// The world sizes this mpirun can host: 1 .. mpi_size().
inline std::vector<int> world_sizes() {
  std::vector<int> sizes;
  for (int n = 1; n <= mpi_size(); ++n) sizes.push_back(n);
  return sizes;
}

// This process's rank of a world of `n` ranks, or nullptr when it is not a member.
inline std::shared_ptr<ProcessGroup> join(int n, Milliseconds timeout = Milliseconds(20000)) {
  if (mpi_rank() >= n) return nullptr;
  return init_process_group({.backend = "mpi", .rank = mpi_rank(), .world_size = n, .timeout = timeout});
}

// Skips a test that needs mpirun.
#define DPS_REQUIRE_MPIRUN()                                                                \
  do {                                                                                      \
    if (!::dpscope::test::under_mpirun())                                                   \
      GTEST_SKIP() << "mpi ranks are processes: this test runs under mpirun (ctest mpi_*)"; \
  } while (0)

}  // namespace dpscope::test
