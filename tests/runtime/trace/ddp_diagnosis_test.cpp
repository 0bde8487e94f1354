// The DDP diagnosis (trace_tools/ddp_diagnosis.hpp) on traces written here line by line: two
// ranks of a 2-512-10 MLP's DDP, whose gradient-ready times, all-reduces, buckets and samples each
// test sets, so every expected number follows from the construction.
#include "dpscope/trace_tools/ddp_diagnosis.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dpscope/base/format_bytes.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/trace_tools/stats.hpp"
#include "support/cli.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

constexpr int64_t kUs = 1000;
constexpr int64_t kStepNs = 1000 * kUs;  // every step lasts 1 ms on every rank
constexpr int64_t kAllReduceNs = 100 * kUs;

struct Scenario {
  int steps = 4;
  int late_rank = 1;
  int64_t delay_ns = 0;             // added to late_rank's gradients of layer 0 (params 1 and 0)
  std::vector<int64_t> late_steps;  // the steps with the delay (empty: every step)
  int64_t start_delay_ns = 0;       // late_rank begins every step this much later
  // late_rank sees each step's last all-reduce complete this much later than the other rank, and so
  // begins every step after the first this much later too (the lag carried, not a delay of its own)
  int64_t done_lag_ns = 0;
  bool small_model = false;  // limits of 1 MiB and 25 MiB: one bucket, never rebuilt
  int steps_per_epoch = 2;
  bool epochs_written = true;  // samples carry "epoch"
  bool set_epoch = true;       // false: every epoch repeats epoch 0's order
  bool shuffle = true;
};

// Params: 0.weight [512,2] 4096 B, 0.bias 2048 B, 2.weight [10,512] 20480 B, 2.bias 40 B; the run's
// limits 0.01 MiB (first bucket) and 0.02 MiB (cap). Step 0 uses one bucket of all four; a rebuild
// in step 1 gives bucket 0 = [3, 2] (20520 B) and bucket 1 = [1, 0] (6144 B), as DDP rebuilds in
// gradient-ready order.
std::string header(bool small_model = false) {
  return R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated",)" +
         std::string(
             small_model
                 ? R"("run":{"mode":"ddp","devices":2},"devices":[)"
                 : R"("run":{"mode":"ddp","devices":2,"bucket_mb":0.02,"first_bucket_mb":0.01},"devices":[)") +
         R"({"id":0,"name":"sim:0","kind":"sim","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0},)"
         R"({"id":1,"name":"sim:1","kind":"sim","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0}],)"
         R"("links":[],"params":[{"index":0,"name":"0.weight","shape":[512,2],"bytes":4096},)"
         R"({"index":1,"name":"0.bias","shape":[512],"bytes":2048},)"
         R"({"index":2,"name":"2.weight","shape":[10,512],"bytes":20480},)"
         R"({"index":3,"name":"2.bias","shape":[10],"bytes":40}],"buckets":[]})"
         "\n";
}

std::string event(const std::string& type, int64_t ts, int rank, int64_t step, const char* phase,
                  const std::string& rest) {
  return fmt::format(R"({{"type":"{}","ts":{},"rank":{},"dev":{},"step":{},"phase":"{}",{}}})", type, ts,
                     rank, rank, step, phase, rest) +
         "\n";
}

// Rank `rank`'s sample indices in one step: 4 of 16, shuffled by epoch unless set_epoch is missing.
std::vector<int64_t> indices(const Scenario& s, int rank, int64_t step) {
  const int64_t epoch = s.set_epoch ? step / s.steps_per_epoch : 0;
  const int64_t batch = step % s.steps_per_epoch;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t position = 8 * rank + 4 * batch + i;
    out.push_back(s.shuffle ? (7 * position + 5 * epoch + 3) % 16 : position);
  }
  return out;
}

