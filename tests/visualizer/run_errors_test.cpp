// A failed run in the replay model (replay/run_errors.hpp): the `error` instants the runtime writes
// on every rank that stops, in time order, "happened" at a cursor only from their moment on, and
// the banner's text naming the first rank, its step and the reason (lesson 13).
#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"
#include "dpscope/train/train.hpp"
#include "replay/run_errors.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

TEST(RunErrors, AMismatchedCollectiveRunEndsWithOneErrorPerRankInTimeOrder) {
  const std::filesystem::path trace = testing::scratch_dir() / "mismatch.jsonl";
  testing::write_failed_ddp_trace(trace, 3, "4-8-2", 8);

  const testing::LoadedTrace loaded = testing::load_trace(trace);
  const ReplayModel& model = *loaded.model;
  const RunErrors& errors = model.run_errors();
  ASSERT_EQ(errors.marks.size(), 3u);
  for (size_t i = 1; i < errors.marks.size(); ++i)
    EXPECT_LE(errors.marks[i - 1].ts_ns, errors.marks[i].ts_ns);
  const RunErrorMark& first = errors.marks.front();
  EXPECT_EQ(first.rank, 0) << "rank 0 stops first, in its lone all-reduce after step 1";
  EXPECT_EQ(first.step, 1);  // the trace's 0-based field; the headline counts from 1

  EXPECT_EQ(errors.happened(model.at_time(first.ts_ns - 1)), 0u);
  EXPECT_EQ(errors.happened(model.at_time(first.ts_ns)), 1u);
  EXPECT_EQ(errors.happened(model.end()), 3u);
  EXPECT_EQ(errors.stopped_ranks(model.end()).size(), 3u);

  const RunErrorText text = run_error_text(first, 3);
  EXPECT_EQ(text.headline, "Run failed: rank 0 stopped at step 2 (3 ranks stopped)");
  EXPECT_TRUE(text.reason.starts_with("Detected mismatch between collectives on ranks. Rank 0 is running"))
      << text.reason;
}

TEST(RunErrors, BannerTextDropsTheSpawnPrefixAndSaysWhenThereIsNoReason) {
  RunErrorMark mark{.rank = 2, .step = -1, .message = "rank 2 failed: out of memory"};
  EXPECT_EQ(run_error_text(mark, 1).headline, "Run failed: rank 2 stopped before training");
  EXPECT_EQ(run_error_text(mark, 1).reason, "out of memory");
  mark.message = "";
  EXPECT_EQ(run_error_text(mark, 1).reason, "(the trace gives no reason)");
}

TEST(RunErrors, ARunThatEndsNormallyHasNone) {
  const std::string text =
      R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{},"devices":[{"id":0,"name":"sim:0","kind":"sim","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0}],"links":[],"params":[],"buckets":[]})"
      "\n"
      R"({"type":"instant","ts":5,"rank":0,"dev":0,"step":0,"phase":"backward","name":"grad_ready","args":{"param":0}})"
      "\n";
  const trace::TraceData data = trace::parse_trace(text);
  const ReplayModel model(data);
  EXPECT_TRUE(model.run_errors().empty());
  EXPECT_EQ(model.run_errors().happened(model.end()), 0u);
}

}  // namespace
}  // namespace dpscope::viz
