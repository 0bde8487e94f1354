// main() of the mpi backend's tests: MPI is initialised (MPI_THREAD_MULTIPLE) before the tests
// when mpirun started this process, and finalised at exit; ranks other than 0 print only failures.
#include <gtest/gtest.h>

#include "mpi_world.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (dpscope::test::under_mpirun()) {
    const dpscope::mpi::Launch me = dpscope::mpi::initialize();
    if (me.rank != 0) GTEST_FLAG_SET(brief, true);
  }
  return RUN_ALL_TESTS();
}
