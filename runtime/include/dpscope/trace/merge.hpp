// merge_rank_traces(): the per-rank traces of a run whose ranks are processes (DIR/rank-K.jsonl,
// written by `mpirun -np N dpscope train --backend mpi --trace DIR`) as one trace on rank 0's clock,
// which the visualizer, `dpscope trace stats|export` and the lessons read like any other.
//
//   dpscope trace merge DIR DIR/merged.jsonl
//
// Each rank's header says how its clock stands against rank 0's (the run object's "process"
// entry: clock_offset_ns, clock_uncertainty_ns; docs/trace-format.md); every event of rank K is
// shifted by its offset. Devices are renumbered rank after rank and named "cpu:K"; flow ids stay
// unique. Events are written in time order. The output is written to a temporary file and renamed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace dpscope::trace {

struct RankClock {
  int rank = 0;
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;
};

struct MergeResult {
  int ranks = 0;
  uint64_t events = 0;
  std::vector<RankClock> clocks;  // by rank
};

// Throws kIo (unreadable directory or file), kFormat (no rank-K.jsonl, a rank missing between 0
// and the highest, a rank file whose header lacks its "process" entry or names another rank, a
// malformed line), kUsage (OUT inside the ranks' files).
MergeResult merge_rank_traces(const std::filesystem::path& dir, const std::filesystem::path& out);

}  // namespace dpscope::trace
