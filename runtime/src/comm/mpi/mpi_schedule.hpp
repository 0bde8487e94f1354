// Our own schedules over MPI point-to-point: this rank's part of a Schedule (comm/schedule.hpp) —
// the sim backend's ring, tree and naive algorithms, op for op — which the mpi backend runs when a
// call, or the group's default ($DPSCOPE_ALGO), asks for one (mpi_backend.hpp; docs/processes.md,
// "Our own schedules over MPI").
//
// Step by step, as the sim's rank threads run them (sim_execute.cpp), with messages instead of
// reads of a peer's memory: at step s the rank posts an MPI_Irecv for every op of step s it
// receives and an MPI_Isend for every op it sends, straight from its own buffer (the schedule's
// invariant: no op of a step writes elements another op of that step reads), waits for them all
// with the channel (polling; the collective's timeout counted from its start; peers' failures),
// then applies what it received in schedule order: a copy, or a reduction into its own elements
// (to = op(to, from), the sim's kernel). Every element sees the same operations in the same order
// as on the sim backend, so results are bit-identical to the sim's for the same schedule and inputs.
//
// No barrier between steps: a rank's step-s messages leave once its own step s-1 is applied, which
// is all an op needs (its dependencies lie in earlier steps). Two ranks' messages are matched in the
// order both post them (MPI's non-overtaking rule), so one tag carries a whole collective
// (MpiChannel::schedule_tag). Ops of zero elements are skipped at both ends; signals (a barrier's)
// travel as empty messages.
//
// Buffers: a copy whose elements no other op received by this rank in the same step touches is
// received in place; everything else lands in a scratch buffer first (one per collective, sized for
// the rank's largest step) and is applied from there. After a failure the scratch is kept for good
// (keep_forever), as MPI may still write it; the caller keeps the buffers it passed.
//
// Thread semantics: runs on the rank's comm worker, like every collective of the backend.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "../sim/sim_state.hpp"
#include "dpscope/comm/schedule.hpp"
#include "dpscope/core/device.hpp"
#include "mpi_channel.hpp"

namespace dpscope::detail {

// MPI's datatype of a dtype's elements.
MPI_Datatype mpi_type(DType dtype);

// This rank's part of one schedule.
struct ScheduleRun {
  const Schedule* schedule = nullptr;
  int rank = 0;                         // this rank, in the schedule's (the group's) ranks
  RankBuffer buffer;                    // this rank's logical buffer (schedule.hpp's layout)
  DType dtype = DType::kF32;            //
  ReduceOp reduce_op = ReduceOp::kSum;  // reduce ops combine with it (kAvg: a sum; the caller divides)
  int tag = kFirstScheduleTag;          // MpiChannel::schedule_tag of the collective
};

// What this rank measured, on its device's clock (ns), for its trace.
struct ScheduleTimes {
  struct Reduction {
    int32_t op = 0;  // index into Schedule::ops
    int64_t begin_ns = 0;
    int64_t end_ns = 0;
  };
  std::vector<int64_t> step_begin_ns;  // per step: when this rank posted its messages
  std::vector<int64_t> step_end_ns;    // per step: when they had all completed
  std::vector<Reduction> reductions;   // the reductions this rank applied, in order
};

// Runs `run` (file comment) on `channel`, timing it on `device`. `first` (the fingerprint
// exchange) is waited for once the rank's first step is posted, and `after_first` then runs before
// any more waiting (the fingerprint check: it throws to stop). Throws the channel's errors
// (kTimeout, a peer's failure, ...) naming `what`.
ScheduleTimes run_schedule(MpiChannel& channel, const Device& device, const ScheduleRun& run,
                           const WaitFor& what, Milliseconds timeout,
                           std::chrono::steady_clock::time_point begun, std::vector<MPI_Request> first,
                           const std::function<void()>& after_first);

}  // namespace dpscope::detail
