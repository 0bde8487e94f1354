// merge_rank_traces() and `dpscope trace merge`: process ranks' rank-K.jsonl files written as one
// trace on rank 0's clock (offsets from each header's "process" entry), devices renumbered and
// named per rank, cross-process transfers resolved, flow ids kept apart, events in time order, every
// other field kept; the same trace read_trace(DIR) merges in memory; the errors, one line each. The
// real mpirun path is tests/mpi/cli.
#include "dpscope/trace/merge.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/errors.hpp"
#include "support/file_size_limit.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using ::dpscope::testing::error_of;
using ::dpscope::testing::Outcome;
using ::testing::HasSubstr;
using testing::rank_header;
using testing::rank_span;
using testing::rank_transfer;
using testing::scratch_dir;
using testing::write_file;

TEST(MergeRankTraces, PutsEveryRankOnRankZerosClock) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl",
             rank_header(0, 2, 0) + rank_span(0, 1000, "a0") + rank_span(0, 3000, "b0"));
  write_file(dir / "rank-1.jsonl",
             rank_header(1, 2, 1500) + rank_span(1, 100, "a1") + rank_span(1, 900, "b1"));
  const MergeResult r = merge_rank_traces(dir, dir / "merged.jsonl");
  EXPECT_EQ(r.ranks, 2);
  EXPECT_EQ(r.events, 4u);
  ASSERT_EQ(r.clocks.size(), 2u);
  EXPECT_EQ(r.clocks[1].clock_offset_ns, 1500);
  EXPECT_EQ(r.clocks[1].clock_uncertainty_ns, 7);
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

// The contract of cross-process transfers (docs/trace-format.md): an end with src_rank/dst_rank R
// is a device id of rank R's header. Rank 0 sends from its cpu (id 0) to rank 1's cpu (id 1 in
// rank 1's file: it lists a host first); rank 1 receives from rank 0, naming both ends by rank.
TEST(MergeRankTraces, ResolvesTheEndsOfTransfersBetweenProcessesThroughTheirRanksHeaders) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl",
             rank_header(0, 2, 0) + rank_transfer(0, 1000, 0, 1, 5, R"(,"dst_rank":1)"));
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, -200, {{"host", "host"}, {"cpu", "cpu"}}) +
                                       rank_transfer(1, 1300, 0, 1, 5, R"(,"src_rank":0,"dst_rank":1)"));
  merge_rank_traces(dir, dir / "merged.jsonl");
  const std::string merged_text = testing::read_file(dir / "merged.jsonl");
  EXPECT_THAT(merged_text, ::testing::Not(HasSubstr("_rank\":"))) << "resolved ends carry no rank";
  for (const std::filesystem::path& in : {dir / "merged.jsonl", dir}) {
    const TraceData t = read_trace(in);
    ASSERT_EQ(t.header.devices.size(), 3u) << in;
    EXPECT_EQ(t.header.devices[0].name, "cpu:0");
    EXPECT_EQ(t.header.devices[1].name, "host:1");
    EXPECT_EQ(t.header.devices[2].name, "cpu:1");
    ASSERT_EQ(t.events.size(), 2u);
    for (const Event& e : t.events) {
      EXPECT_EQ(t.transfer(e).src, 0) << in << ": rank 0's cpu";
      EXPECT_EQ(t.transfer(e).dst, 2) << in << ": rank 1's cpu";
      EXPECT_EQ(t.remote_ends_of(e), nullptr);
    }
    EXPECT_EQ(t.events[0].ts_ns, 1000);
    EXPECT_EQ(t.events[1].ts_ns, 1100);
    EXPECT_EQ(t.events[0].dev, 0);
    EXPECT_EQ(t.events[1].dev, 1) << "rank 1's device 0 (its host)";
    EXPECT_EQ(t.transfer(t.events[0]).flow, 5u);
    EXPECT_EQ(t.transfer(t.events[1]).flow, (uint64_t{1} << 40) + 5);
  }
  // Read alone, rank 0's file keeps the remote end for a merge and shows it as unknown.
  const TraceData alone = read_trace(dir / "rank-0.jsonl");
  ASSERT_EQ(alone.events.size(), 1u);
  EXPECT_EQ(alone.transfer(alone.events[0]).src, 0);
  EXPECT_EQ(alone.transfer(alone.events[0]).dst, -1);
  const RemoteEnds* remote = alone.remote_ends_of(alone.events[0]);
  ASSERT_NE(remote, nullptr);
  EXPECT_EQ(remote->dst_rank, 1);
  EXPECT_EQ(remote->dst, 1);
  EXPECT_EQ(remote->src_rank, -1);
  // Rank 1's own end named by its own rank is its own device.
  const TraceData rank1 = read_trace(dir / "rank-1.jsonl");
  EXPECT_EQ(rank1.transfer(rank1.events[0]).src, -1);
  EXPECT_EQ(rank1.transfer(rank1.events[0]).dst, 1);
}

