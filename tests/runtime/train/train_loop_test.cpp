// The one training loop (runtime/src/train/loop.hpp) over a strategy that records what it is asked
// to do: which steps it runs, in which phase each call happens, when the optimizer steps (not under
// no_sync), when checkpoints are due, where a resumed run starts, and what a failing or non-finite
// step does. Every mode's strategy relies on exactly these guarantees.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/core/preset.hpp"
#include "loop.hpp"
#include "support/errors.hpp"

namespace dpscope::detail {
namespace {

// A strategy on one simulated GPU whose phases write "name:step:phase" into `calls`; each step's
// loss is `losses[step]` (nothing when `losses` is empty), and its clock advances 10 ns a step.
class RecordingStrategy final : public TrainStrategy {
 public:
  RecordingStrategy(RunLength length, std::vector<double> losses)
      : devices_{Device::sim(0, find_preset("h100-sxm"))}, length_(length), losses_(std::move(losses)) {}

  std::vector<std::string> calls;
  std::optional<int64_t> fail_at_step;  // load_batch throws on this step
  std::string failure_seen;
  std::vector<std::string> run_ids;  // of each checkpoint

  const std::vector<Device>& devices() const override { return devices_; }
  const RunLength& length() const override { return length_; }
  int64_t step_clock() override { return clock_ns_ += 10; }
  void begin_epoch(int64_t epoch) override { calls.push_back("epoch:" + std::to_string(epoch)); }
  void load_batch(const StepPlan& plan) override {
    if (fail_at_step == plan.step) throw std::runtime_error("the batch is gone");
    note("data", plan, Phase::kData);
    calls.back() += ":batch" + std::to_string(plan.batch);
  }
  std::optional<double> forward(const StepPlan& plan) override {
    note("forward", plan, Phase::kForward);
    if (losses_.empty()) return std::nullopt;
    return losses_.at(static_cast<size_t>(plan.step));
  }
  void backward(const StepPlan& plan) override { note("backward", plan, Phase::kBackward); }
  void optimizer_step() override {
    EXPECT_EQ(devices_.front().phase(), Phase::kOptimizer);
    calls.push_back("optimizer");
  }
  void after_step(const StepPlan& plan, double /*loss*/) override {
    calls.push_back(fmt::format("after:{}", plan.step));
  }
  std::string checkpoint(const CheckpointSpot& spot) override {
    EXPECT_EQ(devices_.front().phase(), Phase::kCheckpoint);
    EXPECT_EQ(spot.batches_per_epoch, length_.batches_per_epoch);
    run_ids.emplace_back(spot.run_id);
    calls.push_back(
        fmt::format("checkpoint:{}:epoch{}:batch{}", spot.steps_done, spot.last.epoch, spot.last.batch));
    return fmt::format("ckpt-{}", spot.steps_done);
  }
  void step_failed(std::string_view message) override { failure_seen = message; }

 private:
  // Records a phase call, checking the device is in `phase` and counts this step.
  void note(const char* what, const StepPlan& plan, Phase phase) {
    EXPECT_EQ(devices_.front().phase(), phase) << what;
    EXPECT_EQ(devices_.front().step(), plan.step) << what;
    calls.push_back(fmt::format("{}:{}{}", what, plan.step, plan.sync ? "" : ":no_sync"));
  }

