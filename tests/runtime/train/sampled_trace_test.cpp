// Sampled tracing (`train --trace-kernels-every K`): kernels and copies are traced on one step in
// K; the other steps hold one span per phase, and every step keeps its instants and counters. The
// simulated runs check the shape of such a trace in every mode and that sampling changes no time;
// the cuda case (skipped without a GPU) checks the measured phase spans on a real one.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "dpscope/core/cuda.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

using testing::TempDir;

testing::CommandResult run_limited(const std::string& args) { return testing::run_dpscope_within(120, args); }

// What one training step of one device left in a trace.
struct StepEvents {
  int kernels = 0;                  // spans of category compute
  int copies = 0;                   // copy transfers
  std::vector<std::string> phases;  // phase spans' names, in file order
  std::vector<trace::Event> phase_spans;
  std::vector<int64_t> loss_ts;
  int memory = 0;  // memory counters
};

// Steps of device `dev` (training steps only: step >= 0).
std::map<int, StepEvents> by_step(const trace::TraceData& t, int dev) {
  std::map<int, StepEvents> steps;
  for (const trace::Event& e : t.events) {
    if (e.dev != dev || e.step < 0) continue;
    StepEvents& s = steps[e.step];
    if (e.type == trace::EventType::kSpan && e.category == SpanCategory::kCompute) ++s.kernels;
    if (e.type == trace::EventType::kSpan && e.category == SpanCategory::kPhase) {
      s.phases.push_back(t.strings[e.name]);
      s.phase_spans.push_back(e);
    }
    if (e.type == trace::EventType::kTransfer && e.stream == StreamKind::kCopy) ++s.copies;
    if (e.type == trace::EventType::kCounter && e.known == EventName::kLoss) s.loss_ts.push_back(e.ts_ns);
    if (e.type == trace::EventType::kCounter && e.known == EventName::kMemory) ++s.memory;
  }
  return steps;
}

// The trace ids of the GPUs (the header lists the host and switches too).
std::vector<int> gpu_ids(const trace::TraceData& t) {
  std::vector<int> ids;
  for (const TraceDeviceInfo& d : t.header.devices)
    if (d.kind == "sim" || d.kind == "cuda") ids.push_back(d.id);
  return ids;
}

// Steps 0, K, 2K, ... hold every kernel and no phase span; the others hold no kernel and their
// phases as spans that follow one another on the compute stream, each stamped with its own phase.
void expect_sampled(const trace::TraceData& t, int dev, int64_t total_steps, int64_t every,
                    const std::set<std::string>& phases) {
  const std::map<int, StepEvents> steps = by_step(t, dev);
  ASSERT_EQ(static_cast<int64_t>(steps.size()), total_steps) << "device " << dev;
  int64_t last_end = 0;
  for (const auto& [step, s] : steps) {
    const std::string where = "device " + std::to_string(dev) + ", step " + std::to_string(step);
    if (step % every == 0) {
      EXPECT_GT(s.kernels, 0) << where;
      EXPECT_TRUE(s.phases.empty()) << where;
      continue;
    }
    EXPECT_EQ(s.kernels, 0) << where;
    EXPECT_EQ(s.copies, 0) << where;
    EXPECT_LT(s.memory, steps.at(0).memory) << where << ": per-layer memory counters on sampled steps only";
    EXPECT_EQ(std::set<std::string>(s.phases.begin(), s.phases.end()), phases) << where;
    EXPECT_EQ(s.phases.size(), phases.size()) << where << ": one span per phase";
    for (const trace::Event& p : s.phase_spans) {
      EXPECT_EQ(to_string(p.phase), t.strings[p.name]) << where;
      EXPECT_EQ(p.stream, StreamKind::kCompute) << where;
      EXPECT_GE(p.dur_ns, 0) << where;
      EXPECT_GE(p.ts_ns, last_end) << where << ": phase spans follow one another";
      last_end = p.end_ns();
    }
    EXPECT_GT(s.phase_spans.back().end_ns(), s.phase_spans.front().ts_ns) << where << ": the step took time";
  }
}

const std::string kRun = "train --dataset spirals:512 --model 2-32-32-3 --steps 7 --no-shuffle ";

struct Mode {
  std::string name;
  std::string args;
  int devices;
  std::set<std::string> phases;
};

class SampledTrace : public ::testing::TestWithParam<Mode> {};

