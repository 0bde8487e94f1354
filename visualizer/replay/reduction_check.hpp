// What a reduction did, checked on its traced values at a cursor: which rows have happened, the
// sample columns worth showing (the largest in magnitude), and whether the "after" values are the
// ranks' mean or their sum — judged on the largest column, where a zero cannot pass for both.
// Used by the inspector's reduction table and its per-step list. No GL, no ImGui.
#pragma once

#include <cstdint>
#include <vector>

#include "replay/replay_model.hpp"

namespace dpscope::viz {

struct ReductionCheck {
  std::vector<uint32_t> rows;   // the "before" values events that happened (else the "local" ones)
  bool before = false;          // rows are "before" (a reduction), not "local" values
  std::vector<uint32_t> after;  // the "after" values events that happened
  std::vector<size_t> columns;  // sample positions to show, in element order
  int64_t stride = 1;           // elements between samples
  bool is_mean = false;         // after == the mean of the rows (within 1e-5)
  bool is_sum = false;          // after == their sum
  bool reduced() const { return !after.empty(); }
};

ReductionCheck check_reduction(const ReplayModel& model, const Reduction& r, Cursor cursor, size_t columns);

}  // namespace dpscope::viz
