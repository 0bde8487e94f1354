// HTA time breakdown: interval unions, intersections and windows, with closed-form answers.
#include <gtest/gtest.h>

#include "replay/breakdown.hpp"

namespace dpscope::viz {
namespace {

TEST(BusyIntervals, MergesOverlappingAndTouchingIntervals) {
  const BusyIntervals b = BusyIntervals::from_intervals({{5, 10}, {0, 3}, {8, 12}, {12, 15}, {20, 20}});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b.interval(0), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(b.interval(1), (std::pair<int64_t, int64_t>{5, 15}));
  EXPECT_EQ(b.total_ns(), 13);
}

TEST(BusyIntervals, CoveredTimeClipsToTheWindow) {
  const BusyIntervals b = BusyIntervals::from_intervals({{0, 10}, {20, 30}, {40, 50}});
  EXPECT_EQ(b.covered_ns(0, 50), 30);
  EXPECT_EQ(b.covered_ns(5, 45), 20);  // 5 + 10 + 5
  EXPECT_EQ(b.covered_ns(10, 20), 0);
  EXPECT_EQ(b.covered_ns(25, 26), 1);
  EXPECT_EQ(b.covered_ns(60, 70), 0);
  EXPECT_EQ(b.covered_ns(30, 10), 0);
  EXPECT_EQ(BusyIntervals{}.covered_ns(0, 100), 0);
}

TEST(BusyIntervals, IntersectionKeepsTimeCoveredByBoth) {
  const BusyIntervals a = BusyIntervals::from_intervals({{0, 10}, {20, 30}});
  const BusyIntervals b = BusyIntervals::from_intervals({{5, 25}});
  const BusyIntervals both = BusyIntervals::intersection(a, b);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both.interval(0), (std::pair<int64_t, int64_t>{5, 10}));
  EXPECT_EQ(both.interval(1), (std::pair<int64_t, int64_t>{20, 25}));
}

TEST(DeviceBusy, BreakdownFollowsHtaDefinitions) {
  DeviceBusy d;
  d.compute = BusyIntervals::from_intervals({{0, 10}, {20, 30}});
  d.comm = BusyIntervals::from_intervals({{5, 25}});
  d.both = BusyIntervals::intersection(d.compute, d.comm);
  const TimeBreakdown b = d.breakdown(0, 40);
  EXPECT_EQ(b.window_ns, 40);
  EXPECT_EQ(b.compute_ns, 20);
  EXPECT_EQ(b.comm_ns, 20);
  EXPECT_EQ(b.overlap_ns, 10);
  EXPECT_EQ(b.exposed_comm_ns, 10);  // [10, 20): communication nobody hid
  EXPECT_EQ(b.idle_ns, 10);          // [30, 40)
  EXPECT_DOUBLE_EQ(b.overlap_pct(), 50.0);
  const TimeBreakdown none = DeviceBusy{}.breakdown(0, 40);
  EXPECT_EQ(none.idle_ns, 40);
  EXPECT_DOUBLE_EQ(none.overlap_pct(), 0.0);
}

}  // namespace
}  // namespace dpscope::viz
