// The replay model on traces written by the runtime (`dpscope train` runs of DP and DDP, and a
// hand-timed trace written through the TraceRecorder): state at a time and after an event,
// activity texts, transfers in flight, memory, the data split of DP and DDP, bucket states through
// a DDP backward pass, reductions (mean for DDP, sum for DP), loss, navigation.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "replay/replay_model.hpp"
#include "replay/run_info.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

using testing::find_instant;
using testing::find_position;
using testing::scratch_dir;

// The model references the data: both live on the heap so a Loaded can be moved.
struct Loaded {
  std::unique_ptr<trace::TraceData> owned;
  std::unique_ptr<ReplayModel> model;
  const trace::TraceData& data;
};

Loaded load(const std::filesystem::path& path) {
  auto owned = std::make_unique<trace::TraceData>(trace::read_trace(path));
  auto model = std::make_unique<ReplayModel>(*owned);
  const trace::TraceData& data = *owned;
  return Loaded{std::move(owned), std::move(model), data};
}

const StreamActivity* activity(const ReplayState& s, int device, StreamKind stream) {
  for (const StreamActivity& a : s.devices[static_cast<size_t>(device)].activity)
    if (a.stream == stream) return &a;
  return nullptr;
}

// ---- hand-timed trace: exact states ----

class HandTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = scratch_dir() / "hand.jsonl";
    ids_ = testing::write_hand_trace(path_);
    loaded_ = std::make_unique<Loaded>(load(path_));
    d0_ = model().device_index(ids_.gpu0);
    d1_ = model().device_index(ids_.gpu1);
  }
  const ReplayModel& model() const { return *loaded_->model; }
  std::filesystem::path path_;
  testing::HandTrace ids_;
  std::unique_ptr<Loaded> loaded_;
  int d0_ = -1;
  int d1_ = -1;
};

TEST_F(HandTraceTest, DevicesComeFromTheHeaderWithRanksFromEvents) {
  ASSERT_EQ(model().devices().size(), 3u);
  EXPECT_EQ(model().devices()[d0_].name, "sim:0");
  EXPECT_EQ(model().devices()[d0_].rank, 0);
  EXPECT_EQ(model().devices()[d1_].rank, 1);
  EXPECT_TRUE(model().devices()[model().device_index(ids_.host)].is_host);
  EXPECT_EQ(model().begin_ns(), 0);
  EXPECT_EQ(model().end_ns(), 5000);
}

TEST_F(HandTraceTest, ActivityAtATimeIsTheInnermostCoveringSpan) {
  EXPECT_EQ(activity(model().state_at(model().at_time(1500)), d0_, StreamKind::kCompute)->text,
            "forward 0.Linear");
  EXPECT_EQ(activity(model().state_at(model().at_time(2500)), d0_, StreamKind::kCompute)->text,
            "forward 2.Linear");
  const ReplayState later = model().state_at(model().at_time(3500));
  const StreamActivity* idle = activity(later, d0_, StreamKind::kCompute);
  EXPECT_EQ(idle->event, kNoEvent);
  EXPECT_EQ(idle->text, "");
  // Before anything started, the lane exists but is idle.
  EXPECT_EQ(activity(model().state_at(model().at_time(999)), d0_, StreamKind::kCompute)->event, kNoEvent);
}

TEST_F(HandTraceTest, RingTransfersAreNamedAfterTheirCollectiveWithStepOfSteps) {
  EXPECT_EQ(activity(model().state_at(model().at_time(3500)), d0_, StreamKind::kComm)->text,
            "all-reduce ring step 1/2");
  EXPECT_EQ(activity(model().state_at(model().at_time(4500)), d0_, StreamKind::kComm)->text,
            "all-reduce ring step 2/2");
  // GPU 1 has no enclosing collective span: the transfer's own name is used.
  EXPECT_EQ(activity(model().state_at(model().at_time(3500)), d1_, StreamKind::kComm)->text,
            "ring reduce-scatter step 1/2");
}

TEST_F(HandTraceTest, TransfersInFlightHaveProgressAndLoadTheirLink) {
  const ReplayState s = model().state_at(model().at_time(3250));
  ASSERT_EQ(s.transfers.size(), 2u);
  for (const TransferSnapshot& t : s.transfers) {
    EXPECT_DOUBLE_EQ(t.progress, 0.25);
    EXPECT_EQ(t.bytes, 1000u);
    EXPECT_TRUE(t.collective);
  }
  ASSERT_EQ(s.links.size(), 1u);
  EXPECT_EQ(s.links[0].a, std::min(d0_, d1_));
  EXPECT_EQ(s.links[0].b, std::max(d0_, d1_));
  EXPECT_EQ(s.links[0].bytes_in_flight, 2000u);
  EXPECT_EQ(s.links[0].transfers, 2);
  EXPECT_TRUE(model().state_at(model().at_time(2999)).transfers.empty());
  EXPECT_TRUE(model().state_at(model().at_time(5000)).transfers.empty());  // arrived
}

