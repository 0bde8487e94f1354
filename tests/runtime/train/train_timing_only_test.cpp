// `dpscope train --timing-only`: DDP on shapes without data for worlds far beyond this machine
// (docs/scaling.md). The real DDP code runs on rank 0 with the analytic backend; one node equals
// the rank-thread simulation; what it refuses, each in one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/train/train.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

using ::testing::HasSubstr;
using testing::run_dpscope;
using testing::TempDir;

TrainConfig timing_only(int devices) {
  TrainConfig c;
  c.mode = TrainMode::kDdp;
  c.timing_only = true;
  c.devices = devices;
  c.model = "512-1024-1024-10";
  c.batch = 32;
  c.steps = 2;
  return c;
}

TEST(TimingOnly, AThousandGpusReportTheirScaling) {
  const TrainResult r = run_training(timing_only(1024));
  ASSERT_TRUE(r.scaling.has_value());
  EXPECT_EQ(r.steps, 2);
  EXPECT_THAT(r.scaling->world, HasSubstr("1024 GPUs: 128 nodes x 8 GPUs"));
  EXPECT_GT(r.scaling->one_gpu_step_ns, 0);
  // Weak scaling can only lose time: the world's step is the one-GPU step plus what communication
  // backward did not hide.
  EXPECT_EQ(r.scaling->step_ns, r.scaling->one_gpu_step_ns + r.scaling->exposed_comm_ns);
  EXPECT_GT(r.scaling->exposed_comm_ns, 0);
  EXPECT_NEAR(r.scaling->efficiency,
              static_cast<double>(r.scaling->one_gpu_step_ns) / static_cast<double>(r.scaling->step_ns),
              1e-12);
  // More GPUs across more nodes never make the step shorter; one GPU has nothing to exchange.
  const TrainResult one = run_training(timing_only(1));
  EXPECT_EQ(one.scaling->step_ns, one.scaling->one_gpu_step_ns);
  EXPECT_DOUBLE_EQ(one.scaling->efficiency, 1.0);
  int64_t previous = 0;
  for (int n : {8, 64, 1024}) {
    const int64_t step = run_training(timing_only(n)).scaling->step_ns;
    EXPECT_GE(step, previous) << n << " GPUs";
    previous = step;
  }
}

TEST(TimingOnly, OneNodeTakesTheRankThreadSimulationsTime) {
  // Within one node the analytic backend times the very schedules the sim backend's ranks run, so
  // a timing-only step equals the step of the simulated run with data (same model, batch, bucket).
  TrainConfig threads = timing_only(4);
  threads.timing_only = false;
  threads.dataset = "blobs:512:512:10";
  threads.shuffle = false;
  int64_t thread_step = 0;
  run_training(threads, [&](const StepReport& s) {
    if (s.step == 1) thread_step = s.sim_step_ns;
  });
  int64_t analytic_step = 0;
  run_training(timing_only(4), [&](const StepReport& s) {
    if (s.step == 1) analytic_step = s.sim_step_ns;
  });
  ASSERT_GT(thread_step, 0);
  // The data run also reads its batch and computes the loss's value, and its broadcast's root is
  // done when its sends are (the analytic backend holds every rank to the last receiver: with NCCL's
  // cost model a 24-byte broadcast lasts 8.4 us, so the host-issue backlog differs by that much more
  // each step): within about a tenth. The collectives' own durations agree exactly
  // (NcclCostModel.SimBackendAnalyticBackendAndModelAgree).
  EXPECT_NEAR(static_cast<double>(analytic_step), static_cast<double>(thread_step), 0.12 * thread_step);
}

TEST(TimingOnly, TracesRankZeroWithTheWorldInEveryCollective) {
  TempDir dir("timing_only_trace");
  const auto r = run_dpscope(
      "train --mode ddp --timing-only --devices 64 --model 256-512-10 --batch 16 --steps 2 "
      "--trace " +
      (dir / "t.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("timing-only world: 64 GPUs: 8 nodes x 8 GPUs"));
  EXPECT_THAT(r.output, HasSubstr("scaling efficiency"));
  EXPECT_THAT(r.output, HasSubstr("no data (timing-only)"));
  const trace::TraceData t = trace::read_trace(dir / "t.jsonl");
  EXPECT_EQ(t.header.devices.size(), 2u);  // sim:0 and the host
  EXPECT_THAT(t.header.run_json, HasSubstr(R"("devices":64)"));
  EXPECT_THAT(t.header.run_json, HasSubstr(R"("timing_only":true)"));
  int collectives = 0;
  for (const trace::Event& e : t.events) {
    if (e.category != SpanCategory::kCollective) continue;
    ++collectives;
    EXPECT_EQ(t.arg(e, "ranks"), 64.0) << t.str(e.name);
  }
  EXPECT_GT(collectives, 2);  // the weights' broadcast, the bucket order, the gradients' all-reduces
}

TEST(TimingOnly, RefusesWhatItCannotSimulateInOneLine) {
  const std::string run = "train --mode ddp --timing-only --model 64-64-10 --steps 1 ";
  auto expect = [](const std::string& args, const std::string& message) {
    const auto r = run_dpscope(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(message)) << args;
  };
  expect("train --mode dp --devices 2 --timing-only --model 64-10",
         "--timing-only simulates DistributedDataParallel at scale: it needs --mode ddp --device sim, got "
         "--mode dp "
         "--device sim");
  expect(run + "--devices 70000", "--devices 70000 is more than the 65536 GPUs --timing-only simulates");
  expect(run + "--devices 2 --dataset spirals:64",
         "--timing-only runs on shapes without data: it takes no --data, --dataset, --init, --save, "
         "--checkpoint-dir or --resume");
  expect(run + "--devices 2 --pitfall no-set-epoch",
         "--timing-only has no data for --pitfall no-set-epoch to show (only no-average applies)");
  expect(run + "--devices 12",
         "12 GPUs are not a whole number of 8-GPU nodes (preset h100-sxm); use a multiple of 8");
  expect(run + "--devices 16 --preset t4",
         "preset t4 describes one machine of at most 8 GPUs (it has no [cluster] table)");
  // Trees across nodes are NCCL's (the cost model's); the naive pattern has no NCCL equivalent.
  expect(run + "--devices 16 --algo naive",
         "with the naive algorithm is not modelled across nodes (2 nodes of 8 GPUs)");
  expect("train --mode ddp --devices 100 --dataset spirals:64 --model 2-8-3",
         "--devices 100 is more than the 64 GPUs supported (add --timing-only to simulate more)");
}

}  // namespace
}  // namespace dpscope