TEST_P(SampledTrace, KernelsOnOneStepInKPhaseSpansOnTheOthersAndNoTimeChanges) {
  const Mode& mode = GetParam();
  TempDir dir("sampled_trace");
  const auto full = run_limited(kRun + mode.args + " --trace " + (dir / "full.jsonl"));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const auto sampled =
      run_limited(kRun + mode.args + " --trace-kernels-every 3 --trace " + (dir / "sampled.jsonl"));
  ASSERT_EQ(sampled.exit_code, 0) << sampled.output;

  const trace::TraceData t = trace::read_trace(dir / "sampled.jsonl");
  EXPECT_NE(t.header.run_json.find(R"("trace_kernels_every":3)"), std::string::npos) << t.header.run_json;
  ASSERT_EQ(static_cast<int>(gpu_ids(t).size()), mode.devices);
  for (int dev : gpu_ids(t)) expect_sampled(t, dev, 7, 3, mode.phases);

  // The simulated clocks do not notice: every step's loss is logged at the same time, and the
  // sampled steps' kernels are the full trace's.
  const trace::TraceData f = trace::read_trace(dir / "full.jsonl");
  EXPECT_EQ(f.header.run_json.find("trace_kernels_every"), std::string::npos) << "absent when 1";
  for (int dev : gpu_ids(f)) {
    const std::map<int, StepEvents> a = by_step(f, dev);
    const std::map<int, StepEvents> b = by_step(t, dev);
    for (const auto& [step, s] : a) {
      EXPECT_EQ(s.loss_ts, b.at(step).loss_ts) << "step " << step;
      if (step % 3 == 0) {
        EXPECT_EQ(s.kernels, b.at(step).kernels) << "step " << step;
      }
      // An unsampled step's phase spans cover its kernels: from the first's start to the last's end.
      if (step % 3 != 0 && s.kernels > 0) {
        int64_t first = INT64_MAX;
        int64_t last = 0;
        for (const trace::Event& e : f.events)
          if (e.dev == dev && e.step == step && e.type == trace::EventType::kSpan &&
              e.category == SpanCategory::kCompute) {
            first = std::min(first, e.ts_ns);
            last = std::max(last, e.end_ns());
          }
        EXPECT_LE(b.at(step).phase_spans.front().ts_ns, first) << "step " << step;
        EXPECT_GE(b.at(step).phase_spans.back().end_ns(), last) << "step " << step;
      }
    }
  }
  EXPECT_LT(t.events.size(), f.events.size());
}

INSTANTIATE_TEST_SUITE_P(
    Modes, SampledTrace,
    ::testing::Values(
        Mode{"single", "--batch 64", 1, {"data", "forward", "backward", "optimizer"}},
        Mode{"dp", "--mode dp --devices 2 --batch 64", 2, {"data", "forward", "backward", "optimizer"}},
        Mode{"ddp", "--mode ddp --devices 2 --batch 32", 2, {"data", "forward", "backward", "optimizer"}}),
    [](const ::testing::TestParamInfo<Mode>& param) { return param.param.name; });

void expect_usage_error(const std::string& args, const std::string& needle) {
  testing::expect_usage_error_line(run_limited(args), args, needle);
}

TEST(SampledTraceFlags, ZeroNegativeAndWithoutATraceAreRefused) {
  TempDir dir("sampled_flags");
  const std::string trace = " --trace " + (dir / "t.jsonl");
  expect_usage_error(kRun + "--trace-kernels-every 0" + trace,
                     "--trace-kernels-every must be at least 1, got 0");
  expect_usage_error(kRun + "--trace-kernels-every -4" + trace,
                     "--trace-kernels-every must be at least 1, got -4");
  expect_usage_error(kRun + "--trace-kernels-every 5", "--trace-kernels-every needs --trace");
  EXPECT_FALSE(std::filesystem::exists(dir / "t.jsonl"));
  // Every step traced in full, as without the flag.
  const auto one = run_limited(kRun + "--trace-kernels-every 1" + trace);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const trace::TraceData t = trace::read_trace(dir / "t.jsonl");
  for (const auto& [step, s] : by_step(t, 0)) {
    EXPECT_GT(s.kernels, 0) << step;
    EXPECT_TRUE(s.phases.empty()) << step;
  }
}

// On a GPU: the measured phase spans of unsampled steps, and every sampled step's kernels timed.
TEST(SampledTraceCuda, MeasuredPhaseSpansOnAGpu) {
  if (const std::string reason = cuda::unavailable_reason(); !reason.empty())
    GTEST_SKIP() << "no GPU run: " << reason;
  TempDir dir("sampled_cuda");
  const auto r = run_limited(
      "train --device cuda --model 16-64-64-4 --dataset blobs:1280:16:4 --batch 128 --steps 9 "
      "--trace-kernels-every 4 --trace " +
      (dir / "t.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const trace::TraceData t = trace::read_trace(dir / "t.jsonl");
  expect_sampled(t, 0, 9, 4, {"data", "forward", "backward", "optimizer"});
  for (const auto& [step, s] : by_step(t, 0))
    for (const trace::Event& p : s.phase_spans)
      if (p.phase != Phase::kData) {
        EXPECT_GT(p.dur_ns, 0) << "step " << step << " " << t.strings[p.name];
      }
}

}  // namespace
}  // namespace dpscope