TEST_F(HandTraceTest, MemoryIsTheLatestCounterAtOrBeforeTheCursor) {
  const DeviceSnapshot before = model().state_at(model().at_time(499)).devices[d0_];
  EXPECT_FALSE(before.memory_known);
  // The review found the memory row missing until the first kernel ended: the GPU's memory is
  // reported later in the trace, so its row is there (empty) from the start.
  EXPECT_TRUE(before.memory_pending);
  EXPECT_TRUE(model().state_at(model().start()).devices[d0_].memory_pending);
  // GPU 1 never reports its memory: no row to keep.
  EXPECT_FALSE(model().state_at(model().start()).devices[d1_].memory_pending);
  const DeviceSnapshot early = model().state_at(model().at_time(2499)).devices[d0_];
  ASSERT_TRUE(early.memory_known);
  EXPECT_FALSE(early.memory_pending);
  EXPECT_EQ(early.memory_bytes[static_cast<int>(MemoryCategory::kParameters)], 100u);
  EXPECT_EQ(early.memory_bytes[static_cast<int>(MemoryCategory::kActivations)], 0u);
  EXPECT_EQ(early.capacity_bytes, 1000u);
  const DeviceSnapshot late = model().state_at(model().at_time(2500)).devices[d0_];
  EXPECT_EQ(late.memory_bytes[static_cast<int>(MemoryCategory::kActivations)], 50u);
  EXPECT_EQ(late.memory_in_use_bytes(), 150u);
  EXPECT_EQ(model().peak_memory_bytes(), 150u);
}

TEST_F(HandTraceTest, SamplesAndLossSoFar) {
  const ReplayState s = model().state_at(model().at_time(100));
  ASSERT_NE(s.devices[d0_].samples, nullptr);
  EXPECT_EQ(*s.devices[d0_].samples, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(*s.devices[d1_].samples, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s.devices[d0_].samples_step, 0);
  ASSERT_EQ(model().losses().size(), 1u);
  EXPECT_DOUBLE_EQ(model().losses()[0].loss, 2.5);
  EXPECT_EQ(model().state_at(model().at_time(4499)).losses_so_far, 0u);
  EXPECT_EQ(model().state_at(model().at_time(4500)).losses_so_far, 1u);
}

TEST_F(HandTraceTest, AfterEventKSeparatesEventsAtTheSameTime) {
  // Both grad_ready instants are at t=2000; GPU 0's comes first in the file.
  const uint32_t first = find_instant(model(), 0, 0, EventName::kGradReady);
  const uint32_t second = find_instant(model(), 1, 0, EventName::kGradReady);
  ASSERT_EQ(model().ts_at(first), 2000);
  ASSERT_EQ(model().ts_at(second), 2000);
  ASSERT_LT(first, second);
  const Cursor c = model().after_event(first);
  EXPECT_EQ(c.t_ns, 2000);
  EXPECT_EQ(c.seq, first + 1);
  const ReplayState s = model().state_at(c);
  EXPECT_EQ(s.last_event, model().event_at(first));
  EXPECT_TRUE(model().applied(model().event_at(first), c));
  EXPECT_FALSE(model().applied(model().event_at(second), c));
  // At the time itself, both have happened.
  EXPECT_TRUE(model().applied(model().event_at(second), model().at_time(2000)));
}

TEST_F(HandTraceTest, ASpanStartingAtTheCursorIsActiveOnlyOnceItsEventHappened) {
  const uint32_t pos = find_position(model(), [&](const trace::Event& e) {
    return e.type == trace::EventType::kSpan && loaded_->data.str(e.name) == "forward 2.Linear";
  });
  EXPECT_EQ(activity(model().state_at(model().after_event(pos)), d0_, StreamKind::kCompute)->text,
            "forward 2.Linear");
  // One event earlier (same time or before), the 2.Linear span has not started.
  EXPECT_NE(activity(model().state_at(model().after_event(pos - 1)), d0_, StreamKind::kCompute)->text,
            "forward 2.Linear");
}

TEST_F(HandTraceTest, LanesNestChildrenUnderThePhaseSpan) {
  const int lane = model().lane_index(d0_, StreamKind::kCompute);
  ASSERT_GE(lane, 0);
  const ModelLane& l = model().lanes()[lane];
  ASSERT_EQ(l.levels.size(), 2u);
  ASSERT_EQ(l.levels.level(0).size(), 1u);
  EXPECT_EQ(loaded_->data.str(model().event(l.levels.level(0)[0]).name), "forward");
  EXPECT_EQ(l.levels.level(1).size(), 2u);
  EXPECT_EQ(l.levels.item_count(), 3u);
}

TEST_F(HandTraceTest, BreakdownUsesHtaDefinitions) {
  // GPU 0: compute [1000, 3000) (the phase span is not busy time), comm [3000, 5000).
  const TimeBreakdown b = model().breakdown(d0_, 0, 5000);
  EXPECT_EQ(b.window_ns, 5000);
  EXPECT_EQ(b.compute_ns, 2000);
  EXPECT_EQ(b.comm_ns, 2000);
  EXPECT_EQ(b.overlap_ns, 0);
  EXPECT_EQ(b.exposed_comm_ns, 2000);
  EXPECT_EQ(b.idle_ns, 1000);
  EXPECT_DOUBLE_EQ(b.overlap_pct(), 0.0);
}

// ---- DDP trace (dpscope train --mode ddp) ----

// The bytes of the fixture model's gradients: 784*256 + 256 + 256*128 + 128 + 128*10 + 10 floats.
constexpr uint64_t kFixtureGradBytes = 4 * (784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);

TEST(ReplayDdp, SampleChipsPerDeviceEqualTheDistributedSamplerSplit) {
  const auto path = scratch_dir() / "ddp.jsonl";
  const auto info = testing::write_ddp_trace(path, 4, 2, 4);
  const int64_t dataset_len = 4 * 4 * 2;
  const Loaded l = load(path);
  const ReplayModel& m = *l.model;
  for (int64_t step = 0; step < 2; ++step) {
    const ReplayState s = m.state_at(m.at_time(m.step_window(step).second - 1));
    for (size_t rank = 0; rank < 4; ++rank) {
      const DeviceSnapshot& d = s.devices[m.device_index(info.gpu_ids[rank])];
      ASSERT_NE(d.samples, nullptr) << "step " << step << " rank " << rank;
      EXPECT_EQ(d.samples_step, step);
      // Strided: rank r of R takes rows base + r, base + r + R, ... with base = step * batch * R.
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < 4; ++i) expected.push_back(step * 16 + static_cast<int64_t>(rank) + 4 * i);
      EXPECT_EQ(*d.samples, expected) << "step " << step << " rank " << rank;
      // The same rows from the runtime's DistributedSampler (no shuffle), batch `step` of the shard.
      const DistributedSampler sampler(
          dataset_len, {.num_replicas = 4, .rank = static_cast<int64_t>(rank), .shuffle = false});
      const std::vector<int64_t> shard = sampler.indices();
      EXPECT_EQ(*d.samples, std::vector<int64_t>(shard.begin() + step * 4, shard.begin() + step * 4 + 4));
    }
  }
}

