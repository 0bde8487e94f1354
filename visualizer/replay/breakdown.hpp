// Time breakdown of one device over a window, with the definitions of Meta's Holistic Trace
// Analysis (HTA): compute time, communication time, exposed communication (communication not
// hidden behind compute), idle time, and comm/compute overlap % = compute while communicating ÷
// communication time. Used by the Plots view; unit-tested. No GL, no ImGui.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace dpscope::viz {

// A union of busy intervals: sorted, disjoint [start, end) pairs with prefix sums, so the busy
// time inside any window is found in O(log n).
class BusyIntervals {
 public:
  BusyIntervals() = default;
  // Merges arbitrary (possibly overlapping, unsorted) intervals; empty ones are dropped.
  static BusyIntervals from_intervals(std::vector<std::pair<int64_t, int64_t>> intervals);
  // The intervals covered by both `a` and `b`.
  static BusyIntervals intersection(const BusyIntervals& a, const BusyIntervals& b);

  // Busy time inside [t0_ns, t1_ns).
  int64_t covered_ns(int64_t t0_ns, int64_t t1_ns) const;
  int64_t total_ns() const { return prefix_ns_.empty() ? 0 : prefix_ns_.back(); }
  size_t size() const { return starts_ns_.size(); }
  std::pair<int64_t, int64_t> interval(size_t i) const { return {starts_ns_[i], ends_ns_[i]}; }

 private:
  std::vector<int64_t> starts_ns_;
  std::vector<int64_t> ends_ns_;
  std::vector<int64_t> prefix_ns_;  // prefix_ns_[i] = total length of intervals 0..i
};

struct TimeBreakdown {
  int64_t window_ns = 0;
  int64_t compute_ns = 0;       // compute stream busy
  int64_t comm_ns = 0;          // comm or copy stream busy (trace_format/stats.hpp's definition)
  int64_t overlap_ns = 0;       // both at once
  int64_t exposed_comm_ns = 0;  // comm_ns - overlap_ns: communication the device waited for
  int64_t idle_ns = 0;          // neither: window - compute - exposed comm
  // compute while communicating ÷ communication time, in percent (0 without communication).
  double overlap_pct() const { return comm_ns > 0 ? 100.0 * static_cast<double>(overlap_ns) / comm_ns : 0.0; }
};

// The busy intervals of one device, split the HTA way.
struct DeviceBusy {
  BusyIntervals compute;
  BusyIntervals comm;
  BusyIntervals both;  // intersection(compute, comm)

  TimeBreakdown breakdown(int64_t t0_ns, int64_t t1_ns) const;
};

}  // namespace dpscope::viz