  std::vector<Device> devices_;
  RunLength length_;
  std::vector<double> losses_;
  int64_t clock_ns_ = 0;
};

std::vector<std::string> only(const std::vector<std::string>& calls, const std::string& prefix) {
  std::vector<std::string> kept;
  for (const std::string& c : calls)
    if (c.rfind(prefix, 0) == 0) kept.push_back(c);
  return kept;
}

TEST(TrainLoop, RunsEveryPhaseInOrderInItsPhaseAndReportsEachStep) {
  RecordingStrategy strategy(
      {.batches_per_epoch = 2, .total_steps = 3, .checkpoint_every = 2, .sync_every = 1}, {0.5, 0.25, 0.125});
  std::vector<StepReport> reports;
  const TrainResult result =
      train_loop(strategy, TrainConfig{}, {.on_step = [&](const StepReport& r) { reports.push_back(r); }});
  const std::vector<std::string> expected = {
      "epoch:0",       "data:0:batch0", "forward:0",  "backward:0", "optimizer", "after:0",
      "data:1:batch1", "forward:1",     "backward:1", "optimizer",  "after:1",   "epoch:1",
      "data:2:batch0", "forward:2",     "backward:2", "optimizer",  "after:2"};
  EXPECT_EQ(strategy.calls, expected);
  EXPECT_EQ(result.steps, 3);
  EXPECT_EQ(result.losses, (std::vector<double>{0.5, 0.25, 0.125}));
  EXPECT_EQ(result.last_checkpoint, "");  // no --checkpoint-dir
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports[2].step, 2);
  EXPECT_EQ(reports[2].epoch, 1);
  EXPECT_EQ(reports[2].total_steps, 3);
  EXPECT_EQ(reports[2].loss, 0.125);
  EXPECT_EQ(reports[2].rank, -1);
  EXPECT_EQ(reports[2].sim_step_ns, 10);  // the strategy's clock at the step's end minus its start
  EXPECT_EQ(strategy.devices().front().phase(), Phase::kNone);
  EXPECT_EQ(strategy.devices().front().step(), -1);
}

TEST(TrainLoop, TheOptimizerStepsOnlyOnSynchronizedStepsAndAlwaysOnTheLast) {
  // --no-sync-every 3 over 7 steps: steps 2 and 5 synchronize, and step 6 because it is the last.
  RecordingStrategy strategy(
      {.batches_per_epoch = 10, .total_steps = 7, .checkpoint_every = 10, .sync_every = 3}, {});
  train_loop(strategy, TrainConfig{}, {});
  EXPECT_EQ(
      only(strategy.calls, "backward"),
      (std::vector<std::string>{"backward:0:no_sync", "backward:1:no_sync", "backward:2",
                                "backward:3:no_sync", "backward:4:no_sync", "backward:5", "backward:6"}));
  EXPECT_EQ(only(strategy.calls, "optimizer").size(), 3u);
}

TEST(TrainLoop, CheckpointsAtDueSynchronizedBoundariesInTheCheckpointPhase) {
  TrainConfig config;
  config.checkpoint_dir = "checkpoints";  // the strategy writes nothing; the loop only schedules
  RecordingStrategy strategy(
      {.batches_per_epoch = 4, .total_steps = 8, .checkpoint_every = 3, .sync_every = 1},
      {1, 1, 1, 1, 1, 1, 1, 1});
  const TrainResult result = train_loop(strategy, config, {});
  EXPECT_EQ(only(strategy.calls, "checkpoint"),
            (std::vector<std::string>{"checkpoint:3:epoch0:batch2", "checkpoint:6:epoch1:batch1",
                                      "checkpoint:8:epoch1:batch3"}));
  EXPECT_EQ(result.last_checkpoint, "ckpt-8");
  // A fresh run's checkpoints are all written under one new id.
  ASSERT_EQ(strategy.run_ids.size(), 3u);
  EXPECT_EQ(strategy.run_ids[0].size(), 16u);
  EXPECT_EQ(strategy.run_ids[1], strategy.run_ids[0]);
  EXPECT_EQ(strategy.run_ids[2], strategy.run_ids[0]);
  // The id given to the loop (rank threads share one) is the one used.
  RecordingStrategy given({.batches_per_epoch = 4, .total_steps = 3, .checkpoint_every = 3, .sync_every = 1},
                          {1, 1, 1});
  train_loop(given, config, {.run_id = "00000000000000ab"});
  EXPECT_EQ(given.run_ids, (std::vector<std::string>{"00000000000000ab"}));
}

TEST(TrainLoop, AResumedRunStartsWhereItsCheckpointLeftOff) {
  RecordingStrategy strategy(
      {.batches_per_epoch = 4, .total_steps = 7, .checkpoint_every = 4, .sync_every = 1},
      {1, 1, 1, 1, 1, 1, 1});
  ResumeCheckpoint resumed;
  resumed.file = "dir/checkpoint-00000005.safetensors";
  resumed.state.run_id = "0123456789abcdef";
  resumed.state.steps_done = 5;
  resumed.state.epoch = 1;
  resumed.state.batch_in_epoch = 1;
  TrainConfig config;
  config.checkpoint_dir = "dir";
  const TrainResult result = train_loop(strategy, config, {.resumed = &resumed});
  EXPECT_EQ(only(strategy.calls, "epoch"), (std::vector<std::string>{"epoch:1"}));
  EXPECT_EQ(only(strategy.calls, "data"), (std::vector<std::string>{"data:5:batch1", "data:6:batch2"}));
  EXPECT_EQ(result.steps, 7);
  EXPECT_EQ(result.losses.size(), 2u);  // the steps this loop ran
  EXPECT_EQ(result.resumed_from_step, 5);
  // It goes on writing checkpoints under the resumed run's id.
  EXPECT_EQ(strategy.run_ids, (std::vector<std::string>{"0123456789abcdef"}));
}

TEST(TrainLoop, AStepWithoutALossReportsNoneAndSkipsTheLossCheck) {
  RecordingStrategy strategy(
      {.batches_per_epoch = 2, .total_steps = 2, .checkpoint_every = 2, .sync_every = 1}, {});
  std::vector<double> reported;
  const TrainResult result = train_loop(
      strategy, TrainConfig{}, {.on_step = [&](const StepReport& r) { reported.push_back(r.loss); }});
  EXPECT_TRUE(result.losses.empty());
  EXPECT_EQ(reported, (std::vector<double>{0.0, 0.0}));
  EXPECT_TRUE(only(strategy.calls, "after").empty());
}

TEST(TrainLoop, ANonFiniteLossStopsTheRunNamingTheStepFromOneAndTheRank) {
  RecordingStrategy strategy(
      {.batches_per_epoch = 4, .total_steps = 4, .checkpoint_every = 4, .sync_every = 1},
      {1.0, std::numeric_limits<double>::infinity(), 1.0, 1.0});
  const testing::Outcome e = testing::error_of([&] { train_loop(strategy, TrainConfig{}, {.rank = 2}); });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message, "loss became inf at step 2 on rank 2 (try a smaller --lr)");
  EXPECT_EQ(only(strategy.calls, "data").size(), 2u);
}

TEST(TrainLoop, AFailingStepIsHandedToTheStrategyAndPropagates) {
  RecordingStrategy strategy(
      {.batches_per_epoch = 4, .total_steps = 4, .checkpoint_every = 4, .sync_every = 1}, {1, 1, 1, 1});
  strategy.fail_at_step = 1;
  EXPECT_THROW(train_loop(strategy, TrainConfig{}, {}), std::runtime_error);
  EXPECT_EQ(strategy.failure_seen, "the batch is gone");
  EXPECT_EQ(strategy.devices().front().phase(), Phase::kNone);  // the data phase was left
}

}  // namespace
}  // namespace dpscope::detail