TEST(ReplayDdp, BucketStatesFollowTheTraceThroughBackward) {
  const auto path = scratch_dir() / "ddp.jsonl";
  const auto info = testing::write_ddp_trace(path, 2, 3, 4);
  const Loaded l = load(path);
  const ReplayModel& m = *l.model;
  const int d0 = m.device_index(info.gpu_ids[0]);
  auto state_after = [&](uint32_t pos) { return m.state_at(m.after_event(pos)); };
  auto col = [&](const ReplayState& s) {
    return static_cast<size_t>(std::find(s.bucket_devices.begin(), s.bucket_devices.end(), d0) -
                               s.bucket_devices.begin());
  };

  // Step 0 runs on the initial bucket: taking parameters in reverse order, the 256 KiB cap is reached
  // only when 0.weight (784 KiB) joins, so all six share one bucket (listed in index order).
  {
    const ReplayState s = state_after(find_instant(m, 0, 0, EventName::kGradReady, trace_key::kParam, 5));
    ASSERT_EQ(s.buckets.size(), 1u);
    EXPECT_EQ(s.buckets[0].params, (std::vector<int>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(s.bucket_devices.size(), 2u);
    EXPECT_EQ(s.buckets[0].state[col(s)], BucketState::kPending);
    EXPECT_EQ(s.buckets[0].ready_params[col(s)], 1);
  }
  // Step 1: rebuilt buckets in gradient-ready order (bias before weight, last layer first): the
  // first closes at 64 KiB once 2.weight (128 KiB) joins, the second holds 0.bias and 0.weight.
  {
    const ReplayState s = state_after(find_instant(m, 0, 1, EventName::kGradReady, trace_key::kParam, 4));
    ASSERT_EQ(s.buckets.size(), 2u);
    EXPECT_EQ(s.buckets[0].params, (std::vector<int>{5, 4, 3, 2}));
    EXPECT_EQ(s.buckets[1].params, (std::vector<int>{1, 0}));
    EXPECT_EQ(s.buckets[0].state[col(s)], BucketState::kPending);
    EXPECT_EQ(s.buckets[0].ready_params[col(s)], 2);
    EXPECT_EQ(s.buckets[1].ready_params[col(s)], 0);
  }
  {
    const ReplayState s = state_after(find_instant(m, 0, 1, EventName::kGradReady, trace_key::kParam, 2));
    EXPECT_EQ(s.buckets[0].state[col(s)], BucketState::kReady);
    EXPECT_EQ(s.buckets[1].state[col(s)], BucketState::kPending);
  }
  {
    const ReplayState s =
        state_after(find_instant(m, 0, 1, EventName::kBucketLaunched, trace_key::kBucket, 0));
    EXPECT_EQ(s.buckets[0].state[col(s)], BucketState::kLaunched);
    EXPECT_EQ(s.buckets[1].state[col(s)], BucketState::kPending);
  }
  {
    const ReplayState s = state_after(find_instant(m, 0, 1, EventName::kBucketDone, trace_key::kBucket, 0));
    EXPECT_EQ(s.buckets[0].state[col(s)], BucketState::kDone);
  }
  {
    const ReplayState s = state_after(find_instant(m, 0, 1, EventName::kBucketDone, trace_key::kBucket, 1));
    EXPECT_EQ(s.buckets[0].state[col(s)], BucketState::kDone);
    EXPECT_EQ(s.buckets[1].state[col(s)], BucketState::kDone);
  }
  // A new step starts with every bucket pending again.
  {
    // The first event of step 2 on rank 0.
    const ReplayState s =
        state_after(find_position(m, [](const trace::Event& e) { return e.rank == 0 && e.step == 2; }));
    EXPECT_EQ(s.buckets[0].state[col(s)], BucketState::kPending);
    EXPECT_EQ(s.buckets[0].ready_params[col(s)], 0);
    EXPECT_EQ(s.buckets[1].state[col(s)], BucketState::kPending);
  }
}

TEST(ReplayDdp, ValuesAfterAllReduceAreTheMeanOfValuesBefore) {
  const auto path = scratch_dir() / "ddp.jsonl";
  testing::write_ddp_trace(path, 4, 2, 4);
  const Loaded l = load(path);
  const ReplayModel& m = *l.model;
  ASSERT_FALSE(m.reductions().empty());
  for (const Reduction& r : m.reductions()) {
    ASSERT_EQ(r.before.size(), 4u);
    ASSERT_EQ(r.after.size(), 4u);
    const auto& before0 = l.data.values[l.data.events[r.before[0]].payload].values;
    for (size_t i = 0; i < before0.size(); ++i) {
      double sum = 0;
      for (int rank = 0; rank < 4; ++rank) {
        const auto& v = l.data.values[l.data.events[r.before[rank]].payload].values;
        EXPECT_EQ(l.data.events[r.before[rank]].rank, rank);
        sum += v[i];
      }
      for (uint32_t after : r.after)
        EXPECT_NEAR(l.data.values[l.data.events[after].payload].values[i], sum / 4, 1e-6);
    }
    // Each rank recorded the gradient of its own batch (different rows): no two ranks' gradients
    // have the same L2 norm.
    for (int a = 0; a < 4; ++a)
      for (int b = a + 1; b < 4; ++b)
        EXPECT_NE(l.data.values[l.data.events[r.before[a]].payload].norm,
                  l.data.values[l.data.events[r.before[b]].payload].norm)
            << "step " << r.step << " param " << r.param << " ranks " << a << ", " << b;
  }
  // One reduction per parameter and step, 4 values each (docs/trace-format.md `values`).
  EXPECT_EQ(m.reductions().size(), 2u * 6);
  // The state points at the latest reduction that has started.
  const Reduction& last = m.reductions().back();
  EXPECT_EQ(m.state_at(m.end()).reduction, static_cast<int>(m.reductions().size()) - 1);
  EXPECT_EQ(m.state_at(m.after_event(last.first_pos)).reduction, static_cast<int>(m.reductions().size()) - 1);
  EXPECT_EQ(m.state_at(m.after_event(last.first_pos - 1)).reduction,
            static_cast<int>(m.reductions().size()) - 2);
  EXPECT_EQ(m.state_at(m.start()).reduction, -1);
}

TEST(ReplayDdp, CollectiveStepsCountTheRingSteps) {
  const auto path = scratch_dir() / "ddp.jsonl";
  testing::write_ddp_trace(path, 4, 1, 4);
  const Loaded l = load(path);
  // Step 0's only bucket is the first all-reduce of the step (DDP's setup collectives are step -1).
  const uint32_t first = find_position(*l.model, [&](const trace::Event& e) {
    return e.type == trace::EventType::kTransfer && e.step == 0 && e.stream == StreamKind::kComm;
  });
  const int64_t coll = l.model->data().transfer(l.model->event(l.model->event_at(first))).coll;
  // 4 ranks: 2(n-1) = 6 steps, numbered 0..5.
  EXPECT_EQ(l.model->algo_step_range(coll), (std::pair<int32_t, int32_t>{0, 5}));
  const uint32_t pos = find_position(*l.model, [&](const trace::Event& e) {
    const trace::Transfer& t = l.model->data().transfer(e);
    return e.type == trace::EventType::kTransfer && t.coll == coll && t.algo_step == 2 && e.rank == 1;
  });
  const trace::Event& e = l.model->event(l.model->event_at(pos));
  const ReplayState s = l.model->state_at(l.model->at_time(e.ts_ns + e.dur_ns / 2));
  const StreamActivity* a = activity(s, l.model->device_index(e.dev), StreamKind::kComm);
  // The collective span's name: op, algorithm and the bucket's size (every gradient, 918.54 KiB).
  EXPECT_EQ(a->text, fmt::format("all_reduce ring {:.2f} KiB step 3/6", kFixtureGradBytes / 1024.0));
  EXPECT_EQ(s.transfers.size(), 4u);  // every rank sends to its right neighbour
}

TEST(ReplayDdp, NavigationByStepAndPhase) {
  const auto path = scratch_dir() / "ddp.jsonl";
  testing::write_ddp_trace(path, 2, 3, 4);
  const Loaded l = load(path);
  const ReplayModel& m = *l.model;
  ASSERT_EQ(m.first_step(), 0);
  ASSERT_EQ(m.last_step(), 2);
  const Cursor s0 = *m.step_start(0);
  const Cursor s1 = *m.step_start(1);
  const Cursor s2 = *m.step_start(2);
  EXPECT_EQ(m.next_step(m.start()), s0);
  EXPECT_EQ(m.next_step(s0), s1);
  EXPECT_EQ(m.next_step(s1), s2);
  EXPECT_EQ(m.next_step(s2), m.end());
  EXPECT_EQ(m.prev_step(s2), s1);
  EXPECT_EQ(m.prev_step(m.at_time(m.ts_at(s1.seq - 1) + 1)), s1);  // inside step 1: back to its start
  EXPECT_EQ(m.prev_step(s0), m.start());
  EXPECT_FALSE(m.step_start(3).has_value());
  // Phases of rank 0 (the reference device of phase navigation) in step 0: data, forward, backward,
  // optimizer, then the step's loss counter, which train_rank writes after the optimizer's phase
  // has ended. Rank 0's step starts at its own first event: the rank threads write in any order,
  // so another rank's event may open the step.
  auto rank0_step_start = [&](int64_t step) {
    return m.after_event(
        find_position(m, [&](const trace::Event& e) { return e.rank == 0 && e.step == step; }));
  };
  const Cursor r0s0 = rank0_step_start(0);
  const Cursor r0s1 = rank0_step_start(1);
  std::vector<Phase> phases;
  for (Cursor c = r0s0; c.seq < r0s1.seq; c = m.next_phase(c)) phases.push_back(m.state_at(c).phase);
  EXPECT_EQ(phases, (std::vector<Phase>{Phase::kData, Phase::kForward, Phase::kBackward, Phase::kOptimizer,
                                        Phase::kNone}));
  EXPECT_EQ(m.prev_phase(m.next_phase(r0s1)), r0s1);
  // Events one by one.
  EXPECT_EQ(m.next_event(m.start()), m.after_event(0));
  EXPECT_EQ(m.prev_event(m.after_event(5)), m.after_event(4));
  EXPECT_EQ(m.prev_event(m.after_event(0)), m.start());
  EXPECT_EQ(m.next_event(m.end()), m.end());
}

TEST(ReplayDdp, CommOverlapsBackwardOnEveryRank) {
  const auto path = scratch_dir() / "ddp.jsonl";
  testing::write_ddp_trace(path, 4, 2, 64);
  const Loaded l = load(path);
  const ReplayModel& m = *l.model;
  for (const ModelDevice& d : m.devices()) {
    if (d.is_host || d.is_switch) continue;  // the host and the NVSwitch node run no kernels
    const TimeBreakdown b = m.breakdown(m.device_index(d.id), m.begin_ns(), m.end_ns());
    EXPECT_GT(b.compute_ns, 0);
    EXPECT_GT(b.comm_ns, 0);
    EXPECT_GT(b.overlap_ns, 0) << "bucket 0's all-reduce runs while layer 0's backward computes";
    EXPECT_EQ(b.compute_ns + b.exposed_comm_ns + b.idle_ns, b.window_ns);
  }
}

TEST(ReplayDdp, AveragedGradientsEqualDataParallelsOverTheSameRows) {
  // DDP's mean over 4 ranks of each rank's mean-loss gradient over 4 rows is the mean-loss gradient
  // over all 16 rows: what DataParallel's reduce-add gives for a 16-row batch of the same rows
  // (rows 0..15: the unshuffled sampler's step 0), from the same seed's initial weights.
  const auto dir = scratch_dir();
  testing::write_ddp_trace(dir / "ddp.jsonl", 4, 1, 4);
  testing::write_dp_trace(dir / "dp.jsonl", 4, 1, 16);
  const Loaded ddp = load(dir / "ddp.jsonl");
  const Loaded dp = load(dir / "dp.jsonl");
  ASSERT_EQ(ddp.model->reductions().size(), 6u);
  ASSERT_EQ(dp.model->reductions().size(), 6u);
  for (size_t k = 0; k < 6; ++k) {
    const Reduction& a = ddp.model->reductions()[k];
    const Reduction* b = nullptr;
    for (const Reduction& r : dp.model->reductions())
      if (r.param == a.param) b = &r;
    ASSERT_NE(b, nullptr) << "param " << a.param;
    ASSERT_FALSE(a.after.empty());
    ASSERT_FALSE(b->after.empty());
    const trace::ValueSample& x = ddp.data.values[ddp.data.events[a.after[0]].payload];
    const trace::ValueSample& y = dp.data.values[dp.data.events[b->after[0]].payload];
    ASSERT_EQ(x.values.size(), y.values.size());
    for (size_t i = 0; i < x.values.size(); ++i)
      EXPECT_NEAR(x.values[i], y.values[i], 1e-5 + 1e-4 * std::abs(y.values[i])) << "param " << a.param;
    EXPECT_NEAR(x.norm, y.norm, 1e-4 * y.norm) << "param " << a.param;
  }
}

// ---- DP trace (dpscope train --mode dp) ----

TEST(ReplayDp, TenRowsOnFourGpusAreChunkedThreeThreeThreeOne) {
  const auto path = scratch_dir() / "dp.jsonl";
  const auto info = testing::write_dp_trace(path, 4, 1, 10);
  const Loaded l = load(path);
  const ReplayState s = l.model->state_at(l.model->end());
  const std::vector<std::vector<int64_t>> expected = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}};
  for (size_t r = 0; r < 4; ++r) {
    const DeviceSnapshot& d = s.devices[l.model->device_index(info.gpu_ids[r])];
    ASSERT_NE(d.samples, nullptr);
    EXPECT_EQ(*d.samples, expected[r]);
  }
}

