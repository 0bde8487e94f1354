// Event filters and chapter triggers (lesson/filter.hpp) on a small real trace: a 2-step DDP run
// on 2 simulated GPUs made with run_training. Expected times are found by scanning the events
// independently of the filter code.
#include "dpscope/lesson/filter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

using trace::Event;
using trace::EventName;
using trace::EventType;

class RealTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("dpscope-lesson-filter-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    data_ = new trace::TraceData(testing::real_ddp_trace(*dir_ / "ddp.jsonl"));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete data_;
    delete dir_;
  }
  static const trace::TraceData& data() { return *data_; }

  static EventFilter filter(std::initializer_list<std::pair<std::string, FilterValue>> keys) {
    EventFilter f;
    for (const auto& [key, value] : keys) EXPECT_EQ(set_filter_key(f, key, value), "") << key;
    return f;
  }

  // The earliest event (by ts, then rank) for which `pred` holds, scanned by hand.
  template <typename Pred>
  static const Event* earliest(Pred pred) {
    const Event* best = nullptr;
    for (const Event& e : data().events)
      if (pred(e) && (!best || e.ts_ns < best->ts_ns || (e.ts_ns == best->ts_ns && e.rank < best->rank)))
        best = &e;
    return best;
  }

 private:
  static inline std::filesystem::path* dir_ = nullptr;
  static inline trace::TraceData* data_ = nullptr;
};

TEST_F(RealTrace, TransferAtARingStepFiresAtThatTransfer) {
  const auto hits = matching_events(data(), filter({{"type", "transfer"}, {"algo_step", 1}, {"rank", 0}}));
  const Event* want = earliest([&](const Event& e) {
    return e.type == EventType::kTransfer && data().transfer(e).algo_step == 1 && e.rank == 0;
  });
  ASSERT_NE(want, nullptr);
  ASSERT_FALSE(hits.empty());
  EXPECT_EQ(hits.front(), want);
  EXPECT_EQ(data().str(data().transfer(*hits.front()).algo), "ring");
  // Two ranks: a ring all-reduce has 2 (N - 1) = 2 steps, so algo_step 1 is the all-gather.
  EXPECT_EQ(data().str(hits.front()->name), "ring all-gather");
}

TEST_F(RealTrace, NthGradReadyOfAStepIsTheNthInTimeOrder) {
  std::vector<const Event*> ready;
  for (const Event& e : data().events)
    if (e.known == EventName::kGradReady && e.step == 1) ready.push_back(&e);
  std::stable_sort(ready.begin(), ready.end(), [](const Event* a, const Event* b) {
    return a->ts_ns != b->ts_ns ? a->ts_ns < b->ts_ns : a->rank < b->rank;
  });
  ASSERT_EQ(ready.size(), 8u);  // 4 parameters (two Linear layers) on 2 ranks
  const auto hits = matching_events(data(), filter({{"name", "grad_ready"}, {"step", 1}, {"nth", 2}}));
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits.front(), ready[1]);
  EXPECT_TRUE(matching_events(data(), filter({{"name", "grad_ready"}, {"step", 1}, {"nth", 9}})).empty());
}

TEST_F(RealTrace, CollectivesDuringBackwardAreTheGradientAllReduces) {
  const auto hits = matching_events(data(), filter({{"category", "collective"}, {"phase", "backward"}}));
  ASSERT_FALSE(hits.empty());
  for (const Event* e : hits) {
    EXPECT_EQ(e->phase, Phase::kBackward);
    EXPECT_TRUE(data().str(e->name).starts_with("all_reduce ring")) << data().str(e->name);
  }
  // Before training (step -1) DDP's construction collectives run in phase "none".
  EXPECT_FALSE(matching_events(data(), filter({{"category", "collective"}, {"phase", "none"}})).empty());
}

TEST_F(RealTrace, HitsAreInTimeOrder) {
  const auto hits = matching_events(data(), filter({{"type", "transfer"}}));
  ASSERT_GT(hits.size(), 2u);
  EXPECT_TRUE(std::is_sorted(hits.begin(), hits.end(),
                             [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; }));
}

TEST_F(RealTrace, NamePrefixAndFixedNames) {
  const size_t bucket_launched = matching_events(data(), filter({{"name", "bucket_launched"}})).size();
  EXPECT_EQ(bucket_launched,
            matching_events(data(), filter({{"name", "bucket_launched"}, {"type", "instant"}})).size());
  EXPECT_GT(bucket_launched, 0u);
  for (const Event* e : matching_events(data(), filter({{"name", "broadcast*"}})))
    EXPECT_TRUE(data().str(e->name).starts_with("broadcast"));
  EXPECT_TRUE(matching_events(data(), filter({{"name", "no such event"}})).empty());
}

TEST_F(RealTrace, BucketAndParamKeysReadTheArgs) {
  const auto done = matching_events(data(), filter({{"name", "bucket_done"}, {"bucket", 0}, {"rank", 1}}));
  ASSERT_FALSE(done.empty());
  EXPECT_EQ(data().arg(*done.front(), "bucket"), 0.0);
  const auto grads =
      matching_events(data(), filter({{"name", "grad"}, {"param", 3}, {"when", "after_reduce"}}));
  ASSERT_FALSE(grads.empty());
  for (const Event* e : grads) {
    EXPECT_EQ(e->type, EventType::kValues);
    EXPECT_EQ(data().values[static_cast<size_t>(e->payload)].param, 3);
  }
}

TEST(FilterKeys, EachBadKeyOrValueIsOneReason) {
  EventFilter f;
  EXPECT_EQ(set_filter_key(f, "rnk", int64_t{0}),
            "unknown key 'rnk' (expected one of: type, name, category, rank, step, phase, stream, algo, "
            "algo_step, chunk, coll, param, bucket, when, nth, at)");
  EXPECT_EQ(set_filter_key(f, "rank", std::string("zero")), "rank must be an integer, got 'zero'");
  EXPECT_EQ(set_filter_key(f, "type", int64_t{3}), "type must be an event type, got the number 3");
  EXPECT_EQ(
      set_filter_key(f, "category", std::string("kernels")),
      "category must be one of: compute, copy, comm, reduce, collective, optimizer, phase; got 'kernels'");
  EXPECT_EQ(set_filter_key(f, "stream", std::string("nccl")),
            "stream must be one of: compute, comm, copy; got 'nccl'");
  EXPECT_EQ(set_filter_key(f, "when", std::string("later")),
            "when must be one of: local, before_reduce, after_reduce, after_step; got 'later'");
  EXPECT_EQ(set_filter_key(f, "name", std::string("")), "name must not be empty");
  EXPECT_EQ(set_filter_key(f, "nth", int64_t{0}),
            "nth counts matches from 1 (the first), or from -1 (the last) backwards; got 0");
  EXPECT_EQ(set_filter_key(f, "nth", int64_t{-1}), "");  // the last match
  EXPECT_EQ(f.nth, -1);
}

TEST(FilterKeys, FixedNamesResolveToTheirEnum) {
  EventFilter f;
  ASSERT_EQ(set_filter_key(f, "name", std::string("grad_ready")), "");
  EXPECT_EQ(f.known_name, EventName::kGradReady);
  ASSERT_EQ(set_filter_key(f, "name", std::string("forward 0.Linear")), "");
  EXPECT_EQ(f.known_name, EventName::kOther);
}

}  // namespace
}  // namespace dpscope::lesson
