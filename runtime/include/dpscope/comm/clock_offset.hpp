// How far each rank's clock is from rank 0's, measured through the process group, so that traces
// written by separate processes (each on its own clock) can be put on one time line (`dpscope trace
// merge`, trace_tools/rank_traces.hpp).
//
// Rank 0 meets every other rank in turn for a few ping-pongs: the peer sends its clock, rank 0
// answers with its own, and the peer takes the round trip with the least delay, as NTP does: the
// offset is rank 0's answer minus the peer's clock half-way through that round trip, and half the
// round trip bounds the error (the answer was read somewhere inside it).
#pragma once

#include <cstdint>

#include "dpscope/comm/process_group.hpp"

namespace dpscope {

struct ClockOffset {
  int64_t offset_ns = 0;       // add to this rank's clock (its compute stream's) to get rank 0's
  int64_t uncertainty_ns = 0;  // half the best round trip: the offset is right to within this
};

// This rank's clock against rank 0's ({0, 0} on rank 0). A collective call: every rank of `group`
// calls it, with the same `rounds` (ping-pongs per peer, at least 1). Bounded by the group's timeout.
ClockOffset measure_clock_offset(ProcessGroup& group, int rounds = 8);

}  // namespace dpscope