std::string ddp_trace(const Scenario& s) {
  std::string text = header(s.small_model);
  const std::string one_bucket =
      R"("reason":"initial","buckets":[{"id":0,"params":[0,1,2,3],"bytes":26664}])";
  const std::string rebuilt =
      R"("reason":"rebuilt","buckets":[{"id":0,"params":[3,2],"bytes":20520},{"id":1,"params":[1,0],"bytes":6144}])";
  for (int rank = 0; rank < 2; ++rank) text += event("buckets", 0, rank, -1, "none", one_bucket);
  for (int64_t step = 0; step < s.steps; ++step) {
    const int64_t base = step * kStepNs;
    // Layer 0's last gradient, on each rank; bucket 1's all-reduce can only finish after both.
    const bool late_step = s.late_steps.empty() ||
                           std::find(s.late_steps.begin(), s.late_steps.end(), step) != s.late_steps.end();
    const int64_t step_delay = late_step ? s.delay_ns : 0;
    const int64_t late_shift = s.start_delay_ns + (step > 0 ? s.done_lag_ns : 0);
    const int64_t late_end = base + 700 * kUs + step_delay + late_shift;
    for (int rank = 0; rank < 2; ++rank) {
      const int64_t delay = rank == s.late_rank ? step_delay : 0;
      const int64_t rank_base = base + (rank == s.late_rank ? late_shift : 0);
      if (step == 1 && !s.small_model) text += event("buckets", base, rank, 1, "forward", rebuilt);
      std::string samples = fmt::format(R"("indices":[{}])", fmt::join(indices(s, rank, step), ","));
      if (s.epochs_written) samples += fmt::format(R"(,"epoch":{})", step / s.steps_per_epoch);
      text += event("samples", rank_base, rank, step, "data", samples);
      text += event("span", rank_base, rank, step, "forward",
                    R"("name":"forward","cat":"compute","stream":"compute","dur":200000)");
      auto ready = [&](int param, int64_t ts) {
        text += event("instant", ts, rank, step, "backward",
                      fmt::format(R"("name":"grad_ready","args":{{"param":{}}})", param));
      };
      auto all_reduce = [&](int64_t ts, int64_t dur) {
        text += event("span", ts, rank, step, "backward",
                      fmt::format(R"("name":"all_reduce ring","cat":"collective","stream":"comm","dur":{},)"
                                  R"("args":{{"op":"all_reduce","bytes":6144}})",
                                  dur));
      };
      ready(3, rank_base + 300 * kUs);
      ready(2, rank_base + 400 * kUs);
      if (step > 0) all_reduce(rank_base + 410 * kUs, kAllReduceNs);  // bucket 0, hidden behind layer 0
      ready(1, rank_base + 600 * kUs + delay);
      ready(0, rank_base + 700 * kUs + delay);
      // The last all-reduce starts at this rank's launch and ends once the later rank's data came.
      const int64_t launch = rank_base + 710 * kUs + delay;
      all_reduce(launch,
                 late_end + 10 * kUs + kAllReduceNs + (rank == s.late_rank ? s.done_lag_ns : 0) - launch);
      text += event("span", rank_base + 900 * kUs, rank, step, "optimizer",
                    R"("name":"optimizer.step SGD","cat":"optimizer","stream":"compute","dur":100000)");
    }
  }
  return text;
}

DdpDiagnosis diagnose(const Scenario& s) { return diagnose_ddp(parse_trace(ddp_trace(s))); }

TEST(DdpDiagnosis, ARankDelayedOnPurposeIsNamedWithItsLead) {
  const DdpDiagnosis d = diagnose({.delay_ns = 300 * kUs});
  ASSERT_EQ(d.straggler.steps.size(), 4u);
  EXPECT_EQ(d.straggler.rank, 1);
  EXPECT_EQ(d.straggler.steps_late, 4);
  EXPECT_EQ(d.straggler.median_lead_ns, 300 * kUs);
  // Bucket 0 (params 3, 2) is on time; bucket 1 (params 1, 0) waits for rank 1.
  EXPECT_EQ(d.straggler.first_late_bucket, 1);
  const StepLateness& step2 = d.straggler.steps[2];
  ASSERT_EQ(step2.buckets.size(), 2u);
  EXPECT_FALSE(step2.buckets[0].lateness.above_noise);
  EXPECT_EQ(step2.buckets[0].lateness.lead_ns, 0);
  EXPECT_EQ(step2.buckets[1].lateness.latest_rank, 1);
  EXPECT_EQ(step2.buckets[1].lateness.lead_ns, 300 * kUs);
  EXPECT_EQ(
      d.straggler.sentence,
      fmt::format("rank 1 is the straggler in 4 of 4 steps: its last gradient is ready {} after rank 0's "
                  "(median; the all-reduce makes every rank's backward equally long, so per-rank step "
                  "times cannot show this). It starts its steps on time: the delay arises in its forward and "
                  "backward. "
                  "Bucket 1 is the first whose all-reduce waits for it",
                  format_duration(300 * kUs)));
}

TEST(DdpDiagnosis, ARankThatStartsItsStepsLateIsTheStragglerAndTheSentenceSaysWhere) {
  const DdpDiagnosis d = diagnose({.start_delay_ns = 200 * kUs});
  EXPECT_EQ(d.straggler.rank, 1);
  EXPECT_EQ(d.straggler.median_lead_ns, 200 * kUs);
  EXPECT_EQ(d.straggler.median_start_lead_ns, 200 * kUs);
  EXPECT_EQ(d.straggler.median_work_lead_ns, 0);
  EXPECT_NE(
      d.straggler.sentence.find(fmt::format(
          ". It starts its steps {} later: the delay arises before forward (data loading, or its previous "
          "step ending later), not in its forward and backward",
          format_duration(200 * kUs))),
      std::string::npos)
      << d.straggler.sentence;
}

