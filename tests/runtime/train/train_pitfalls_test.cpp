// The pitfalls that end a run (train/train.hpp TrainConfig::pitfalls; lesson 13): the run stops
// with one error that names the cause, and its trace still ends readably, with an `error` instant
// per failing rank saying why (docs/trace-format.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/train/train.hpp"
#include "support/errors.hpp"
#include "support/temp_files.hpp"

namespace dpscope {
namespace {

using testing::error_of;
using testing::TempDir;

TrainConfig small_ddp(const std::string& trace) {
  TrainConfig config;
  config.mode = TrainMode::kDdp;
  config.devices = 3;
  config.model = "4-8-2";
  config.dataset = "blobs:96:4:2";
  config.batch = 8;
  config.shuffle = false;
  config.steps = 3;
  config.trace = trace;
  return config;
}

struct TracedError {
  int rank = 0;
  int64_t step = 0;
  std::string message;
};

std::vector<TracedError> traced_errors(const std::string& path) {
  const trace::TraceData data = trace::read_trace(path);
  std::vector<TracedError> errors;
  for (const trace::Event& e : data.events)
    if (const std::optional<RunError> error = data.run_error(e))
      errors.push_back({e.rank, e.step, std::string(error->message)});
  std::sort(errors.begin(), errors.end(),
            [](const TracedError& a, const TracedError& b) { return a.rank < b.rank; });
  return errors;
}

// `if rank == 0: dist.all_reduce(loss)`: rank 0's collective number 7 (after the initial checks,
// the broadcast and steps 0 and 1's bucket all-reduces... here one bucket per step) meets the
// others' gradient all-reduce of step 2. Every rank fails with kMismatch naming both collectives,
// instead of waiting for each other.
TEST(TrainPitfalls, MismatchedCollectiveStopsEveryRankWithAnErrorNamingBothSides) {
  TempDir dir("mismatch");
  TrainConfig config = small_ddp(dir / "t.jsonl");
  config.pitfalls = {"mismatched-collective"};
  const testing::Outcome outcome = error_of([&] { run_training(config); });
  EXPECT_EQ(outcome.kind, ErrorKind::kMismatch) << outcome.message;
  EXPECT_NE(
      outcome.message.find("Detected mismatch between collectives on ranks. Rank 0 is running collective: "
                           "CollectiveFingerPrint(SequenceNumber="),
      std::string::npos)
      << outcome.message;
  EXPECT_NE(outcome.message.find("OpType=ALLREDUCE, TensorShape=[1], TensorDtypes=float32, ReduceOp=avg"),
            std::string::npos)
      << outcome.message;
  EXPECT_NE(outcome.message.find("but Rank 1 is running collective: CollectiveFingerPrint("),
            std::string::npos)
      << outcome.message;
  EXPECT_NE(outcome.message.find("(ranks that differ from rank 0: [1, 2])"), std::string::npos)
      << outcome.message;

  const std::vector<TracedError> errors = traced_errors(dir / "t.jsonl");
  ASSERT_EQ(errors.size(), 3u) << "one error instant per rank";
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r].rank, r);
    EXPECT_NE(errors[r].message.find("Detected mismatch between collectives on ranks"), std::string::npos)
        << errors[r].message;
  }
  EXPECT_EQ(errors[0].step, 1) << "rank 0 stops after step 1, in its logging all-reduce";
  EXPECT_EQ(errors[1].step, 2) << "the others stop in step 2, at its gradient all-reduce";
}