// Regression test: `trace merge` on a full disk left a 0-byte OUT.tmp behind. RLIMIT_FSIZE fails the write
// (EFBIG) as a full disk does (ENOSPC): a write failure (exit code 1), and nothing is left.
TEST(MergeRankTraces, AFailedWriteLeavesNothingBehind) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0) + rank_span(0, 10, "a"));
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 5) + rank_span(1, 20, "b"));
  const auto out = dir / "out" / "merged.jsonl";
  std::filesystem::create_directories(out.parent_path());
  const auto failure = [&] {
    const dpscope::testing::FileSizeLimit limit(64);
    return error_of([&] { merge_rank_traces(dir, out); });
  }();
  EXPECT_EQ(failure.kind, ErrorKind::kWriteFailed) << failure.message;
  EXPECT_THAT(failure.message, ::testing::HasSubstr("File too large"));
  EXPECT_TRUE(std::filesystem::is_empty(out.parent_path())) << "a temporary file or a partial merge was left";
}

TEST(MergeRankTraces, WritesWhatReadingTheDirectoryMergesInMemory) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl",
             rank_header(0, 3, 0, {{"cuda:0", "cuda"}, {"host", "host"}}) + rank_span(0, 10, "a") +
                 rank_transfer(0, 40, 0, 0, 1, R"(,"dst_rank":2)") + rank_span(0, 90, "b"));
  write_file(dir / "rank-1.jsonl", rank_header(1, 3, 35, {{"cuda:0", "cuda"}}) + rank_span(1, 0, "c") +
                                       rank_span(1, 55, "d") + rank_span(1, 5, "e"));
  write_file(dir / "rank-2.jsonl", rank_header(2, 3, -20, {{"cuda:1", "cuda"}}) +
                                       rank_transfer(2, 60, 0, 0, 1, R"(,"src_rank":0)"));
  merge_rank_traces(dir, dir / "merged.out");
  const TraceData file = read_trace(dir / "merged.out");
  const TraceData memory = read_trace(dir);
  EXPECT_EQ(memory.path, dir.string());
  ASSERT_EQ(memory.ranks.size(), 3u);
  EXPECT_EQ(memory.ranks[2].clock_offset_ns, -20);
  EXPECT_EQ(memory.ranks[2].path, (dir / "rank-2.jsonl").string());
  ASSERT_EQ(file.header.devices.size(), memory.header.devices.size());
  for (size_t d = 0; d < file.header.devices.size(); ++d)
    EXPECT_EQ(file.header.devices[d].name, memory.header.devices[d].name);
  ASSERT_EQ(file.events.size(), 7u);
  ASSERT_EQ(memory.events.size(), file.events.size());
  for (size_t i = 0; i < file.events.size(); ++i) {
    const Event& f = file.events[i];
    const Event& m = memory.events[i];
    EXPECT_EQ(file.str(f.name), memory.str(m.name)) << i;
    EXPECT_EQ(f.ts_ns, m.ts_ns) << i;
    EXPECT_EQ(f.dev, m.dev) << i;
    EXPECT_EQ(file.transfer(f).src, memory.transfer(m).src) << i;
    EXPECT_EQ(file.transfer(f).dst, memory.transfer(m).dst) << i;
    EXPECT_EQ(file.transfer(f).flow, memory.transfer(m).flow) << i;
    EXPECT_EQ(f.rank, m.rank) << i;
  }
  // In time order: a 10, c 35, then three at 40 in rank order (rank 0's transfer, e, rank 2's
  // transfer), then b and d at 90.
  EXPECT_EQ(memory.str(memory.events[0].name), "a");
  EXPECT_EQ(memory.str(memory.events[1].name), "c");
  EXPECT_EQ(memory.events[2].rank, 0);
  EXPECT_EQ(memory.str(memory.events[3].name), "e");
  EXPECT_EQ(memory.events[4].rank, 2);
  EXPECT_EQ(memory.events[4].ts_ns, 40);
  EXPECT_EQ(memory.transfer(memory.events[4]).dst, 3) << "rank 2's cuda:1";
  EXPECT_EQ(memory.transfer(memory.events[4]).src, 0) << "rank 0's cuda:0";
}

