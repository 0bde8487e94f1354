// merge_rank_traces(): the per-rank traces of a run whose ranks are processes (DIR/rank-K.jsonl,
// written by `mpirun -np N dpscope train --backend mpi --trace DIR`) written as one trace on rank
// 0's clock, which any reader opens like another file.
//
//   dpscope trace merge DIR DIR/merged.jsonl
//
// The rules are those every reader of such a directory follows (trace_tools/rank_traces.hpp,
// RankMerge): times moved by each rank's clock offset, devices renumbered rank after rank ("cpu"
// -> "cpu:K", "cuda:1" kept unless a lower rank has it), transfers' src_rank/dst_rank ends
// resolved, flow ids kept apart, events in time order. Each line keeps its other fields as written.
// The output is written to a temporary file and renamed; an OUT ending in ".zst" is written
// zstd-compressed (trace_tools/compressed.hpp). Rank files may be compressed (rank-K.jsonl.zst).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::trace {

struct MergeResult {
  int ranks = 0;
  uint64_t events = 0;
  std::vector<RankSource> clocks;  // by rank: the file, its clock offset and uncertainty
  // The rank files that end with an incomplete line (a rank still writing, or cut off): that line is
  // left out of OUT, as every reader leaves it out, and the caller says so.
  std::vector<std::filesystem::path> partial;
};

// Throws kIo (unreadable directory or file), kFormat (what read_trace refuses of a directory: no
// rank-K.jsonl, a rank missing, a header without its "process" entry or of another run; a malformed
// line), kUsage (OUT is one of the rank files).
MergeResult merge_rank_traces(const std::filesystem::path& dir, const std::filesystem::path& out);

}  // namespace dpscope::trace