TEST(ReplayDp, FiveRowsOnFourGpusLeaveTheLastOneWithout) {
  const auto path = scratch_dir() / "dp.jsonl";
  const auto info = testing::write_dp_trace(path, 4, 1, 5);
  const Loaded l = load(path);
  const ReplayState s = l.model->state_at(l.model->end());
  const std::vector<std::vector<int64_t>> expected = {{0, 1}, {2, 3}, {4}};
  for (size_t r = 0; r < 3; ++r)
    EXPECT_EQ(*s.devices[l.model->device_index(info.gpu_ids[r])].samples, expected[r]);
  EXPECT_EQ(s.devices[l.model->device_index(info.gpu_ids[3])].samples, nullptr);
}

TEST(ReplayDp, ReduceAddOnGpuZeroIsTheSumOfTheReplicasGradients) {
  const auto path = scratch_dir() / "dp.jsonl";
  testing::write_dp_trace(path, 4, 2, 8);
  const Loaded l = load(path);
  // One reduce-add per parameter (6) and step (2).
  ASSERT_EQ(l.model->reductions().size(), 12u);
  for (const Reduction& r : l.model->reductions()) {
    // Every replica's own gradient (when=local, GPU 0's included), then the sum on GPU 0.
    ASSERT_EQ(r.local.size(), 4u);
    ASSERT_EQ(r.after.size(), 1u);
    EXPECT_EQ(l.data.events[r.after[0]].rank, 0);
    const auto& after = l.data.values[l.data.events[r.after[0]].payload].values;
    for (size_t i = 0; i < after.size(); ++i) {
      float sum = 0;
      for (uint32_t b : r.local) sum += l.data.values[l.data.events[b].payload].values[i];
      EXPECT_FLOAT_EQ(after[i], sum);
    }
  }
}

