// check_reduction (visualizer/replay/reduction_check.hpp) on traces the runtime wrote: DDP's
// all-reduce leaves the mean of the ranks' gradients, DataParallel's reduce-add their sum, and the
// no-average pitfall a sum where a mean belongs; before the reduction, no verdict.
#include <gtest/gtest.h>

#include "dpscope/trace_tools/reader.hpp"
#include "replay/reduction_check.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

using testing::load_trace;

TEST(ReductionCheck, DdpAveragesAndEveryColumnIsASampleOfTheTensor) {
  const auto path = testing::scratch_dir() / "ddp.jsonl";
  testing::write_ddp_trace(path, 4, 2, 4);
  const testing::LoadedTrace l = load_trace(path);
  const ReplayModel& m = *l.model;
  ASSERT_FALSE(m.reductions().empty());
  size_t checked = 0;
  for (const Reduction& r : m.reductions()) {
    if (r.before.size() != 4 || r.after.empty()) continue;
    const ReductionCheck before = check_reduction(m, r, m.after_event(m.position_of(r.before.back())), 4);
    EXPECT_TRUE(before.before);
    EXPECT_FALSE(before.reduced());
    const ReductionCheck done = check_reduction(m, r, m.end(), 4);
    ASSERT_TRUE(done.reduced());
    EXPECT_TRUE(done.is_mean) << "param " << r.param;
    EXPECT_FALSE(done.is_sum) << "param " << r.param;
    EXPECT_LE(done.columns.size(), 4u);
    EXPECT_GE(done.stride, 1);
    ++checked;
  }
  EXPECT_GE(checked, 6u);  // every parameter of the model, at least once
}

TEST(ReductionCheck, DataParallelSumsOntoGpuZero) {
  const auto path = testing::scratch_dir() / "dp.jsonl";
  testing::write_dp_trace(path, 4, 2, 16);
  const testing::LoadedTrace l = load_trace(path);
  const ReplayModel& m = *l.model;
  size_t checked = 0;
  for (const Reduction& r : m.reductions()) {
    const ReductionCheck done = check_reduction(m, r, m.end(), 4);
    if (!done.reduced() || done.rows.size() < 2) continue;
    EXPECT_TRUE(done.is_sum) << "param " << r.param;
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace dpscope::viz