TEST(DdpDiagnosis, IdenticalRanksNameNoStraggler) {
  const DdpDiagnosis d = diagnose({.delay_ns = 0});
  EXPECT_EQ(d.straggler.rank, -1);
  EXPECT_EQ(d.straggler.sentence,
            "no straggler: in all 4 steps the ranks' last gradients were ready within noise of each other "
            "(largest lead 0 ns; noise is 5 % of the step plus the clocks' uncertainty)");
}

TEST(DdpDiagnosis, ALeadWithinFivePercentOfTheStepIsNoise) {
  // Steps run from their samples to the optimizer's end, 1 ms (the delayed all-reduce ends before it).
  const DdpDiagnosis d = diagnose({.delay_ns = 40 * kUs});
  EXPECT_EQ(d.straggler.rank, -1);
  ASSERT_FALSE(d.straggler.steps.empty());
  EXPECT_EQ(d.straggler.steps[0].backward.lead_ns, 40 * kUs);
  EXPECT_EQ(d.straggler.steps[0].noise_ns, 50 * kUs);
  EXPECT_NE(d.straggler.sentence.find("no straggler"), std::string::npos);
}

// Ranks leave a collective one after another: a rank that begins each step a little later (within
// noise) and whose last gradient is later by that much and a little more is not late. Only the lead
// that arose within the step is compared with the noise; the same late start with a delay of its own
// above noise is named.
TEST(DdpDiagnosis, ALateStartWithinNoiseIsTheCollectivesOrderNotLateness) {
  // Steps of about 1 ms: noise 5 % of it. Rank 1 starts 40 us late, its gradients a further 30 us.
  const DdpDiagnosis order = diagnose({.delay_ns = 30 * kUs, .start_delay_ns = 40 * kUs});
  ASSERT_FALSE(order.straggler.steps.empty());
  const StepLateness& step = order.straggler.steps[0];
  EXPECT_EQ(step.backward.latest_rank, 1);
  EXPECT_EQ(step.start_lead_ns, 40 * kUs);
  EXPECT_GT(step.backward.lead_ns, step.noise_ns);                       // 70 us in all: above noise,
  EXPECT_LT(step.backward.lead_ns - step.start_lead_ns, step.noise_ns);  // but 30 us arose in the step
  EXPECT_FALSE(step.backward.above_noise);
  EXPECT_EQ(order.straggler.rank, -1) << order.straggler.sentence;
  // The same late start, and a delay of its own above noise: named.
  const DdpDiagnosis late = diagnose({.delay_ns = 200 * kUs, .start_delay_ns = 40 * kUs});
  EXPECT_EQ(late.straggler.rank, 1) << late.straggler.sentence;
  EXPECT_TRUE(late.straggler.steps[0].backward.above_noise);
}

// The ranks also see a collective complete one after another: a rank that learns each step's last
// all-reduce is done later than the other (gloo's receiving rank, by a message's transfer) begins
// the next step that much later, every step, beyond the noise, without a delay of its own. That
// carried lag is not lateness; a late start beyond it (plus noise) still is.
TEST(DdpDiagnosis, ALateStartCarriedFromThePreviousAllReducesCompletionIsNotLateness) {
  // Steps of about 1 ms (noise about 55 us); rank 1 sees the last all-reduce end 200 us later.
  const DdpDiagnosis carried = diagnose({.done_lag_ns = 200 * kUs});
  ASSERT_EQ(carried.straggler.steps.size(), 4u);
  const StepLateness& step = carried.straggler.steps[1];
  EXPECT_EQ(step.backward.latest_rank, 1);
  EXPECT_EQ(step.start_lead_ns, 200 * kUs);
  EXPECT_GT(step.start_lead_ns, step.noise_ns);  // beyond noise, so only the carry excuses it
  EXPECT_FALSE(step.backward.above_noise);
  EXPECT_EQ(carried.straggler.rank, -1) << carried.straggler.sentence;
  // The same carry and a further 300 us of late start (slow data loading): named, by its start.
  const DdpDiagnosis slow_start = diagnose({.start_delay_ns = 300 * kUs, .done_lag_ns = 200 * kUs});
  EXPECT_EQ(slow_start.straggler.rank, 1) << slow_start.straggler.sentence;
  EXPECT_TRUE(slow_start.straggler.steps[1].backward.above_noise);
  // And a delay of its own in backward on top of the carry: named.
  const DdpDiagnosis slow_backward = diagnose({.delay_ns = 300 * kUs, .done_lag_ns = 200 * kUs});
  EXPECT_EQ(slow_backward.straggler.rank, 1) << slow_backward.straggler.sentence;
}