TEST(ReplayDp, CopiesShowAsActivityAndGpuZeroHoldsMoreMemory) {
  const auto path = scratch_dir() / "dp.jsonl";
  const auto info = testing::write_dp_trace(path, 4, 2, 8);
  const Loaded l = load(path);
  const ReplayModel& m = *l.model;
  // The parameter broadcast to GPU 1 (replicate) is a D2D copy on its copy stream.
  const uint32_t pos = find_position(m, [&](const trace::Event& e) {
    const trace::Transfer& t = m.data().transfer(e);
    return e.type == trace::EventType::kTransfer && t.src == info.gpu_ids[0] && t.dst == info.gpu_ids[1];
  });
  const trace::Event& e = m.event(m.event_at(pos));
  const ReplayState s = m.state_at(m.at_time(e.ts_ns + e.dur_ns / 2));
  const StreamActivity* a = activity(s, m.device_index(info.gpu_ids[1]), StreamKind::kCopy);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->text.rfind("copy D2D ", 0), 0u) << a->text;
  // After the first optimizer step GPU 0 holds gradients and optimizer state the replicas do not.
  const ReplayState end = m.state_at(m.end());
  EXPECT_GT(end.devices[m.device_index(info.gpu_ids[0])].memory_in_use_bytes(),
            end.devices[m.device_index(info.gpu_ids[1])].memory_in_use_bytes());
}

