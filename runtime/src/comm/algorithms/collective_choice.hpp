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
#include <string_view>
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
  // NCCL_ALGO where no schedule is that algorithm (NVLS): the all-reduce's time is its, the data
  // moves by `algorithm`'s schedule. nullopt: `algorithm` says.
  std::optional<NcclAlgo> nccl_algo;
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

// Whether there is a schedule of the explicit algorithm `algo` (ring, tree, naive) for `op`:
// all-reduce, broadcast and reduce have all three, all-gather and reduce-scatter rings only,
// scatter and gather the naive pattern only, all-to-all none (its one pairwise schedule runs for
// kDefault and kAuto).
bool offers_algorithm(OpType op, Algorithm algo);

// Which algorithm a call of `op` runs, the one rule of every backend that runs these schedules
// (sim, cuda, mpi, analytic): `requested` when the call names one (kInvalidArgument "<op>:
// algorithm 'tree' is not available<on_backend> (available: ring, auto)" where `op` has no such
// schedule; `on_backend` is "" or " on backend 'mpi'"); for kDefault the group's default
// (SimWorld's or $DPSCOPE_ALGO) where `op` offers it (scatter and gather then take naive, their one
// schedule); else kAuto, the op's own choice (choose_schedule's; MPI's own on mpi).
Algorithm resolve_algorithm(OpType op, Algorithm requested, Algorithm group_default,
                            std::string_view on_backend = "");

}  // namespace dpscope::detail
