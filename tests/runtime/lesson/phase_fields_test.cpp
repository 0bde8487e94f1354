// The expression language's hierarchical all-reduce phases (rs_start_ns ... ag_end_ns: a span's ts
// plus its phase_* args) and `now_ns`, the chapter's moment: what lesson 12's chapters use to
// prove which phase their picture shows.
#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"
#include "dpscope/lesson/expression.hpp"
#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

// The hand trace plus one hierarchical all-reduce at ts 1000 lasting 800 ns whose phases are
// rs [0, 500), net [100, 700), ag [300, 800) from its start, and one ring all-reduce without phases.
trace::TraceData phased_trace() {
  const std::string text =
      testing::hand_trace_text() +
      R"({"type":"span","ts":1000,"rank":0,"dev":0,"step":1,"phase":"backward","name":"all_reduce hierarchical 64 B","cat":"collective","stream":"comm","dur":800,"args":{"coll":7,"op":"all_reduce","algo":"hierarchical","bytes":64,"phase_rs_start_ns":0,"phase_rs_dur_ns":500,"phase_net_start_ns":100,"phase_net_dur_ns":600,"phase_ag_start_ns":300,"phase_ag_dur_ns":500}})"
      "\n"
      R"({"type":"span","ts":2000,"rank":0,"dev":0,"step":1,"phase":"backward","name":"all_reduce ring 64 B","cat":"collective","stream":"comm","dur":100,"args":{"coll":8,"op":"all_reduce","algo":"ring","bytes":64}})"
      "\n";
  return trace::parse_trace(text, "phased.jsonl");
}

double eval_at(const std::string& text, std::optional<int64_t> now_ns) {
  return Expression::parse(text).evaluate(phased_trace(), EvalContext{.now_ns = now_ns});
}

TEST(PhaseFields, AreTheSpansStartPlusItsPhaseOffsets) {
  EXPECT_EQ(eval_at("first(rs_start_ns, category=collective, step=1)", std::nullopt), 1000.0);
  EXPECT_EQ(eval_at("first(rs_end_ns, category=collective, step=1)", std::nullopt), 1500.0);
  EXPECT_EQ(eval_at("first(net_start_ns, category=collective, step=1)", std::nullopt), 1100.0);
  EXPECT_EQ(eval_at("first(net_end_ns, category=collective, step=1)", std::nullopt), 1700.0);
  EXPECT_EQ(eval_at("first(ag_start_ns, category=collective, step=1)", std::nullopt), 1300.0);
  EXPECT_EQ(eval_at("first(ag_end_ns, category=collective, step=1)", std::nullopt), 1800.0);
  // The ring all-reduce has no phases: only the hierarchical one counts.
  EXPECT_EQ(eval_at("max(net_end_ns, category=collective)", std::nullopt), 1700.0);
}

TEST(PhaseFields, NowIsTheChaptersMomentAndProvesWhichPhaseRuns) {
  // 50 ns into the all-reduce: only the reduce-scatter runs.
  EXPECT_EQ(eval_at("first(net_start_ns, category=collective, at=running) > now_ns", 1050), 1.0);
  EXPECT_EQ(eval_at("first(rs_end_ns, category=collective, at=running) > now_ns", 1050), 1.0);
  // 600 ns in: the reduce-scatter is over, network and all-gather overlap.
  EXPECT_EQ(eval_at("first(rs_end_ns, category=collective, at=running) <= now_ns", 1600), 1.0);
  EXPECT_EQ(eval_at("first(ag_start_ns, category=collective, at=running) <= now_ns", 1600), 1.0);
  EXPECT_EQ(eval_at("now_ns - first(ts_ns, category=collective, at=running)", 1600), 600.0);
  EXPECT_TRUE(Expression::parse("now_ns").needs_moment());
  EXPECT_FALSE(Expression::parse("first(net_end_ns, category=collective)").needs_moment());
}

TEST(PhaseFields, ErrorsSayWhy) {
  try {
    eval_at("now_ns", std::nullopt);
    ADD_FAILURE() << "now_ns without a moment was computed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot be computed: now_ns is a chapter's moment, and there is none here");
  }
  try {
    eval_at("first(net_start_ns, category=collective, coll=8)", std::nullopt);
    ADD_FAILURE() << "a ring all-reduce's phase was computed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot be computed: none of the 1 events matching 'category=collective, coll=8' has a "
              "'net_start_ns'");
  }
}

}  // namespace
}  // namespace dpscope::lesson
