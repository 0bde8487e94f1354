// The process-group backends the parametrized suites run on (test-backend-ops style), shared by
// tests/runtime/comm/backend_suite_test.cpp (collectives) and
// tests/runtime/parallel/ddp_backend_suite_test.cpp (DDP).
//
// Adding a backend is adding one line to backend_cases(); a backend this build did not register
// is skipped with a printed reason. A backend whose ranks need a machine description (sim: the
// SimWorld) gets it in init_options().
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/comm/spawn.hpp"

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
      {"cuda", Algorithm::kRing},  // our own schedules on device buffers (issue 10)
      {"nccl", Algorithm::kAuto},  // issue 10
      {"mpi", Algorithm::kAuto},   // processes through MPI (issue 12)
  };
}

inline std::string case_name(const ::testing::TestParamInfo<BackendCase>& info) { return info.param.name(); }

// Why `c` cannot run in this build, or "" when it can.
inline std::string skip_reason(const BackendCase& c) {
  if (is_backend_registered(c.backend)) return "";
  return fmt::format("backend '{}' is not built in this version of dpscope (registered backends: {})",
                     c.backend, fmt::join(registered_backends(), ", "));
}

// Options for spawn_ranks() to run `world_size` rank threads of `c`; `sim` describes the machine
// of the sim backend (its algorithm is replaced by the case's).
inline InitOptions init_options(const BackendCase& c, int world_size, SimWorldOptions sim) {
  InitOptions options{.backend = c.backend, .world_size = world_size};
  if (c.backend == "sim") {
    sim.algorithm = c.algorithm;
    options.world = SimWorld::create(world_size, std::move(sim));
  }
  return options;
}

// A fixture that skips, with the reason printed, on a backend this build lacks.
class BackendSuite : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    if (const std::string reason = skip_reason(GetParam()); !reason.empty()) GTEST_SKIP() << reason;
  }
};

}  // namespace dpscope::test
