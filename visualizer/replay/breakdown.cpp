// Interval unions with prefix sums, and the HTA time breakdown over a window.
#include "replay/breakdown.hpp"

#include <algorithm>
#include <stdexcept>

namespace dpscope::viz {

void BusyIntervals::add(int64_t start_ns, int64_t end_ns) {
  if (end_ns <= start_ns) return;
  if (!starts_ns_.empty() && start_ns < starts_ns_.back())
    throw std::invalid_argument("BusyIntervals::add: intervals must be added in order of start");
  if (!ends_ns_.empty() && start_ns <= ends_ns_.back()) {
    // Overlapping or touching the last interval: extend it.
    if (end_ns > ends_ns_.back()) {
      total_ns_ += end_ns - ends_ns_.back();
      ends_ns_.back() = end_ns;
    }
    return;
  }
  if (starts_ns_.size() % kBlock == 0) block_busy_ns_.push_back(total_ns_);
  starts_ns_.push_back(start_ns);
  ends_ns_.push_back(end_ns);
  total_ns_ += end_ns - start_ns;
}

void BusyIntervals::shrink_to_fit() {
  starts_ns_.shrink_to_fit();
  ends_ns_.shrink_to_fit();
  block_busy_ns_.shrink_to_fit();
}

int64_t BusyIntervals::busy_before(size_t i) const {
  if (i == size()) return total_ns_;
  int64_t sum = block_busy_ns_[i / kBlock];
  for (size_t j = i / kBlock * kBlock; j < i; ++j) sum += ends_ns_[j] - starts_ns_[j];
  return sum;
}

BusyIntervals BusyIntervals::intersection(const BusyIntervals& a, const BusyIntervals& b) {
  // Both inputs are sorted and disjoint, so the pieces come out sorted (and, since each input's
  // intervals are apart, disjoint): they are added as they are found.
  BusyIntervals both;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    both.add(std::max(a.starts_ns_[i], b.starts_ns_[j]), std::min(a.ends_ns_[i], b.ends_ns_[j]));
    if (a.ends_ns_[i] < b.ends_ns_[j])
      ++i;
    else
      ++j;
  }
  both.shrink_to_fit();
  return both;
}

int64_t BusyIntervals::covered_ns(int64_t t0_ns, int64_t t1_ns) const {
  if (t1_ns <= t0_ns || starts_ns_.empty()) return 0;
  // Intervals [first, last) intersect the window.
  const size_t first =
      static_cast<size_t>(std::upper_bound(ends_ns_.begin(), ends_ns_.end(), t0_ns) - ends_ns_.begin());
  const size_t last =
      static_cast<size_t>(std::lower_bound(starts_ns_.begin(), starts_ns_.end(), t1_ns) - starts_ns_.begin());
  if (first >= last) return 0;
  int64_t sum = busy_before(last) - busy_before(first);
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
