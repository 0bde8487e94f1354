// Comparing runs (visualizer/replay/compare.hpp, ui/compare_view.hpp) on single-device, DataParallel
// and DDP traces the runtime wrote: who each run is, its step time and throughput, the speedup over
// the run with the fewest GPUs, and the view taking the stage's place.
#include <gtest/gtest.h>

#include "dpscope/trace_tools/reader.hpp"
#include "replay/compare.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

struct LoadedRun {
  testing::LoadedTrace trace;
  RunSummary summary;
};

LoadedRun load(const std::filesystem::path& path) {
  LoadedRun r{testing::load_trace(path), {}};
  r.summary = summarize_run(*r.trace.model);
  return r;
}

TEST(CompareRuns, SummarizesSingleDpAndDdpRuns) {
  const auto dir = testing::scratch_dir();
  testing::write_single_trace(dir / "single.jsonl", 3);  // batch 16, one GPU
  testing::write_dp_trace(dir / "dp.jsonl", 4, 3, 16);   // batch 16 over 4 replicas
  testing::write_ddp_trace(dir / "ddp.jsonl", 4, 3, 4);  // 4 per rank: 16 in all
  const LoadedRun single = load(dir / "single.jsonl");
  const LoadedRun dp = load(dir / "dp.jsonl");
  const LoadedRun ddp = load(dir / "ddp.jsonl");
  EXPECT_EQ(single.summary.title, "single device · 1 GPU");
  EXPECT_EQ(dp.summary.title, "DataParallel (DP) · 4 GPUs");
  EXPECT_EQ(ddp.summary.title, "DistributedDataParallel (DDP) · 4 GPUs");
  EXPECT_EQ(single.summary.samples_per_step, 16);
  EXPECT_EQ(dp.summary.samples_per_step, 16);
  EXPECT_EQ(ddp.summary.samples_per_step, 16);
  for (const LoadedRun* r : {&single, &dp, &ddp}) {
    EXPECT_EQ(r->summary.steps, 3) << r->summary.title;
    EXPECT_GT(r->summary.step_ns, 0) << r->summary.title;
    EXPECT_LE(r->summary.step_ns, r->summary.duration_ns);
    ASSERT_FALSE(r->summary.phases.empty());
    for (size_t i = 1; i < r->summary.phases.size(); ++i)
      EXPECT_GE(r->summary.phases[i].t0_ns, r->summary.phases[i - 1].t1_ns);
    EXPECT_DOUBLE_EQ(speedup(r->summary, r->summary), 1.0);
  }
  // Same samples per step: the speedup is the ratio of step times.
  EXPECT_NEAR(speedup(ddp.summary, single.summary),
              static_cast<double>(single.summary.step_ns) / static_cast<double>(ddp.summary.step_ns), 1e-9);
  RunSummary unknown;
  EXPECT_EQ(speedup(unknown, single.summary), 0.0);
  // Runs of another model (another layer, a bench run without parameters) have no speedup over this
  // one: `--compare` of different models said "1.54x".
  RunSummary other = ddp.summary;
  other.model += "extra[4,4];";
  EXPECT_EQ(speedup(other, single.summary), 0.0);
  other.model.clear();
  EXPECT_EQ(speedup(other, single.summary), 0.0);
  EXPECT_FALSE(single.summary.model.empty());
  EXPECT_EQ(single.summary.model, ddp.summary.model);
}

}  // namespace
}  // namespace dpscope::viz
