// Interval unions with prefix sums, and the HTA time breakdown over a window.
#include "replay/breakdown.hpp"

#include <algorithm>

namespace dpscope::viz {

BusyIntervals BusyIntervals::from_intervals(std::vector<std::pair<int64_t, int64_t>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  BusyIntervals out;
  for (const auto& [start, end] : intervals) {
    if (end <= start) continue;
    if (!out.ends_ns_.empty() && start <= out.ends_ns_.back()) {
      out.ends_ns_.back() = std::max(out.ends_ns_.back(), end);
    } else {
      out.starts_ns_.push_back(start);
      out.ends_ns_.push_back(end);
    }
  }
  out.prefix_ns_.resize(out.starts_ns_.size());
  int64_t sum = 0;
  for (size_t i = 0; i < out.starts_ns_.size(); ++i) {
    sum += out.ends_ns_[i] - out.starts_ns_[i];
    out.prefix_ns_[i] = sum;
  }
  return out;
}

BusyIntervals BusyIntervals::intersection(const BusyIntervals& a, const BusyIntervals& b) {
  std::vector<std::pair<int64_t, int64_t>> both;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t start = std::max(a.starts_ns_[i], b.starts_ns_[j]);
    const int64_t end = std::min(a.ends_ns_[i], b.ends_ns_[j]);
    if (start < end) both.emplace_back(start, end);
    if (a.ends_ns_[i] < b.ends_ns_[j])
      ++i;
    else
      ++j;
  }
  return from_intervals(std::move(both));
}

int64_t BusyIntervals::covered_ns(int64_t t0_ns, int64_t t1_ns) const {
  if (t1_ns <= t0_ns || starts_ns_.empty()) return 0;
  // Intervals [first, last) intersect the window.
  const size_t first =
      static_cast<size_t>(std::upper_bound(ends_ns_.begin(), ends_ns_.end(), t0_ns) - ends_ns_.begin());
  const size_t last =
      static_cast<size_t>(std::lower_bound(starts_ns_.begin(), starts_ns_.end(), t1_ns) - starts_ns_.begin());
  if (first >= last) return 0;
  int64_t sum = prefix_ns_[last - 1] - (first > 0 ? prefix_ns_[first - 1] : 0);
  // Clip the two boundary intervals to the window.
  sum -= std::max<int64_t>(0, t0_ns - starts_ns_[first]);
  sum -= std::max<int64_t>(0, ends_ns_[last - 1] - t1_ns);
  return sum;
}

TimeBreakdown DeviceBusy::breakdown(int64_t t0_ns, int64_t t1_ns) const {
  TimeBreakdown b;
  b.window_ns = std::max<int64_t>(0, t1_ns - t0_ns);
  b.compute_ns = compute.covered_ns(t0_ns, t1_ns);
  b.comm_ns = comm.covered_ns(t0_ns, t1_ns);
  b.overlap_ns = both.covered_ns(t0_ns, t1_ns);
  b.exposed_comm_ns = b.comm_ns - b.overlap_ns;
  b.idle_ns = b.window_ns - b.compute_ns - b.exposed_comm_ns;
  return b;
}

}  // namespace dpscope::viz