TEST(DdpDiagnosis, ClockUncertaintyRaisesTheNoise) {
  TraceData data = parse_trace(ddp_trace({.delay_ns = 300 * kUs}));
  data.ranks = {{.rank = 0}, {.rank = 1, .clock_uncertainty_ns = 400 * kUs}};
  const DdpDiagnosis d = diagnose_ddp(data);
  EXPECT_EQ(d.straggler.steps[0].noise_ns, 1110 * kUs / 20 + 400 * kUs);  // 5 % of the step + 400 us
  EXPECT_EQ(d.straggler.rank, -1);
}

TEST(DdpDiagnosis, ARankLateInFewerThanHalfTheStepsIsNoConsistentStraggler) {
  const DdpDiagnosis d = diagnose({.delay_ns = 300 * kUs, .late_steps = {3}});
  EXPECT_EQ(d.straggler.rank, -1);
  EXPECT_EQ(d.straggler.sentence,
            "no consistent straggler: the rank whose last gradient comes last by more than the noise changes "
            "from step to step (rank 1 in 1 of 4 steps)");
}

TEST(DdpDiagnosis, ARankLateInHalfTheStepsIsNotNamedAsChanceMakesThatCommon) {
  const DdpDiagnosis d = diagnose({.delay_ns = 300 * kUs, .late_steps = {1, 3}});
  EXPECT_EQ(d.straggler.rank, -1);
  EXPECT_EQ(d.straggler.sentence,
            "no consistent straggler: the rank whose last gradient comes last by more than the noise changes "
            "from step to step (rank 1 in 2 of 4 steps)");
}

TEST(DdpDiagnosis, ARankLateInThreeStepsOfFourIsNamed) {
  const DdpDiagnosis d = diagnose({.delay_ns = 300 * kUs, .late_steps = {1, 2, 3}});
  EXPECT_EQ(d.straggler.rank, 1);
  EXPECT_EQ(d.straggler.steps_late, 3);
  EXPECT_EQ(d.straggler.sentence.rfind("rank 1 is the straggler in 3 of 4 steps: ", 0), 0u)
      << d.straggler.sentence;
}

TEST(DdpDiagnosis, ExposedCommIsTheAllReduceAfterTheLastGradientOnTheLateRank) {
  const DdpDiagnosis d = diagnose({.delay_ns = 300 * kUs});
  // Step 0 has one all-reduce; steps 1-3 two: 100 us hidden (bucket 0), 100 us after the last
  // gradient (bucket 1) on rank 1, whose gradients came last. Rank 0's waits for rank 1 are not counted.
  ASSERT_EQ(d.exposed.steps.size(), 4u);
  EXPECT_EQ(d.exposed.steps[1].rank, 1);
  EXPECT_EQ(d.exposed.steps[1].all_reduce_ns, 2 * kAllReduceNs);
  EXPECT_EQ(d.exposed.steps[1].exposed_ns, kAllReduceNs);
  EXPECT_EQ(d.exposed.steps[0].all_reduce_ns, kAllReduceNs);
  EXPECT_EQ(d.exposed.median_all_reduce_ns, 2 * kAllReduceNs);
  EXPECT_EQ(d.exposed.median_exposed_ns, kAllReduceNs);
  EXPECT_EQ(
      d.exposed.sentence,
      fmt::format("backward left {} of {} of all-reduce exposed (50 %; median over 4 steps, on the rank "
                  "whose gradients came last: the all-reduce time after its last gradient was ready, when "
                  "no backward compute is left to hide it). The last bucket's all-reduce (bucket 1) "
                  "accounts for {} of it: it cannot start before its last gradient, the last of backward",
                  format_duration(kAllReduceNs), format_duration(2 * kAllReduceNs),
                  format_duration(kAllReduceNs)));
}