// A rank still writing (or cut off) ends with an incomplete line: it is left out, as every reader
// leaves it out, and the result names the file so that `trace merge` warns as `stats` does.
TEST(MergeRankTraces, NamesTheRankFilesWhoseIncompleteLastLineItLeftOut) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0) + rank_span(0, 1000, "a0"));
  write_file(dir / "rank-1.jsonl",
             rank_header(1, 2, 0) + rank_span(1, 100, "a1") + R"({"type":"span","ts":20,"ra)");
  const MergeResult r = merge_rank_traces(dir, dir / "merged.jsonl");
  EXPECT_EQ(r.events, 2u);
  EXPECT_EQ(r.partial, std::vector<std::filesystem::path>{dir / "rank-1.jsonl"});
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 0) + rank_span(1, 100, "a1"));
  EXPECT_TRUE(merge_rank_traces(dir, dir / "merged.jsonl").partial.empty());
}

TEST(MergeRankTraces, KeepsFieldsItDoesNotMap) {
  const auto dir = scratch_dir();
  write_file(
      dir / "rank-0.jsonl",
      rank_header(0, 1, 0) +
          R"({"type":"instant","ts":5,"rank":0,"dev":0,"step":2,"phase":"backward","name":"error","args":{"message":"a \"quoted\" reason","dev":9},"future":[1,2.5,null]})"
          "\n");
  merge_rank_traces(dir, dir / "merged.jsonl");
  const std::string text = testing::read_file(dir / "merged.jsonl");
  EXPECT_THAT(
      text,
      HasSubstr(R"({"type":"instant","ts":5,"rank":0,"dev":0,"step":2,"phase":"backward","name":"error",)"
                R"("args":{"message":"a \"quoted\" reason","dev":9},"future":[1,2.5,null]})"));
}

TEST(MergeRankTraces, RefusesWhatItCannotMergeInOneLine) {
  const auto dir = scratch_dir();
  EXPECT_EQ(error_of([&] { merge_rank_traces(dir, dir / "m.jsonl"); }).message,
            fmt::format("'{}' has no rank-K.jsonl files (the per-rank traces of mpirun -np N dpscope train "
                        "--backend mpi --trace DIR)",
                        dir.string()));
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 0));
  EXPECT_EQ(error_of([&] { merge_rank_traces(dir, dir / "m.jsonl"); }).message,
            fmt::format("'{}' has rank-1.jsonl but no rank-0.jsonl", dir.string()));
  write_file(dir / "rank-0.jsonl", rank_header(1, 2, 0));
  EXPECT_EQ(
      error_of([&] { merge_rank_traces(dir, dir / "m.jsonl"); }).message,
      fmt::format("{}: its header says it is rank 1, its name rank 0", (dir / "rank-0.jsonl").string()));
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0));
  const Outcome overwrite = error_of([&] { merge_rank_traces(dir, dir / "rank-1.jsonl"); });
  EXPECT_EQ(overwrite.kind, ErrorKind::kUsage);
  EXPECT_EQ(overwrite.message,
            fmt::format("OUT {} is one of the files the input DIR {} holds: it would be overwritten",
                        (dir / "rank-1.jsonl").string(), dir.string()));
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 0) + rank_transfer(1, 0, 0, 3, 1, R"(,"dst_rank":0)"));
  EXPECT_EQ(error_of([&] { merge_rank_traces(dir, dir / "m.jsonl"); }).message,
            fmt::format("{}:2: field 'dst' is 3, which is not a device in rank 0's header (rank-0.jsonl)",
                        (dir / "rank-1.jsonl").string()));
  EXPECT_FALSE(std::filesystem::exists(dir / "m.jsonl")) << "a failed merge writes nothing";
}

}  // namespace
}  // namespace dpscope::trace