// The lone collective as the timeline shows it (lesson 13, chapter 4): rank 0's all-reduce of its
// loss is traced as a `collective` span that starts where rank 0 calls it, right after its step-2
// optimizer step, and lasts until the last other rank calls its own next collective (step 3's
// first gradient bucket: 256-512-512-4 has two buckets, so backward goes on after it); then every
// rank's call ends with the mismatch error in `args.error`, and no chunk moves. Rank 0 stops at
// that moment; the others when DDP waits for the bucket at the end of their backward.
TEST(TrainPitfalls, MismatchedCollectiveTracesRankZerosLoneAllReduceWaitingForTheOthers) {
  TempDir dir("lone");
  TrainConfig config = small_ddp(dir / "t.jsonl");
  config.devices = 4;
  config.model = "256-512-512-4";
  config.dataset = "blobs:256:256:4";
  config.batch = 16;
  config.pitfalls = {"mismatched-collective"};
  const testing::Outcome outcome = error_of([&] { run_training(config); });
  ASSERT_EQ(outcome.kind, ErrorKind::kMismatch) << outcome.message;

  const trace::TraceData data = trace::read_trace(dir / "t.jsonl");
  std::vector<const trace::Event*> failed(4, nullptr);  // by rank
  std::vector<int64_t> error_ns(4, -1);
  std::vector<std::string> error_message(4);
  int64_t optimizer_end_ns = -1;                  // rank 0, step 1 (the trace's 0-based step)
  std::vector<int64_t> bucket0_launch_ns(4, -1);  // step 2's first bucket, by rank
  for (const trace::Event& e : data.events) {
    if (const std::optional<std::string_view> error = data.collective_error(e)) {
      ASSERT_EQ(failed[static_cast<size_t>(e.rank)], nullptr) << "one failed collective per rank";
      failed[static_cast<size_t>(e.rank)] = &e;
    }
    if (const std::optional<RunError> run_error = data.run_error(e)) {
      error_ns[static_cast<size_t>(e.rank)] = e.ts_ns;
      error_message[static_cast<size_t>(e.rank)] = std::string(run_error->message);
    }
    if (e.rank == 0 && e.step == 1 && e.type == trace::EventType::kSpan && e.phase == Phase::kOptimizer)
      optimizer_end_ns = std::max(optimizer_end_ns, e.end_ns());
    if (e.known == EventName::kBucketLaunched && e.step == 2 && data.bucket_args(e)->bucket == 0)
      bucket0_launch_ns[static_cast<size_t>(e.rank)] = e.ts_ns;
  }
  for (int r = 0; r < 4; ++r) ASSERT_NE(failed[static_cast<size_t>(r)], nullptr) << "rank " << r;
  const trace::Event& lone = *failed[0];
  const int64_t coll = static_cast<int64_t>(data.arg(lone, "coll").value());
  EXPECT_EQ(data.text_arg(lone, "op"), "all_reduce");
  EXPECT_EQ(data.arg(lone, "count"), 1.0) << "the loss: one element";
  EXPECT_EQ(data.text_arg(lone, "redop"), "avg");
  EXPECT_EQ(lone.stream, StreamKind::kComm);
  EXPECT_EQ(lone.step, 1);
  EXPECT_EQ(lone.ts_ns, optimizer_end_ns) << "rank 0 calls it right after its optimizer step";

  // It ends when the last other rank arrives with its first gradient bucket: every call ends then.
  int64_t last_arrival_ns = 0;
  for (int r = 1; r < 4; ++r) {
    const trace::Event& theirs = *failed[static_cast<size_t>(r)];
    EXPECT_EQ(static_cast<int64_t>(data.arg(theirs, "coll").value()), coll) << "the same sequence number";
    EXPECT_EQ(theirs.step, 2);
    EXPECT_EQ(theirs.ts_ns, bucket0_launch_ns[static_cast<size_t>(r)]) << "rank " << r;
    EXPECT_GT(data.arg(theirs, "count").value(), 1.0) << "a gradient bucket";
    last_arrival_ns = std::max(last_arrival_ns, theirs.ts_ns);
  }
  EXPECT_GT(lone.dur_ns, 0);
  EXPECT_EQ(lone.end_ns(), last_arrival_ns);
  for (int r = 0; r < 4; ++r) {
    const trace::Event& call = *failed[static_cast<size_t>(r)];
    EXPECT_EQ(call.end_ns(), last_arrival_ns) << "rank " << r;
    EXPECT_EQ(data.collective_error(call), error_message[static_cast<size_t>(r)]) << "rank " << r;
    EXPECT_TRUE(error_message[static_cast<size_t>(r)].starts_with(
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: "))
        << error_message[static_cast<size_t>(r)];
  }
  // No chunk of it moved, and it never completed.
  for (const trace::Event& e : data.events) {
    if (e.type == trace::EventType::kTransfer) {
      EXPECT_NE(data.transfer(e).coll, coll);
    }
    if (e.known == EventName::kWorkCompleted) {
      EXPECT_NE(data.arg(e, "coll"), static_cast<double>(coll));
    }
  }
  // Rank 0 stops when the mismatch is found; the others finish their backward first.
  EXPECT_EQ(error_ns[0], last_arrival_ns);
  for (int r = 1; r < 4; ++r) EXPECT_GT(error_ns[static_cast<size_t>(r)], error_ns[0]) << "rank " << r;
}

// PyTorch's semantics: without find_unused_parameters the first iteration runs, and the next one
// stops in forward with the reducer's message naming the parameters without a gradient.
TEST(TrainPitfalls, UnusedParameterStopsTheNextIterationAndTheTraceSaysWhy) {
  TempDir dir("unused");
  TrainConfig config = small_ddp(dir / "t.jsonl");
  config.devices = 2;
  config.pitfalls = {"unused-parameter"};
  const testing::Outcome outcome = error_of([&] { run_training(config); });
  EXPECT_EQ(outcome.kind, ErrorKind::kInvalidArgument) << outcome.message;
  EXPECT_NE(
      outcome.message.find("Expected to have finished reduction in the prior iteration before starting a "
                           "new one."),
      std::string::npos)
      << outcome.message;
  EXPECT_NE(outcome.message.find("which did not receive grad for rank "), std::string::npos)
      << outcome.message;

  const std::vector<TracedError> errors = traced_errors(dir / "t.jsonl");
  ASSERT_EQ(errors.size(), 2u);
  for (const TracedError& e : errors) {
    EXPECT_EQ(e.step, 1) << "the second iteration";
    EXPECT_NE(
        e.message.find(fmt::format("Parameter indices which did not receive grad for rank {}: 4, 5", e.rank)),
        std::string::npos)
        << e.message;
  }

  config.find_unused_parameters = true;  // the fix: DDP marks the unused parameters ready itself
  EXPECT_NO_THROW(run_training(config));
  EXPECT_TRUE(traced_errors(dir / "t.jsonl").empty());
}

// A loss that stops being finite (--lr 1e308) stopped single and dp runs without an `error` instant
// in their traces (its check came after the step's try), where DDP's ranks had one each.
TEST(TrainPitfalls, ANonFiniteLossStopsEveryModeWithAnErrorInstant) {
  for (const auto& [mode, devices] :
       {std::pair{TrainMode::kSingle, 1}, {TrainMode::kDataParallel, 2}, {TrainMode::kDdp, 2}}) {
    TempDir dir("nonfinite");
    TrainConfig config = small_ddp(dir / "t.jsonl");
    config.mode = mode;
    config.devices = devices;
    config.lr = 1e308;
    const testing::Outcome outcome = error_of([&] { run_training(config); });
    EXPECT_NE(outcome.message.find("(try a smaller --lr)"), std::string::npos) << outcome.message;
    const std::vector<TracedError> errors = traced_errors(dir / "t.jsonl");
    ASSERT_EQ(errors.size(), static_cast<size_t>(mode == TrainMode::kDdp ? devices : 1)) << outcome.message;
    EXPECT_NE(errors[0].message.find("loss became"), std::string::npos) << errors[0].message;
  }
}

TEST(TrainPitfalls, ARunThatEndsNormallyHasNoErrorEvent) {
  TempDir dir("fine");
  run_training(small_ddp(dir / "t.jsonl"));
  EXPECT_TRUE(traced_errors(dir / "t.jsonl").empty());
}

TEST(TrainPitfalls, UnknownAndMisplacedPitfallsAreUsageErrors) {
  TrainConfig config = small_ddp("");
  config.pitfalls = {"typo"};
  EXPECT_EQ(
      testing::what_of([&] { config.validate(); }),
      "--pitfall 'typo' is not one of no-set-epoch, no-average, unused-parameter, mismatched-collective, "
      "input-on-cpu");
  config.pitfalls = {"input-on-cpu"};
  EXPECT_EQ(testing::what_of([&] { config.validate(); }),
            "--pitfall input-on-cpu applies to --mode single on a GPU (--device sim or cuda)");
  config.mode = TrainMode::kSingle;
  config.devices = 1;
  config.pitfalls = {"mismatched-collective"};
  EXPECT_EQ(testing::what_of([&] { config.validate(); }),
            "--pitfall mismatched-collective applies to --mode ddp only");
}

TEST(TrainPitfalls, InputOnCpuStopsTheLastStepWithPyTorchsDeviceMismatch) {
  // Lesson 1's last chapter: the first step runs the whole loop, the second forgets x.to(device).
  TempDir dir("input_on_cpu");
  TrainConfig config;
  config.dataset = "blobs:256:32:4";
  config.model = "32-16-4";
  config.batch = 64;
  config.steps = 2;
  config.shuffle = false;
  config.trace = dir / "t.jsonl";
  config.pitfalls = {"input-on-cpu"};
  int steps_done = 0;
  EXPECT_EQ(testing::what_of([&] { run_training(config, [&](const StepReport&) { ++steps_done; }); }),
            "Expected all tensors to be on the same device, but found at least two devices, sim:0 and cpu!");
  EXPECT_EQ(steps_done, 1);
  const std::vector<TracedError> errors = traced_errors(dir / "t.jsonl");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].step, 1);
  EXPECT_EQ(errors[0].message,
            "Expected all tensors to be on the same device, but found at least two devices, sim:0 and cpu!");
}

}  // namespace
}  // namespace dpscope
