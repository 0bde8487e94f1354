// The memory row is true from the first moment: every GPU of a run has a memory counter before its
// first kernel starts (what it holds when training starts), and a DataParallel replica's GPU shows
// its replica's parameters when its first kernel starts (they are allocated before it computes; a
// counter only at the end of that kernel made the viewer show "0 B" while it computed).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "dpscope/trace_tools/reader.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

using testing::TempDir;

// The parameters' bytes of the last memory counter of `dev` at or before `ts`; nullopt if none.
std::optional<double> parameters_at(const trace::TraceData& t, int dev, int64_t ts) {
  std::optional<double> found;
  int64_t found_ts = -1;
  for (const trace::Event& e : t.events) {
    if (e.dev != dev || e.type != trace::EventType::kCounter || e.known != EventName::kMemory ||
        e.ts_ns > ts || e.ts_ns < found_ts)
      continue;
    for (const auto& [key, value] : t.counter_values(t.counters[e.payload]))
      if (t.str(key) == "parameters") {
        found = value;
        found_ts = e.ts_ns;
      }
  }
  return found;
}

// Each GPU's first compute span (its start), by device id.
std::map<int, int64_t> first_kernels(const trace::TraceData& t) {
  std::map<int, int64_t> first;
  for (const trace::Event& e : t.events)
    if (e.type == trace::EventType::kSpan && e.category == SpanCategory::kCompute &&
        (!first.contains(e.dev) || e.ts_ns < first[e.dev]))
      first[e.dev] = e.ts_ns;
  return first;
}

trace::TraceData traced(const TempDir& dir, const std::string& mode_args) {
  const std::string trace = (dir.path() / "t.jsonl").string();
  const testing::CommandResult r = testing::run_dpscope_within(
      120, "train " + mode_args + " --model 16-32-4 --dataset blobs:256:16:4 --batch 32 --steps 2 --trace '" +
               trace + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return trace::read_trace(trace);
}

void expect_parameters_from_the_first_kernel(const std::string& mode_args, int gpus) {
  TempDir dir("memory_from_start");
  const trace::TraceData t = traced(dir, mode_args);
  const std::map<int, int64_t> first = first_kernels(t);
  ASSERT_EQ(static_cast<int>(first.size()), gpus) << mode_args;
  for (const auto& [dev, ts] : first) {
    const std::optional<double> parameters = parameters_at(t, dev, ts);
    ASSERT_TRUE(parameters.has_value()) << mode_args << ": device " << dev << " has no memory counter before "
                                        << "its first kernel at " << ts << " ns";
    EXPECT_GT(*parameters, 0) << mode_args << ": device " << dev << " computes with no parameters shown";
  }
}

TEST(MemoryFromTheStart, OneGpu) { expect_parameters_from_the_first_kernel("--mode single", 1); }

TEST(MemoryFromTheStart, DataParallelReplicas) {
  expect_parameters_from_the_first_kernel("--mode dp --devices 4", 4);
}

TEST(MemoryFromTheStart, DdpRanks) { expect_parameters_from_the_first_kernel("--mode ddp --devices 4", 4); }

// Before the first step, a DataParallel replica's GPU holds nothing yet (the replica is copied in
// every forward), and the model's GPU holds the model: the step -1 counters say so.
TEST(MemoryFromTheStart, BeforeTheFirstStepOnlyTheModelsGpuHoldsParameters) {
  TempDir dir("memory_before_step");
  const trace::TraceData t = traced(dir, "--mode dp --devices 4");
  std::map<int, double> before;
  for (const trace::Event& e : t.events)
    if (e.type == trace::EventType::kCounter && e.known == EventName::kMemory && e.step == -1)
      for (const auto& [key, value] : t.counter_values(t.counters[e.payload]))
        if (t.str(key) == "parameters") before[e.dev] = value;
  ASSERT_EQ(before.size(), 4u);
  EXPECT_GT(before.begin()->second, 0);  // device 0: the module
  for (auto it = std::next(before.begin()); it != before.end(); ++it) EXPECT_EQ(it->second, 0) << it->first;
}

}  // namespace
}  // namespace dpscope