// ---- robustness ----

TEST(ReplayRobustness, EventsOnDevicesMissingFromTheHeaderGetTheirOwnDevice) {
  // The reader refuses such events; a TraceData built by other code must not crash the model.
  trace::TraceData data;
  data.header.devices.push_back({.id = 0, .name = "sim:0", .kind = "sim"});
  auto add = [&](trace::EventType type, int32_t dev, int64_t ts, int64_t dur,
                 const char* name) -> trace::Event& {
    trace::Event e;
    e.type = type;
    e.dev = dev;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.step = 0;
    e.name = data.intern(name);
    e.cat = data.intern("compute");
    data.events.push_back(e);
    return data.events.back();
  };
  add(trace::EventType::kSpan, 0, 0, 10, "a");
  add(trace::EventType::kSpan, 7, 5, 10, "b").rank = 1;
  trace::Event& t = add(trace::EventType::kTransfer, 0, 5, 0, "t");
  t.stream = StreamKind::kComm;
  t.payload = static_cast<int32_t>(data.transfers.size());
  data.transfers.push_back({.src = 0, .dst = 9});
  add(trace::EventType::kSpan, -3, 5, -4, "nowhere");
  trace::Event& memory = add(trace::EventType::kCounter, 0, 6, 0, to_string(EventName::kMemory));
  memory.known = EventName::kMemory;
  memory.payload = 42;  // a payload index out of range
  const ReplayModel m(data);
  ASSERT_GE(m.device_index(7), 0);
  EXPECT_FALSE(m.devices()[m.device_index(7)].in_header);
  EXPECT_EQ(m.devices()[m.device_index(7)].rank, 1);
  EXPECT_GE(m.device_index(9), 0);
  EXPECT_EQ(m.warnings().size(), 3u);  // one for dev -3, one per unknown id
  const ReplayState s = m.state_at(m.at_time(6));
  EXPECT_EQ(activity(s, m.device_index(7), StreamKind::kCompute)->text, "b");
  EXPECT_TRUE(s.transfers.empty());  // zero-length transfers are never in flight
  EXPECT_FALSE(s.devices[0].memory_known);
  EXPECT_EQ(m.event_count(), 5u);
}

