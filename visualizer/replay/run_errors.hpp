// RunErrors: where a failed run stopped. The runtime writes an `error` instant (docs/trace-format.md)
// on every rank that stops with an error, at the moment it stops, with the error's message; a run
// that ends normally has none. The stage shows the earliest one that has happened at the cursor as
// a red banner naming the rank and the reason (lesson 13: a mismatched collective), so a student
// sees why the run ends instead of a picture that simply stops. Plain data, no ImGui.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"
#include "replay/replay_state.hpp"
#include "replay/time_order.hpp"

namespace dpscope::viz {

struct RunErrorMark {
  uint32_t event = kNoEvent;  // index into TraceData::events
  int64_t ts_ns = 0;
  int32_t rank = 0;
  int64_t step = -1;
  std::string message;
};

// The trace's error instants in time order, ties by rank (ranks that learn of a mismatch at one
// moment write in no fixed order); `positions` are their positions in the model's time order, kept
// so "has it happened" is one comparison per mark.
struct RunErrors {
  std::vector<RunErrorMark> marks;
  std::vector<uint32_t> positions;  // parallel to marks

  static RunErrors from_trace(const trace::TraceData& data, const TimeOrder& order);
  bool empty() const { return marks.empty(); }
  // How many have happened at `cursor`.
  size_t happened(Cursor cursor) const;
  // The earliest that has happened at `cursor` (the banner's), or nullptr.
  const RunErrorMark* first_happened(Cursor cursor) const;
  // The ranks that have stopped at `cursor`, without repeats, in the order they stopped.
  std::vector<int32_t> stopped_ranks(Cursor cursor) const;
  // The ranks that stop later than `cursor` and so still run at it, ascending: each failing rank
  // writes its own error, so until the last one has happened the run has not failed everywhere
  // (lesson 13: rank 0 stops in its lone all-reduce while ranks 1-3 finish their backward).
  std::vector<int32_t> running_ranks(Cursor cursor) const;
};

// The banner's two parts: "Run failed: rank 0 stopped at step 2 (4 ranks stopped)" and the
// message; the second part drops the "rank N failed: " prefix spawn() puts in front of a rank's
// error, if any.
struct RunErrorText {
  std::string headline;
  std::string reason;
  bool run_failed = true;  // every rank that stops has: "Run failed"; else some still run
};
RunErrorText run_error_text(const RunErrorMark& first, size_t ranks_stopped);
// The same at a moment when `running` ranks have not stopped yet (RunErrors::running_ranks): "Rank
// 0 stopped at step 2 (ranks 1-3 still running)" while any runs, run_error_text's "Run failed" once
// none does.
RunErrorText run_error_text(const RunErrorMark& first, const std::vector<int32_t>& stopped,
                            const std::vector<int32_t>& running);

}  // namespace dpscope::viz
