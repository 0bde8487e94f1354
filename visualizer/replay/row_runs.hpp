// The dataset rows one GPU holds in a step, summarised as runs, so that 256 rows read as "0–255"
// and a strided sampler's 64 rows as "1–253 every 4th" instead of a card full of chips. Used by the
// stage's data row (ui/stage_card.cpp) and the inspector's data split; pure, unit-tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpscope::viz {

// first, first + stride, ..., last: `count` rows (a single row has stride 0 and count 1).
struct RowRun {
  int64_t first = 0;
  int64_t last = 0;
  int64_t stride = 0;
  int64_t count = 0;
};

// `rows` in order, cut into arithmetic runs: a run of three rows or more with one positive stride
// (two rows or more when the stride is 1) becomes one RowRun; other rows stand alone. Order and
// repetitions are kept, so joining the runs gives `rows` back.
std::vector<RowRun> row_runs(const std::vector<int64_t>& rows);
// "0–255", "1–253 every 4th", "7" (one row).
std::string format_row_run(const RowRun& run);
// The runs of `rows` joined by ", " ("0–7, 12, 20–23").
std::string format_rows(const std::vector<int64_t>& rows);

}  // namespace dpscope::viz