TEST(ReplayRobustness, AnEmptyTraceHasOnePositionAndNoState) {
  const std::string text =
      R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{},"devices":[],"links":[],"params":[],"buckets":[]})"
      "\n";
  const trace::TraceData data = trace::parse_trace(text);
  const ReplayModel m(data);
  EXPECT_EQ(m.event_count(), 0u);
  EXPECT_EQ(m.start(), m.end());
  EXPECT_EQ(m.next_event(m.start()), m.end());
  EXPECT_EQ(m.prev_phase(m.start()), m.start());
  EXPECT_EQ(m.at_fraction(0.5), m.start());
  const ReplayState s = m.state_at(m.start());
  EXPECT_TRUE(s.devices.empty());
  EXPECT_EQ(s.last_event, kNoEvent);
}

// The review found the loss plot drawing every rank's local loss while `dpscope train` reports the
// mean over ranks: the plot's series is the run's own per-step loss.
TEST(StepLosses, AreTheMeanOverRanksThatTrainReports) {
  const std::filesystem::path path = testing::scratch_dir() / "ddp_loss.jsonl";
  const testing::RuntimeTrace run = testing::write_ddp_trace(path, 4, 3, 4);
  const trace::TraceData data = trace::read_trace(path, {.strict = true});
  const ReplayModel model(data);
  ASSERT_EQ(model.losses().size(), 12u) << "4 ranks x 3 steps";
  ASSERT_EQ(model.step_losses().size(), run.result.losses.size());
  for (size_t s = 0; s < run.result.losses.size(); ++s) {
    EXPECT_EQ(model.step_losses()[s].step, static_cast<int64_t>(s));
    EXPECT_EQ(model.step_losses()[s].ranks, 4);
    EXPECT_NEAR(model.step_losses()[s].loss, run.result.losses[s], 1e-12 * std::fabs(run.result.losses[s]));
  }
}

// The review found `--pitfall no-set-epoch` looking identical to the correct run. A shuffling run
// whose device holds the very rows of an earlier step is flagged on that device (the stage card
// says so in the warning colour); the correct run, and a run that does not shuffle, are not.
TEST(RepeatedSamples, AreFlaggedWhereTheSamplerRepeatsAnEpoch) {
  const auto repeats = [](bool shuffle, bool forget_set_epoch, const std::string& name) {
    TrainConfig config;
    config.mode = TrainMode::kDdp;
    config.devices = 2;
    config.batch = 4;
    config.steps = 4;  // two epochs of 2 steps: 16 rows over 2 ranks of 4
    config.dataset = "blobs:16:8:3";
    config.model = "8-3";
    config.shuffle = shuffle;
    if (forget_set_epoch) config.pitfalls = {"no-set-epoch"};
    config.trace = (testing::scratch_dir() / name).string();
    run_training(config);
    const trace::TraceData data = trace::read_trace(config.trace, {.strict = true});
    const ReplayModel model(data);
    std::vector<int64_t> found;  // rank 0's samples_repeat_of at the start of steps 0..3
    for (int64_t step = 0; step < 4; ++step) {
      const ReplayState st = model.state_at(model.at_time(model.step_window(step).second - 1));
      found.push_back(st.devices[0].samples_step == step ? st.devices[0].samples_repeat_of : -2);
    }
    return found;
  };
  EXPECT_EQ(repeats(true, true, "forgot.jsonl"), (std::vector<int64_t>{-1, -1, 0, 1}))
      << "epoch 1 replays epoch 0 step by step";
  EXPECT_EQ(repeats(true, false, "correct.jsonl"), (std::vector<int64_t>{-1, -1, -1, -1}));
  EXPECT_EQ(repeats(false, false, "no-shuffle.jsonl"), (std::vector<int64_t>{-1, -1, -1, -1}))
      << "without shuffling every epoch repeats by design: nothing to flag";
}

TEST(RunInfo, ReadsATimingOnlyRunsWorldSize) {
  const RunInfo big = parse_run_info(R"({"mode":"ddp","devices":1024,"timing_only":true})");
  EXPECT_TRUE(big.timing_only);
  EXPECT_EQ(big.devices, 1024);
  const RunInfo plain = parse_run_info(R"({"mode":"ddp","devices":"four"})");
  EXPECT_FALSE(plain.timing_only);
  EXPECT_EQ(plain.devices, 0);
}

