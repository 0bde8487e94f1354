// Dataset rows as runs (see row_runs.hpp).
#include "replay/row_runs.hpp"

#include <fmt/format.h>

namespace dpscope::viz {

std::vector<RowRun> row_runs(const std::vector<int64_t>& rows) {
  std::vector<RowRun> runs;
  size_t i = 0;
  while (i < rows.size()) {
    size_t j = i + 1;
    const int64_t stride = j < rows.size() ? rows[j] - rows[i] : 0;
    if (stride > 0) {
      while (j < rows.size() && rows[j] - rows[j - 1] == stride) ++j;
    }
    const size_t length = j - i;
    if (stride > 0 && (length >= 3 || (stride == 1 && length == 2))) {
      runs.push_back({rows[i], rows[j - 1], stride, static_cast<int64_t>(length)});
      i = j;
    } else {
      runs.push_back({rows[i], rows[i], 0, 1});
      ++i;
    }
  }
  return runs;
}

std::string format_row_run(const RowRun& run) {
  if (run.count <= 1) return fmt::format("{}", run.first);
  if (run.stride == 1) return fmt::format("{}\u2013{}", run.first, run.last);
  const int64_t s = run.stride;
  // English ordinal suffix of the stride: 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 22nd ...
  const char* suffix = "th";
  if (s % 100 < 11 || s % 100 > 13) {
    if (s % 10 == 1) suffix = "st";
    if (s % 10 == 2) suffix = "nd";
    if (s % 10 == 3) suffix = "rd";
  }
  return fmt::format("{}\u2013{} every {}{}", run.first, run.last, s, suffix);
}

std::string format_rows(const std::vector<int64_t>& rows) {
  std::string out;
  for (const RowRun& r : row_runs(rows)) {
    if (!out.empty()) out += ", ";
    out += format_row_run(r);
  }
  return out;
}

}  // namespace dpscope::viz
