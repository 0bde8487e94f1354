// choose_schedule(): which schedule a collective runs and how long it takes on a network — the
// one policy shared by the sim backend's leader (sim_plan.cpp) and the analytical model of large
// worlds (analytic_collectives.cpp), so both pick the same algorithm for the same call.
// build_schedule() is the same choice without a network, for an explicit algorithm: what the mpi
// backend runs over MPI point-to-point (comm/mpi/), op for op the sim's schedule.
//
// An explicit algorithm is used where the op offers it; kAuto (and ops offering one algorithm)
// take the op's default: all-reduce tries ring and tree and keeps the faster on this network,
// broadcast and reduce use binomial trees, all-gather and reduce-scatter rings, scatter and
// gather the naive root-to-each pattern, barrier the dissemination rounds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dpscope/comm/nccl_cost_model.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/comm/schedule.hpp"
#include "dpscope/comm/types.hpp"

namespace dpscope::detail {

struct CollectiveShape {
  OpType op = OpType::kAllReduce;
  Algorithm algorithm = Algorithm::kAuto;
  int64_t count = 0;  // elements of the sizing tensor (per rank block for gather-like ops)
  int root = -1;
  int slices = 0;  // pipeline slices requested (0: pipeline_slices' choice)
  uint64_t elem_bytes = 4;
  std::optional<NcclProto> proto;  // NCCL_PROTO (nullopt: NCCL's tuner chooses)
};

struct TimedSchedule {
  Schedule schedule;
  ScheduleTiming timing;
  std::optional<NcclPrediction> nccl;  // the cost model's time the timing was fitted to, if any
};

// The schedule of `shape` for the group whose rank r sits on GPU gpus[r], ring order `ring`
// (group ranks), each rank starting at starts[r]; timed by simulate_schedule.
TimedSchedule choose_schedule(const CollectiveShape& shape, const NetworkModel& net,
                              std::span<const int> gpus, const std::vector<int>& ring,
                              const std::vector<int64_t>& starts);

// The schedule of `shape` for `ranks` ranks in ring order `ring` (group ranks), untimed: the one
// choose_schedule() times. An all-reduce needs an explicit algorithm (kRing, kTree, kNaive): kAuto
// picks by the network's timing, which only choose_schedule() has.
Schedule build_schedule(const CollectiveShape& shape, int ranks, const std::vector<int>& ring);

// The latest end over the ranks.
int64_t max_end(const ScheduleTiming& timing);

}  // namespace dpscope::detail
