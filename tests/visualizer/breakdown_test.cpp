// HTA time breakdown: interval unions, intersections and windows, with closed-form answers; and the
// viewer's breakdown of runtime traces against `dpscope trace stats`.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "dpscope/trace_tools/stats.hpp"
#include "replay/breakdown.hpp"
#include "replay/replay_model.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

BusyIntervals union_of(std::initializer_list<std::pair<int64_t, int64_t>> by_start) {
  BusyIntervals b;
  for (const auto& [start, end] : by_start) b.add(start, end);
  return b;
}

TEST(BusyIntervals, MergesOverlappingAndTouchingIntervals) {
  const BusyIntervals b = union_of({{0, 3}, {5, 10}, {6, 8}, {8, 12}, {12, 15}, {20, 20}});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b.interval(0), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(b.interval(1), (std::pair<int64_t, int64_t>{5, 15}));
  EXPECT_EQ(b.total_ns(), 13);
  EXPECT_EQ(b.covered_ns(0, 15), 13) << "the prefix sums follow an interval that grows";
  EXPECT_EQ(b.covered_ns(9, 100), 6);
}

TEST(BusyIntervals, RejectsIntervalsOutOfStartOrder) {
  BusyIntervals b = union_of({{5, 10}});
  EXPECT_THROW(b.add(0, 3), std::invalid_argument);
  EXPECT_NO_THROW(b.add(5, 6));
}

TEST(BusyIntervals, CoveredTimeClipsToTheWindow) {
  const BusyIntervals b = union_of({{0, 10}, {20, 30}, {40, 50}});
  EXPECT_EQ(b.covered_ns(0, 50), 30);
  EXPECT_EQ(b.covered_ns(5, 45), 20);  // 5 + 10 + 5
  EXPECT_EQ(b.covered_ns(10, 20), 0);
  EXPECT_EQ(b.covered_ns(25, 26), 1);
  EXPECT_EQ(b.covered_ns(60, 70), 0);
  EXPECT_EQ(b.covered_ns(30, 10), 0);
  EXPECT_EQ(BusyIntervals{}.covered_ns(0, 100), 0);
}

// Prefix sums are kept per block of intervals: windows starting and ending anywhere in and across
// blocks must still count exactly (here 100 intervals [10 i, 10 i + 4), checked against a count of
// every nanosecond).
TEST(BusyIntervals, CoveredTimeIsExactAcrossManyIntervals) {
  BusyIntervals b;
  for (int64_t i = 0; i < 100; ++i) b.add(10 * i, 10 * i + 4);
  ASSERT_EQ(b.size(), 100u);
  EXPECT_EQ(b.total_ns(), 400);
  auto by_hand = [](int64_t t0, int64_t t1) {
    int64_t n = 0;
    for (int64_t t = std::max<int64_t>(t0, 0); t < t1; ++t) n += t < 1000 && t % 10 < 4;
    return n;
  };
  for (int64_t t0 = -3; t0 < 1010; t0 += 7)
    for (int64_t t1 = t0; t1 < 1010; t1 += 13)
      ASSERT_EQ(b.covered_ns(t0, t1), by_hand(t0, t1)) << t0 << ".." << t1;
}

TEST(BusyIntervals, IntersectionKeepsTimeCoveredByBoth) {
  const BusyIntervals a = union_of({{0, 10}, {20, 30}});
  const BusyIntervals b = union_of({{5, 25}});
  const BusyIntervals both = BusyIntervals::intersection(a, b);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both.interval(0), (std::pair<int64_t, int64_t>{5, 10}));
  EXPECT_EQ(both.interval(1), (std::pair<int64_t, int64_t>{20, 25}));
  EXPECT_EQ(both.total_ns(), 10);
}

TEST(DeviceBusy, BreakdownFollowsHtaDefinitions) {
  DeviceBusy d;
  d.compute = union_of({{0, 10}, {20, 30}});
  d.comm = union_of({{5, 25}});
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

// The review found the viewer's overlap (41 %) disagreeing with `dpscope trace stats` (47.4 %) for
// one trace: both now classify time with trace::busy_class, so per GPU they agree exactly, on DDP
// (comm stream) and DataParallel (copies) traces alike.
TEST(DeviceBusy, WholeTraceBreakdownAgreesWithTraceStats) {
  const std::filesystem::path dir = testing::scratch_dir();
  testing::write_ddp_trace(dir / "ddp.jsonl");
  testing::write_dp_trace(dir / "dp.jsonl");
  for (const char* name : {"ddp.jsonl", "dp.jsonl"}) {
    const trace::TraceData data = trace::read_trace(dir / name, {.strict = true});
    const trace::TraceStats stats = trace::compute_stats(data);
    const ReplayModel model(data);
    int compared = 0;
    for (const trace::DeviceStats& s : stats.devices) {
      int d = -1;
      for (size_t i = 0; i < model.devices().size(); ++i)
        if (model.devices()[i].id == s.dev) d = static_cast<int>(i);
      ASSERT_GE(d, 0) << name << ": device " << s.dev;
      const TimeBreakdown b = model.breakdown(d, model.begin_ns(), model.end_ns());
      EXPECT_EQ(b.compute_ns, s.compute_ns) << name << " " << model.devices()[d].name;
      EXPECT_EQ(b.comm_ns, s.comm_ns) << name << " " << model.devices()[d].name;
      EXPECT_EQ(b.exposed_comm_ns, s.exposed_comm_ns) << name << " " << model.devices()[d].name;
      EXPECT_DOUBLE_EQ(b.overlap_pct(), s.overlap_pct) << name << " " << model.devices()[d].name;
      if (s.comm_ns > 0) ++compared;
    }
    EXPECT_GE(compared, 2) << name << ": GPUs that communicate";
  }
}

}  // namespace
}  // namespace dpscope::viz