TEST(DdpDiagnosis, BucketsAreExplainedAgainstTheirLimits) {
  const DdpDiagnosis d = diagnose({});
  const BucketFinding& b = d.buckets;
  EXPECT_DOUBLE_EQ(b.cap_mb, 0.02);
  EXPECT_DOUBLE_EQ(b.first_mb, 0.01);
  EXPECT_TRUE(b.rebuilt);
  EXPECT_EQ(b.rebuilt_step, 1);
  EXPECT_EQ(b.initial_buckets, 1u);
  ASSERT_EQ(b.buckets.size(), 2u);
  const uint64_t first = static_cast<uint64_t>(0.01 * 1024 * 1024);
  const uint64_t cap = static_cast<uint64_t>(0.02 * 1024 * 1024);
  EXPECT_EQ(b.buckets[0].limit_bytes, first);
  EXPECT_EQ(b.buckets[1].limit_bytes, cap);
  ASSERT_EQ(b.sentences.size(), 3u);
  EXPECT_NE(
      b.sentences[0].find("DDP began with 1 bucket and rebuilt the assignment in step 1, in the order the "
                          "gradients became ready"),
      std::string::npos)
      << b.sentences[0];
  EXPECT_NE(b.sentences[0].find("bucket_size_limits = [sys.maxsize]"), std::string::npos);
  EXPECT_EQ(
      b.sentences[1],
      fmt::format("bucket 0: {} in 2 parameters (2.bias, 2.weight): 2.weight ({}) took it past the first "
                  "bucket's own {} limit (first_bucket_mb), which closed it",
                  format_bytes(20520), format_bytes(20480), format_bytes(first)));
  EXPECT_EQ(b.sentences[2],
            fmt::format("bucket 1: {} in 2 parameters (0.bias, 0.weight): the parameters left "
                        "over, under the {} cap (bucket_cap_mb)",
                        format_bytes(6144), format_bytes(cap)));
}

// A real PyTorch run with find_unused_parameters=True (which 1.13 never rebuilds): DDP fills its
// first assignment in parameter order, the first bucket filled up to first_bucket_mb, and reverses
// it. The diagnosis said "filled in reverse parameter order" and blamed the cap for the bucket the
// first-bucket limit closed (PyTorch's bucket_sizes here: "336, 1584000").
TEST(DdpDiagnosis, PyTorchsFirstAssignmentIsExplainedInParameterOrderThenReversed) {
  const std::string text =
      R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"measured",)"
      R"("run":{"mode":"ddp","source":"dpscope_torch","bucket_cap_mb":0.05,"first_bucket_mb":1.0,)"
      R"("find_unused_parameters":true},"devices":[)"
      R"({"id":0,"name":"cpu:0","kind":"cpu","hardware":"","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0}],)"
      R"("links":[],"params":[{"index":0,"name":"0.weight","shape":[12000,16],"bytes":768000},)"
      R"({"index":1,"name":"0.bias","shape":[12000],"bytes":48000},)"
      R"({"index":2,"name":"2.weight","shape":[16,12000],"bytes":768000},)"
      R"({"index":3,"name":"2.bias","shape":[16],"bytes":64},{"index":4,"name":"4.weight","shape":[4,16],"bytes":256},)"
      R"({"index":5,"name":"4.bias","shape":[4],"bytes":16}],)"
      R"("buckets":[{"id":0,"params":[3,4,5],"bytes":336},{"id":1,"params":[0,1,2],"bytes":1584000}]})"
      "\n";
  const BucketFinding b = diagnose_ddp(parse_trace(text)).buckets;
  ASSERT_EQ(b.buckets.size(), 2u);
  EXPECT_EQ(b.buckets[0].limit_bytes, static_cast<uint64_t>(0.05 * 1024 * 1024));
  EXPECT_EQ(b.buckets[1].limit_bytes, uint64_t{1} << 20);
  ASSERT_EQ(b.sentences.size(), 3u);
  EXPECT_NE(
      b.sentences[0].find("filled in parameter order and then reversed, so that bucket 0 holds the last "
                          "parameters: the first bucket's own 1.00 MiB limit (first_bucket_mb) for bucket 1, "
                          "the first filled"),
      std::string::npos)
      << b.sentences[0];
  EXPECT_EQ(b.sentences[1],
            "bucket 0: 336 B in 3 parameters (2.bias ... 4.bias): the parameters left over, under "
            "the 51.20 KiB cap (bucket_cap_mb)");
  EXPECT_EQ(
      b.sentences[2],
      "bucket 1: 1.51 MiB in 3 parameters (0.weight ... 2.weight): 2.weight (750.00 KiB) took it past the "
      "first bucket's own 1.00 MiB limit (first_bucket_mb), which closed it");
}

TEST(DdpDiagnosis, TheFirstIterationsSingleBucketWithoutARebuild) {
  const DdpDiagnosis d = diagnose({.steps = 1});
  ASSERT_EQ(d.buckets.buckets.size(), 1u);
  EXPECT_FALSE(d.buckets.rebuilt);
  EXPECT_NE(d.buckets.sentences[0].find("one bucket of every parameter and no rebuild recorded"),
            std::string::npos);
  EXPECT_NE(d.buckets.sentences[1].find("every parameter, with no size limit"), std::string::npos);
}

