// The DDP diagnosis a Document keeps for the Diagnosis panel (replay/diagnosis.hpp): the very
// findings of `dpscope trace stats` (trace::diagnose_ddp) for a constructed straggler and for a
// real PyTorch run recorded by dpscope_torch; none for DataParallel; and, for a live trace, computed
// again only when a step completed or the trace settled, at most once per min_interval.
#include <gtest/gtest.h>

#include <chrono>

#include "dpscope/trace_tools/ddp_diagnosis.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "replay/diagnosis.hpp"
#include "replay/document.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int64_t kUs = 1000;

TEST(DiagnosisCache, ADocumentGivesTheFindingsOfTraceStats) {
  const auto run = testing::scratch_dir() / "straggler";
  testing::write_straggler_directory(run, 4, 1, 300 * kUs);
  const auto doc = Document::open(run, {.strict = true});
  ASSERT_EQ(doc->error(), "");
  EXPECT_FALSE(doc->diagnosis().computed()) << "computed only when asked for";
  const DiagnosisCache* cache = doc->refresh_diagnosis(Clock::now());
  ASSERT_NE(cache, nullptr);
  EXPECT_TRUE(cache->has_findings());
  const trace::DdpDiagnosis expected = trace::diagnose_ddp(trace::read_trace(run, {.strict = true}));
  const trace::DdpDiagnosis& d = cache->diagnosis();
  EXPECT_EQ(trace::format_diagnosis(d, true), trace::format_diagnosis(expected, true));
  EXPECT_EQ(d.straggler.rank, 1);
  EXPECT_EQ(d.straggler.steps_late, 4);
  EXPECT_EQ(d.straggler.median_lead_ns, 300 * kUs);
  EXPECT_EQ(d.straggler.first_late_bucket, 1) << "bucket 1 holds layer 0's late gradients";
  EXPECT_NE(d.straggler.sentence.find("rank 1 is the straggler in 4 of 4 steps"), std::string::npos)
      << d.straggler.sentence;
  ASSERT_EQ(d.buckets.buckets.size(), 2u);
  EXPECT_EQ(cache->computations(), 1u);
  EXPECT_EQ(cache->diagnosed_step(), 3);
  // A finished file is never diagnosed again.
  doc->refresh_diagnosis(Clock::now() + 1h);
  EXPECT_EQ(cache->computations(), 1u);
}

TEST(DiagnosisCache, ARealPytorchRunNamesItsStragglerAndTheSetEpochPitfall) {
  const auto run = std::filesystem::path(DPSCOPE_TEST_DATA_DIR) / "dpscope-torch" / "straggler";
  const auto doc = Document::open(run, {.strict = true});
  ASSERT_EQ(doc->error(), "");
  const DiagnosisCache* cache = doc->refresh_diagnosis(Clock::now());
  ASSERT_NE(cache, nullptr);
  const trace::DdpDiagnosis& d = cache->diagnosis();
  EXPECT_EQ(d.straggler.rank, 1) << d.straggler.sentence;
  EXPECT_EQ(d.straggler.steps.size(), 8u);
  EXPECT_EQ(d.straggler.steps_late, 8) << "as tests/data/dpscope-torch/README.md says";
  EXPECT_GT(d.straggler.median_lead_ns, 25'000 * kUs) << "rank 1 sleeps 30 ms in every backward";
  EXPECT_EQ(d.epochs.repeated, (std::vector<int64_t>{1})) << d.epochs.sentence;
  EXPECT_TRUE(d.buckets.rebuilt);
}

TEST(DiagnosisCache, DataParallelAndSingleDeviceTracesHaveNoFindings) {
  const auto dir = testing::scratch_dir();
  testing::write_dp_trace(dir / "dp.jsonl", 2, 2);
  testing::write_single_trace(dir / "single.jsonl", 2);
  for (const char* name : {"dp.jsonl", "single.jsonl"}) {
    const auto doc = Document::open(dir / name, {.strict = true});
    const DiagnosisCache* cache = doc->refresh_diagnosis(Clock::now());
    ASSERT_NE(cache, nullptr) << name;
    EXPECT_TRUE(cache->computed()) << name;
    EXPECT_FALSE(cache->has_findings()) << name;
  }
}

// The throttle, on one TraceData whose generation the test bumps: nothing new, nothing computed;
// a completed step after min_interval, computed; the same step, only once the trace settled.
TEST(DiagnosisCache, ALiveTraceIsDiagnosedAgainOnlyWhenAStepCompletedOrItSettled) {
  const auto run = testing::scratch_dir() / "straggler";
  testing::write_straggler_directory(run, 2, 1, 300 * kUs);
  const trace::TraceData data = trace::read_trace(run, {.strict = true});
  const DiagnosisThrottle throttle{.min_interval = 500ms, .settle = 2000ms};
  const Clock::time_point t0 = Clock::now();
  DiagnosisCache cache;
  EXPECT_TRUE(cache.update(data, 1, 1, t0, throttle));
  EXPECT_FALSE(cache.update(data, 1, 1, t0 + 10s, throttle)) << "same generation: nothing was read";
  EXPECT_FALSE(cache.update(data, 2, 2, t0 + 100ms, throttle)) << "a new step, but within min_interval";
  EXPECT_TRUE(cache.update(data, 2, 2, t0 + 600ms, throttle)) << "a new step after min_interval";
  EXPECT_EQ(cache.diagnosed_step(), 2);
  EXPECT_FALSE(cache.update(data, 3, 2, t0 + 1500ms, throttle)) << "more events of the same step";
  EXPECT_TRUE(cache.update(data, 3, 2, t0 + 2700ms, throttle)) << "the same step, settled";
  EXPECT_EQ(cache.computations(), 3u);
  cache.reset();
  EXPECT_FALSE(cache.computed());
}

}  // namespace
}  // namespace dpscope::viz
