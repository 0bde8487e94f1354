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

// A union of busy intervals: sorted, disjoint [start, end) pairs with the busy time before every
// 16th of them, so the busy time inside any window is found in O(log n) plus at most 2 x 15
// additions. 16.5 bytes per merged interval (a 10M-event trace can have millions of them: the
// gaps between kernels), where a prefix sum per interval would take 24.
class BusyIntervals {
 public:
  BusyIntervals() = default;
  // Adds [start_ns, end_ns) to the union; empty intervals are dropped. Starts must come in
  // non-decreasing order (the model feeds lane items by start; throws std::invalid_argument
  // otherwise), so the union is built as it goes, with no copy of the intervals.
  void add(int64_t start_ns, int64_t end_ns);
  // Returns the spare capacity of growing (call once the last interval is added).
  void shrink_to_fit();
  // The intervals covered by both `a` and `b`.
  static BusyIntervals intersection(const BusyIntervals& a, const BusyIntervals& b);

  // Busy time inside [t0_ns, t1_ns).
  int64_t covered_ns(int64_t t0_ns, int64_t t1_ns) const;
  int64_t total_ns() const { return total_ns_; }
  size_t size() const { return starts_ns_.size(); }
  std::pair<int64_t, int64_t> interval(size_t i) const { return {starts_ns_[i], ends_ns_[i]}; }

 private:
  static constexpr size_t kBlock = 16;
  // Total length of intervals 0..i-1.
  int64_t busy_before(size_t i) const;

  std::vector<int64_t> starts_ns_;
  std::vector<int64_t> ends_ns_;
  std::vector<int64_t> block_busy_ns_;  // (ceil(size / kBlock)) [b] = busy_before(b * kBlock)
  int64_t total_ns_ = 0;
};

struct TimeBreakdown {
  int64_t window_ns = 0;
  int64_t compute_ns = 0;       // compute stream busy
  int64_t comm_ns = 0;          // comm or copy stream busy (trace_tools/stats.hpp's definition)
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