TEST(DdpDiagnosis, AModelUnderTheFirstBucketsLimitHasOneBucketThatCannotOverlap) {
  const DdpDiagnosis d = diagnose({.small_model = true});
  ASSERT_EQ(d.buckets.buckets.size(), 1u);
  EXPECT_DOUBLE_EQ(d.buckets.cap_mb, 25.0);
  EXPECT_DOUBLE_EQ(d.buckets.first_mb, 1.0);
  ASSERT_EQ(d.buckets.sentences.size(), 2u);
  EXPECT_EQ(
      d.buckets.sentences[1],
      fmt::format("bucket 0: {} in 4 parameters (0.weight ... 2.bias): every parameter fits under the first "
                  "bucket's own {} limit (first_bucket_mb), so the one all-reduce cannot start before the "
                  "last gradient and none of it overlaps backward (a lower first-bucket limit splits it: "
                  "dist._DEFAULT_FIRST_BUCKET_BYTES in PyTorch, or in PyTorch 2.x a bucket_cap_mb given to "
                  "DDP; --first-bucket-mb in dpscope)",
                  format_bytes(26664), format_bytes(1024 * 1024)));
}

TEST(DdpDiagnosis, EpochsRepeatingTheFirstOrderNameSetEpoch) {
  const DdpDiagnosis d = diagnose({.steps = 6, .set_epoch = false});
  EXPECT_EQ(d.epochs.epochs, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(d.epochs.repeated, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(
      d.epochs.sentence,
      "every epoch repeated epoch 0's sample order on every rank: call sampler.set_epoch(epoch) at the "
      "start of each epoch (DistributedSampler shuffles with seed + epoch, so without it every epoch is "
      "the same)");
}

TEST(DdpDiagnosis, APartialLastEpochThatRepeatsCounts) {
  const DdpDiagnosis d = diagnose({.steps = 3, .set_epoch = false});
  EXPECT_EQ(d.epochs.repeated, (std::vector<int64_t>{1}));
  EXPECT_NE(d.epochs.sentence.find("every epoch repeated epoch 0's"), std::string::npos);
}

TEST(DdpDiagnosis, EpochsWithTheirOwnOrderAreSaidSo) {
  const DdpDiagnosis d = diagnose({.steps = 6, .set_epoch = true});
  EXPECT_TRUE(d.epochs.repeated.empty());
  EXPECT_EQ(d.epochs.sentence, "each of the 3 epochs drew a new sample order");
}

TEST(DdpDiagnosis, WithoutEpochsOrShufflingNothingIsSaidAboutTheSampler) {
  EXPECT_EQ(diagnose({.steps = 6, .epochs_written = false, .set_epoch = false}).epochs.sentence, "");
  EXPECT_EQ(diagnose({.steps = 6, .set_epoch = false, .shuffle = false}).epochs.sentence, "");
  EXPECT_EQ(diagnose({.steps = 2, .set_epoch = false}).epochs.sentence, "");  // one epoch
}

TEST(DdpDiagnosis, FormatListsEachFindingAndPerStepRows) {
  const DdpDiagnosis d = diagnose({.delay_ns = 300 * kUs, .set_epoch = false});
  const std::string text = format_diagnosis(d, /*per_step=*/true);
  EXPECT_EQ(text.rfind("\nDDP diagnosis:\n  straggler: rank 1 is the straggler in 4 of 4 steps", 0), 0u)
      << text;
  EXPECT_NE(text.find("\n  exposed communication: backward left "), std::string::npos) << text;
  EXPECT_NE(text.find("\n  buckets: DDP began with 1 bucket and rebuilt"), std::string::npos) << text;
  EXPECT_NE(text.find("\n    bucket 1: "), std::string::npos) << text;
  EXPECT_NE(text.find("\n  sampler: every epoch repeated"), std::string::npos) << text;
  // Step 3 lasts until the last all-reduce ends: 700 + 300 + 10 + 100 us; the noise is 5 % of it.
  EXPECT_NE(text.find(fmt::format("\n{:<6} {:<7} {:>11} {:>12} {:>12}  late\n", 3, 1, 1,
                                  format_duration(300 * kUs), format_duration(1110 * kUs / 20))),
            std::string::npos)
      << text;
}

TEST(DdpDiagnosis, ATraceWithoutDdpSaysNothing) {
  const std::string text = header() + event("span", 0, 0, 0, "forward",
                                            R"("name":"k","cat":"compute","stream":"compute","dur":10)");
  EXPECT_EQ(format_diagnosis(diagnose_ddp(parse_trace(text))), "");
}

// Two process ranks' files, rank 1's on a clock 5 ms behind rank 0's (offset +5 ms), each step's
// last gradient `late_ns` later on rank 1 than on rank 0 (on rank 0's clock).
std::filesystem::path rank_directory(int64_t late_ns) {
  const auto dir = testing::scratch_dir();
  constexpr int64_t kOffsetNs = 5'000'000;
  for (int rank = 0; rank < 2; ++rank) {
    const int64_t offset = rank == 1 ? kOffsetNs : 0;
    std::string text = testing::rank_header(rank, 2, offset);  // uncertainty 7 ns, device 0 = cpu
    for (int64_t step = 0; step < 3; ++step) {
      const int64_t base = step * kStepNs - offset;  // on the rank's own clock
      const int64_t late = rank == 1 ? late_ns : 0;
      text +=
          fmt::format(R"({{"type":"span","ts":{},"rank":{},"dev":0,"step":{},"phase":"forward","name":"f",)"
                      R"("cat":"compute","stream":"compute","dur":200000}})"
                      "\n",
                      base, rank, step);
      for (int param = 1; param >= 0; --param)
        text += fmt::format(R"({{"type":"instant","ts":{},"rank":{},"dev":0,"step":{},"phase":"backward",)"
                            R"("name":"grad_ready","args":{{"param":{}}}}})"
                            "\n",
                            base + (400 - 100 * param) * kUs + late, rank, step, param);
      text += fmt::format(R"({{"type":"instant","ts":{},"rank":{},"dev":0,"step":{},"phase":"backward",)"
                          R"("name":"bucket_launched","args":{{"bucket":0,"bytes":64,"params":2}}}})"
                          "\n",
                          base + 405 * kUs + late, rank, step);
      text += fmt::format(
          R"({{"type":"span","ts":{},"rank":{},"dev":0,"step":{},"phase":"backward",)"
          R"("name":"all_reduce ring","cat":"collective","stream":"comm","dur":{},"args":{{"op":"all_reduce"}}}})"
          "\n",
          base + 410 * kUs + late, rank, step, 90 * kUs + late_ns - late);
    }
    testing::write_file(dir / fmt::format("rank-{}.jsonl", rank), text);
  }
  return dir;
}

TEST(DdpDiagnosis, ProcessRanksAreComparedOnRankZerosClockWithTheirUncertainty) {
  // Rank 1's own clock reads 5 ms less: compared as written, it would be 5 ms early in every step.
  const DdpDiagnosis clean = diagnose_ddp(read_trace(rank_directory(0)));
  ASSERT_EQ(clean.straggler.steps.size(), 3u);
  EXPECT_EQ(clean.straggler.steps[0].backward.lead_ns, 0);
  EXPECT_EQ(clean.straggler.steps[0].noise_ns,
            500 * kUs / 20 + 7 + 7);  // 5 % of the step + both uncertainties
  EXPECT_EQ(clean.straggler.rank, -1);

  const DdpDiagnosis late = diagnose_ddp(read_trace(rank_directory(300 * kUs)));
  EXPECT_EQ(late.straggler.rank, 1);
  EXPECT_EQ(late.straggler.median_lead_ns, 300 * kUs);
  EXPECT_EQ(late.straggler.steps_late, 3);
}

// ---- `dpscope trace stats` on real runs of dpscope's own DDP ----

using dpscope::testing::run_dpscope;

std::string quoted(const std::filesystem::path& p) { return fmt::format("'{}'", p.string()); }

// Runs `dpscope train ARGS --trace DIR/run.jsonl` and returns the trace's path.
std::filesystem::path train_trace(const std::filesystem::path& dir, const std::string& args) {
  const auto trace = dir / "run.jsonl";
  const auto r = run_dpscope("train " + args + " --trace " + quoted(trace));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return trace;
}

// The stats command prints, after its table, exactly the diagnosis computed here from the same trace.
std::string stats_output(const std::filesystem::path& trace, const std::string& flags = "") {
  const auto r = run_dpscope("trace stats " + flags + quoted(trace));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

TEST(DdpDiagnosisCli, ASimulatedRunOfIdenticalRanksNamesNoStragglerAndExplainsItsBuckets) {
  const auto dir = testing::scratch_dir();
  const auto trace = train_trace(dir,
                                 "--mode ddp --devices 2 --model 2-512-512-10 --dataset blobs:512 --batch 32 "
                                 "--steps 4 --bucket-mb 1");
  const TraceData data = read_trace(trace);
  const DdpDiagnosis d = diagnose_ddp(data);
  const std::string out = stats_output(trace);
  EXPECT_NE(out.find(format_diagnosis(d)), std::string::npos) << out;
  EXPECT_EQ(d.straggler.rank, -1);
  EXPECT_NE(
      out.find("  straggler: no straggler: in all 4 steps the ranks' last gradients were ready within noise "
               "of each other (largest lead 0 ns;"),
      std::string::npos)
      << out;
  // The rebuilt buckets: [4.bias, 4.weight, 2.bias, 2.weight] reaches 1 MiB with 2.weight; 0.* is left over.
  ASSERT_EQ(d.buckets.buckets.size(), 2u);
  EXPECT_TRUE(d.buckets.rebuilt);
  EXPECT_EQ(d.buckets.buckets[0].params, (std::vector<int>{5, 4, 3, 2}));
  EXPECT_NE(out.find("    bucket 0: " + format_bytes(d.buckets.buckets[0].bytes) +
                     " in 4 parameters (4.bias ... "
                     "2.weight): 2.weight (" +
                     format_bytes(512 * 512 * 4) + ") took it past the first bucket's own 1.00 MiB limit"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("    bucket 1: " + format_bytes(d.buckets.buckets[1].bytes) +
                     " in 2 parameters (0.bias, 0.weight): the parameters left over, under the 1.00 MiB cap"),
            std::string::npos)
      << out;
  // Every step's last bucket is reduced after the last gradient: some all-reduce is always exposed.
  ASSERT_EQ(d.exposed.steps.size(), 4u);
  EXPECT_GT(d.exposed.median_exposed_ns, 0);
  EXPECT_LE(d.exposed.median_exposed_ns, d.exposed.median_all_reduce_ns);
  EXPECT_NE(
      out.find("  exposed communication: backward left " + format_duration(d.exposed.median_exposed_ns) +
               " of " + format_duration(d.exposed.median_all_reduce_ns)),
      std::string::npos)
      << out;
}

TEST(DdpDiagnosisCli, DataParallelAndSingleDeviceRunsGetNoDiagnosis) {
  // DataParallel's replicas have gradient-ready events too, but no buckets and no all-reduce.
  for (const std::string mode : {"dp --devices 2", "single"}) {
    const auto trace = train_trace(
        testing::scratch_dir(), "--mode " + mode + " --model 2-16-3 --dataset blobs:64 --batch 16 --steps 2");
    const std::string out = stats_output(trace);
    EXPECT_EQ(out.find("DDP diagnosis"), std::string::npos) << mode << "\n" << out;
    EXPECT_NE(out.find("\nsim:0 "), std::string::npos) << out;  // the table is still there
  }
}

TEST(DdpDiagnosisCli, TheNoSetEpochPitfallIsNamedAndACorrectRunIsNot) {
  const std::string run = "--mode ddp --devices 2 --model 2-8-3 --dataset blobs:64 --batch 8 --epochs 3 ";
  const auto pitfall = train_trace(testing::scratch_dir(), run + "--pitfall no-set-epoch");
  EXPECT_NE(stats_output(pitfall).find(
                "\n  sampler: every epoch repeated epoch 0's sample order on every rank: call "
                "sampler.set_epoch(epoch) at the start of each epoch"),
            std::string::npos);
  const auto correct = train_trace(testing::scratch_dir(), run);
  const DdpDiagnosis d = diagnose_ddp(read_trace(correct));
  EXPECT_EQ(d.epochs.epochs, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(d.epochs.repeated.empty());
  EXPECT_NE(stats_output(correct).find("\n  sampler: each of the 3 epochs drew a new sample order\n"),
            std::string::npos);
}

TEST(DdpDiagnosisCli, ARankDelayedOnPurposeIsNamedWithPerStepRows) {
  const auto dir = testing::scratch_dir();
  const auto trace = dir / "late.jsonl";
  testing::write_file(trace, ddp_trace({.delay_ns = 300 * kUs}));
  const std::string out = stats_output(trace, "--per-step ");
  EXPECT_NE(
      out.find("\nDDP diagnosis:\n  straggler: rank 1 is the straggler in 4 of 4 steps: its last gradient "
               "is ready " +
               format_duration(300 * kUs) + " after rank 0's"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("\nstep   bucket  latest rank         lead        noise\n"), std::string::npos) << out;
}

TEST(DdpDiagnosisCli, TheDocsExampleIsWhatTheCommandPrints) {
  const std::string docs =
      testing::read_file(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "docs/trace-format.md");
  const size_t section = docs.find("### The DDP diagnosis");
  ASSERT_NE(section, std::string::npos);
  const std::string train = "$ dpscope train ";
  const size_t command = docs.find(train, section);
  ASSERT_NE(command, std::string::npos);
  const size_t command_end = docs.find(" --trace ddp.jsonl\n", command);
  ASSERT_NE(command_end, std::string::npos);
  const std::string args = docs.substr(command + train.size(), command_end - command - train.size());
  const size_t block = docs.find("DDP diagnosis:\n", command_end);
  const size_t block_end = docs.find("```", block);
  ASSERT_NE(block_end, std::string::npos);
  const std::string documented = docs.substr(block, block_end - block);

  const auto trace = train_trace(testing::scratch_dir(), args);
  const std::string out = stats_output(trace);
  const size_t printed = out.find("DDP diagnosis:\n");
  ASSERT_NE(printed, std::string::npos) << out;
  EXPECT_EQ(out.substr(printed), documented);
}

}  // namespace
}  // namespace dpscope::trace
