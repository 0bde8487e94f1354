// Trace statistics: compute, comm, exposed comm, idle and overlap per device and per step, from
// interval unions, checked on hand-made timelines whose answers are worked out in the comments.
#include "dpscope/trace_tools/stats.hpp"

#include <gtest/gtest.h>

#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using testing::header_line;

std::string span(int dev, int64_t step, const char* stream, int64_t ts, int64_t dur,
                 const char* cat = "compute") {
  return fmt::format(
      R"({{"type":"span","ts":{},"rank":0,"dev":{},"step":{},"phase":"backward","name":"s","cat":"{}","stream":"{}","dur":{}}})"
      "\n",
      ts, dev, step, cat, stream, dur);
}
std::string transfer(int dev, int64_t step, const char* stream, int64_t ts, int64_t dur) {
  return fmt::format(
      R"({{"type":"transfer","ts":{},"rank":0,"dev":{},"step":{},"phase":"backward","name":"t","stream":"{}","dur":{},"src":{},"dst":1,"bytes":8,"flow":1}})"
      "\n",
      ts, dev, step, stream, dur, dev);
}

// Device 0, step 0:
//   compute  [0,100) [150,300)                 → 100 + 150 = 250
//   comm     transfer [80,200), span [250,400) → 120 + 150 = 270, plus the copy below: 370
//   overlap  [80,100) [150,200) [250,300)      → 20 + 50 + 50 = 120
//   copy     [400,500)                         → 100 (data moving: part of comm), so the span is [0,500)
// busy = 250 + 370 - 120 = 500; exposed = 370 - 120 = 250; idle = 500 - 500 = 0; overlap 120/370.
const std::string kTimeline = header_line() + span(0, 0, "compute", 0, 100) +
                              span(0, 0, "compute", 150, 150) + transfer(0, 0, "comm", 80, 120) +
                              span(0, 0, "comm", 250, 150, "collective") + transfer(0, 0, "copy", 400, 100);

TEST(TraceStats, OverlapExposedCommAndIdleFromIntervalUnions) {
  const TraceStats stats = compute_stats(parse_trace(kTimeline));
  ASSERT_EQ(stats.devices.size(), 1u);
  const DeviceStats& d = stats.devices[0];
  EXPECT_EQ(d.dev, 0);
  EXPECT_EQ(d.begin_ns, 0);
  EXPECT_EQ(d.end_ns, 500);
  EXPECT_EQ(d.span_ns, 500);
  EXPECT_EQ(d.compute_ns, 250);
  EXPECT_EQ(d.comm_ns, 370);
  EXPECT_EQ(d.copy_ns, 100);
  EXPECT_EQ(d.busy_ns, 500);
  EXPECT_EQ(d.exposed_comm_ns, 250);
  EXPECT_EQ(d.idle_ns, 0);
  EXPECT_DOUBLE_EQ(d.overlap_pct, 100.0 * 120.0 / 370.0);
}

TEST(TraceStats, WithoutPerStepOnlyTheDevicesAreSummedAndAlike) {
  const TraceData data = parse_trace(kTimeline);
  const TraceStats all = compute_stats(data);
  const TraceStats devices = compute_stats(data, /*per_step=*/false);
  EXPECT_FALSE(all.steps.empty());
  EXPECT_TRUE(devices.steps.empty());
  ASSERT_EQ(devices.devices.size(), all.devices.size());
  EXPECT_EQ(devices.devices[0].comm_ns, all.devices[0].comm_ns);
  EXPECT_EQ(devices.devices[0].exposed_comm_ns, all.devices[0].exposed_comm_ns);
  EXPECT_EQ(devices.devices[0].copy_ns, all.devices[0].copy_ns);
}

TEST(TraceStats, NestedAndRepeatedSpansCountOnce) {
  // [10,20) with [12,15) nested and [10,20) again: compute is 10, not 23.
  const std::string text = header_line() + span(2, 0, "compute", 10, 10) + span(2, 0, "compute", 12, 3) +
                           span(2, 0, "compute", 10, 10);
  const TraceStats stats = compute_stats(parse_trace(text));
  ASSERT_EQ(stats.devices.size(), 1u);
  EXPECT_EQ(stats.devices[0].dev, 2);
  EXPECT_EQ(stats.devices[0].compute_ns, 10);
  EXPECT_EQ(stats.devices[0].busy_ns, 10);
  EXPECT_EQ(stats.devices[0].idle_ns, 0);
  EXPECT_EQ(stats.devices[0].comm_ns, 0);
  EXPECT_EQ(stats.devices[0].overlap_pct, 0.0) << "no comm: 0%, not NaN";
}

