// merge_rank_traces() and `dpscope trace merge`: process ranks' rank-K.jsonl files on rank 0's clock
// (offsets from each header's "process" entry), devices renumbered and named per rank, flow ids kept
// apart, events in time order; the errors, one line each. The real mpirun path is tests/mpi/cli.
#include "dpscope/trace/merge.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_format/reader.hpp"
#include "support/errors.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using ::dpscope::testing::error_of;
using ::dpscope::testing::Outcome;
using ::testing::HasSubstr;
using testing::scratch_dir;
using testing::write_file;

// A rank's trace: a header (one cpu device, the "process" entry) and `events` lines.
std::string rank_trace(int rank, int64_t offset_ns, const std::string& events) {
  TraceHeader h;
  h.clock = "measured";
  h.run_json = fmt::format(
      R"({{"mode":"ddp","backend":"mpi","process":{{"rank":{},"world_size":2,"clock_offset_ns":{},"clock_uncertainty_ns":7}}}})",
      rank, offset_ns);
  h.devices.push_back({.id = 0, .name = "cpu", .kind = "cpu"});
  fmt::memory_buffer out;
  append_trace_header(out, h);
  return fmt::to_string(out) + "\n" + events;
}

std::string span(int rank, int64_t ts, const char* name) {
  return fmt::format(
      R"({{"type":"span","ts":{},"rank":{},"dev":0,"step":0,"phase":"backward","name":"{}","cat":"compute","stream":"compute","dur":100}})"
      "\n",
      ts, rank, name);
}

TEST(MergeRankTraces, PutsEveryRankOnRankZerosClock) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_trace(0, 0, span(0, 1000, "a0") + span(0, 3000, "b0")));
  write_file(dir / "rank-1.jsonl", rank_trace(1, 1500, span(1, 100, "a1") + span(1, 900, "b1")));
  const MergeResult r = merge_rank_traces(dir, dir / "merged.jsonl");
  EXPECT_EQ(r.ranks, 2);
  EXPECT_EQ(r.events, 4u);
  ASSERT_EQ(r.clocks.size(), 2u);
  EXPECT_EQ(r.clocks[1].offset_ns, 1500);
  EXPECT_EQ(r.clocks[1].uncertainty_ns, 7);
  const TraceData t = read_trace(dir / "merged.jsonl");
  ASSERT_EQ(t.header.devices.size(), 2u);
  EXPECT_EQ(t.header.devices[0].name, "cpu:0");
  EXPECT_EQ(t.header.devices[1].name, "cpu:1");
  EXPECT_THAT(t.header.run_json, HasSubstr(R"("rank":0)"));
  // In time order on rank 0's clock: a0 1000, a1 100+1500, b1 900+1500, b0 3000.
  ASSERT_EQ(t.events.size(), 4u);
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"a0", 1000}, {"a1", 1600}, {"b1", 2400}, {"b0", 3000}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(t.str(t.events[i].name), expected[i].first);
    EXPECT_EQ(t.events[i].ts_ns, expected[i].second);
    EXPECT_EQ(t.events[i].dev, expected[i].first.back() == '1' ? 1 : 0);
  }
}

TEST(MergeRankTraces, RefusesWhatItCannotMergeInOneLine) {
  const auto dir = scratch_dir();
  EXPECT_EQ(error_of([&] { merge_rank_traces(dir, dir / "m.jsonl"); }).message,
            fmt::format("trace merge: no rank-K.jsonl files in '{}'", dir.string()));
  write_file(dir / "rank-1.jsonl", rank_trace(1, 0, ""));
  EXPECT_EQ(error_of([&] { merge_rank_traces(dir, dir / "m.jsonl"); }).message,
            fmt::format("trace merge: '{}' has rank-1.jsonl but no rank-0.jsonl", dir.string()));
  write_file(dir / "rank-0.jsonl", rank_trace(1, 0, ""));
  EXPECT_EQ(error_of([&] { merge_rank_traces(dir, dir / "m.jsonl"); }).message,
            fmt::format("trace merge: {} says it is rank 1", (dir / "rank-0.jsonl").string()));
  write_file(dir / "rank-0.jsonl", rank_trace(0, 0, ""));
  const Outcome overwrite = error_of([&] { merge_rank_traces(dir, dir / "rank-1.jsonl"); });
  EXPECT_EQ(overwrite.kind, ErrorKind::kUsage);
  EXPECT_EQ(overwrite.message,
            fmt::format("trace merge: OUT '{}' is rank 1's trace; refusing to overwrite it",
                        (dir / "rank-1.jsonl").string()));
  const auto plain = scratch_dir() / "plain";
  std::filesystem::create_directories(plain);
  write_file(plain / "rank-0.jsonl", [] {
    TraceHeader h;
    h.devices.push_back({.id = 0, .name = "sim:0", .kind = "sim"});
    fmt::memory_buffer out;
    append_trace_header(out, h);
    return fmt::to_string(out) + "\n";
  }());
  EXPECT_THAT(error_of([&] { merge_rank_traces(plain, plain / "m.jsonl"); }).message,
              HasSubstr("has no \"process\" entry with its rank and clock offset in its header"));
}

}  // namespace
}  // namespace dpscope::trace