TEST(RunInfo, ReadsWhichStepsASampledTraceTracedKernelsOn) {
  const RunInfo sampled = parse_run_info(R"({"mode":"single","trace_kernels_every":3})");
  EXPECT_EQ(sampled.kernels_every, 3);
  EXPECT_TRUE(sampled.kernels_traced(-1)) << "before the first step";
  EXPECT_TRUE(sampled.kernels_traced(0));
  EXPECT_FALSE(sampled.kernels_traced(1));
  EXPECT_FALSE(sampled.kernels_traced(2));
  EXPECT_TRUE(sampled.kernels_traced(3));
  for (const char* json :
       {R"({"mode":"single"})", R"({"trace_kernels_every":0})", R"({"trace_kernels_every":"x"})"}) {
    const RunInfo every = parse_run_info(json);
    EXPECT_EQ(every.kernels_every, 1) << json;
    EXPECT_TRUE(every.kernels_traced(1)) << json;
  }
}

TEST(RunInfo, ReadsWhetherTheRunShuffles) {
  EXPECT_TRUE(parse_run_info(R"({"mode":"ddp","shuffle":true})").shuffle);
  EXPECT_FALSE(parse_run_info(R"({"mode":"ddp","shuffle":false})").shuffle);
  EXPECT_FALSE(parse_run_info(R"({"mode":"ddp"})").shuffle);
}

// Lesson 13's failing run: rank 0 stops in step 2 (trace "step":1) in a collective the others never
// call, while they go on into step 3. At every position of the trace each rank's bucket chips show
// its own step's buckets — derived here straight from that rank's events up to the position, the
// step being that of its latest event — never a step it has left or one it has not reached. After
// rank 0 stopped: rank 0 shows step 2's buckets all done (it finished that backward before its
// logging all-reduce), the others step 3's, not all done.
TEST(ReplayDdp, EachRanksBucketChipsShowTheStepThatRankIsIn) {
  const auto path = scratch_dir() / "mismatch-buckets.jsonl";
  testing::write_failed_ddp_trace(path, 4, "256-512-512-4", 16);
  const Loaded l = load(path);
  const ReplayModel& m = *l.model;
  ASSERT_FALSE(m.run_errors().empty());
  const trace::TraceData& data = l.data;
  for (size_t pos = 1; pos <= m.event_count(); ++pos) {  // `pos` events have happened
    const ReplayState s = m.state_at(m.after_event(pos - 1));
    for (size_t col = 0; col < s.bucket_devices.size(); ++col) {
      const int d = s.bucket_devices[col];
      // The rank's step: that of its latest event so far.
      int64_t step = -1;
      for (size_t p = 0; p < pos; ++p) {
        const trace::Event& e = m.event(m.event_at(p));
        if (m.device_index(e.dev) == d) step = e.step;
      }
      ASSERT_EQ(s.devices[static_cast<size_t>(d)].step, step) << "position " << pos;
      for (const BucketSnapshot& b : s.buckets) {
        BucketState want = BucketState::kPending;
        std::set<int> ready;
        bool launched = false;
        bool done = false;
        for (size_t p = 0; p < pos; ++p) {
          const trace::Event& e = m.event(m.event_at(p));
          if (m.device_index(e.dev) != d || e.step != step) continue;
          if (auto g = data.grad_ready(e)) ready.insert(g->param);
          if (auto a = data.bucket_args(e); a && a->bucket == b.id) {
            launched = launched || e.known == EventName::kBucketLaunched;
            done = done || e.known == EventName::kBucketDone;
          }
        }
        const bool all_ready = !b.params.empty() && std::all_of(b.params.begin(), b.params.end(),
                                                                [&](int p) { return ready.count(p); });
        want = done        ? BucketState::kDone
               : launched  ? BucketState::kLaunched
               : all_ready ? BucketState::kReady
                           : want;
        ASSERT_EQ(b.state[col], want)
            << "position " << pos << ", " << m.devices()[static_cast<size_t>(d)].name << " in trace step "
            << step << ", bucket " << b.id;
      }
    }
  }
  // Between rank 0's stop and the others'.
  const ReplayState s =
      m.state_at(m.at_time((m.run_errors().marks.front().ts_ns + m.run_errors().marks.back().ts_ns) / 2));
  ASSERT_EQ(s.bucket_devices.size(), 4u);
  for (size_t col = 0; col < 4; ++col) {
    const DeviceSnapshot& ds = s.devices[static_cast<size_t>(s.bucket_devices[col])];
    const int rank = m.devices()[static_cast<size_t>(s.bucket_devices[col])].rank;
    EXPECT_EQ(ds.step, rank == 0 ? 1 : 2) << "rank " << rank;
    const bool all_done = std::all_of(s.buckets.begin(), s.buckets.end(), [&](const BucketSnapshot& b) {
      return b.state[col] == BucketState::kDone;
    });
    EXPECT_EQ(all_done, rank == 0) << "rank " << rank;
  }
}

}  // namespace
}  // namespace dpscope::viz
