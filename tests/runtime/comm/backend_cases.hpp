// The process-group backends the parametrized suites run on (test-backend-ops style), shared by
// tests/runtime/comm/backend_suite_test.cpp (collectives) and
// tests/runtime/parallel/ddp_backend_suite_test.cpp (DDP).
//
// Adding a backend is adding one line to backend_cases(); a backend this build did not register,
// or that needs a GPU this machine lacks, is skipped with a printed reason; a world size a backend
// cannot run here (nccl: more ranks than GPUs) is skipped per size (fits()). A backend whose ranks
// need a machine description (sim: the SimWorld; cuda, nccl: a world of cuda devices) gets it in
// init_options().
#pragma once

#include <gtest/gtest.h>

#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/comm/gpu_backends.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/core/cuda.hpp"

namespace dpscope::test {

struct BackendCase {
  std::string backend;  // the registry name passed to init_process_group
  Algorithm algorithm;  // the schedule every collective uses where the op offers it, else auto
  std::string name() const { return backend + "_" + to_string(algorithm); }
};

// How GoogleTest prints a case ("sim_ring") instead of its bytes.
inline void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name(); }

inline std::vector<BackendCase> backend_cases() {
  return {
      {"sim", Algorithm::kRing},   //
      {"sim", Algorithm::kTree},   //
      {"sim", Algorithm::kNaive},  //
      {"sim", Algorithm::kAuto},   //
      {"cuda", Algorithm::kRing},  // our own schedules on device buffers
      {"nccl", Algorithm::kAuto},  // NCCL's own algorithms
      {"mpi", Algorithm::kAuto},   // processes through MPI
  };
}

inline std::string case_name(const ::testing::TestParamInfo<BackendCase>& info) { return info.param.name(); }

inline bool needs_gpu(const BackendCase& c) { return c.backend == "cuda" || c.backend == "nccl"; }

// Why `c` cannot run in this build or on this machine, or "" when it can.
inline std::string skip_reason(const BackendCase& c) {
  if (c.backend == "mpi" && is_backend_registered("mpi"))
    return "mpi ranks are processes: run by tests/mpi under mpirun";
  if (!is_backend_registered(c.backend))
    return fmt::format("backend '{}' is not built in this version of dpscope (registered backends: {})",
                       c.backend, fmt::join(registered_backends(), ", "));
  if (needs_gpu(c) && cuda::physical_device_count() == 0)
    return fmt::format("backend '{}' needs a CUDA GPU: {}", c.backend, cuda::unavailable_reason());
  return "";
}

// Why `c` cannot run `world_size` ranks on this machine, or "" when it can.
inline std::string size_skip_reason(const BackendCase& c, int world_size) {
  if (c.backend == "nccl") return nccl_world_size_problem(world_size, cuda::physical_device_count());
  return "";
}

// Options for spawn_ranks() to run `world_size` rank threads of `c`; `sim` describes the machine
// of the sim backend (its algorithm is replaced by the case's).
inline InitOptions init_options(const BackendCase& c, int world_size, SimWorldOptions sim) {
  InitOptions options{.backend = c.backend, .world_size = world_size};
  if (c.backend == "sim") {
    sim.algorithm = c.algorithm;
    options.world = SimWorld::create(world_size, std::move(sim));
  } else if (needs_gpu(c)) {
    sim.algorithm = c.algorithm;  // cuda: the schedule; nccl: ignored (NCCL picks its own)
    options.world = make_cuda_world(world_size, std::move(sim));
  }
  return options;
}

// A fixture that skips, with the reason printed, on a backend this build lacks.
class BackendSuite : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    if (const std::string reason = skip_reason(GetParam()); !reason.empty()) GTEST_SKIP() << reason;
  }
  // False, printing why, when this backend cannot run `world_size` ranks here (the test moves on
  // to its next size): `if (!fits(n)) continue;`.
  bool fits(int world_size) const {
    const std::string reason = size_skip_reason(GetParam(), world_size);
    if (!reason.empty()) std::cout << "[  SKIPPED ] world size " << world_size << ": " << reason << "\n";
    return reason.empty();
  }
};

}  // namespace dpscope::test