TEST(TraceStats, PhaseMarkerSpansAreNotWorkButWidenTheSpan) {
  // A "phase" span [0,1000) around one kernel [100,200): compute 100, idle 900.
  const std::string text =
      header_line() + span(0, 0, "compute", 0, 1000, "phase") + span(0, 0, "compute", 100, 100);
  const DeviceStats d = compute_stats(parse_trace(text)).devices.at(0);
  EXPECT_EQ(d.span_ns, 1000);
  EXPECT_EQ(d.compute_ns, 100);
  EXPECT_EQ(d.idle_ns, 900);
}

TEST(TraceStats, FullyHiddenAndFullyExposedComm) {
  // dev 0: comm [10,20) inside compute [0,100): 100% overlap. dev 2: comm after compute: 0%.
  const std::string text = header_line() + span(0, 0, "compute", 0, 100) + transfer(0, 0, "comm", 10, 10) +
                           span(2, 0, "compute", 0, 100) + transfer(2, 0, "comm", 100, 50);
  const TraceStats stats = compute_stats(parse_trace(text));
  ASSERT_EQ(stats.devices.size(), 2u);
  EXPECT_EQ(stats.devices[0].overlap_pct, 100.0);
  EXPECT_EQ(stats.devices[0].exposed_comm_ns, 0);
  EXPECT_EQ(stats.devices[0].busy_ns, 100);
  EXPECT_EQ(stats.devices[1].dev, 2);
  EXPECT_EQ(stats.devices[1].overlap_pct, 0.0);
  EXPECT_EQ(stats.devices[1].exposed_comm_ns, 50);
  EXPECT_EQ(stats.devices[1].busy_ns, 150);
  EXPECT_EQ(stats.devices[1].span_ns, 150);
}

TEST(TraceStats, PerStepBreakdownLeavesOutStepMinusOne) {
  // Step -1 (setup) [0,50); step 0 [100,200) compute + [150,250) comm; step 1 [300,310) compute.
  const std::string text = header_line() + span(0, -1, "compute", 0, 50) + span(0, 0, "compute", 100, 100) +
                           transfer(0, 0, "comm", 150, 100) + span(0, 1, "compute", 300, 10);
  const TraceStats stats = compute_stats(parse_trace(text));
  ASSERT_EQ(stats.steps.size(), 2u);
  EXPECT_EQ(stats.steps[0].step, 0);
  EXPECT_EQ(stats.steps[0].stats.span_ns, 150);
  EXPECT_EQ(stats.steps[0].stats.compute_ns, 100);
  EXPECT_EQ(stats.steps[0].stats.comm_ns, 100);
  EXPECT_EQ(stats.steps[0].stats.exposed_comm_ns, 50);
  EXPECT_EQ(stats.steps[0].stats.overlap_pct, 50.0);
  EXPECT_EQ(stats.steps[1].step, 1);
  EXPECT_EQ(stats.steps[1].stats.compute_ns, 10);
  EXPECT_EQ(stats.devices.at(0).compute_ns, 160) << "device totals include step -1";
  EXPECT_EQ(stats.devices.at(0).span_ns, 310);
}

TEST(TraceStats, FormatsATableWithOneRowPerDevice) {
  const TraceData data = parse_trace(kTimeline);
  const std::string table = format_stats(compute_stats(data), data);
  EXPECT_EQ(table,
            "device             span         busy      compute         comm  exposed comm         idle       "
            "  copy   overlap\n"
            "sim:0            500 ns       500 ns       250 ns       370 ns        250 ns         0 ns       "
            "100 ns     32.4%\n");
  const std::string with_steps = format_stats(compute_stats(data), data, /*per_step=*/true);
  EXPECT_NE(with_steps.find("\nstep/dev "), std::string::npos) << with_steps;
  EXPECT_NE(with_steps.find("\n0 sim:0 "), std::string::npos) << with_steps;
  EXPECT_EQ(format_stats(compute_stats(parse_trace(header_line())), data),
            "no spans or transfers in this trace\n");
}

TEST(TraceStats, DurationsPickAReadableUnit) {
  EXPECT_EQ(format_duration(850), "850 ns");
  EXPECT_EQ(format_duration(12345), "12.345 us");
  EXPECT_EQ(format_duration(1234000), "1.234 ms");
  EXPECT_EQ(format_duration(2500000000), "2.500 s");
}

}  // namespace
}  // namespace dpscope::trace
