// A directory of process ranks' rank-K.jsonl files read as one trace (trace_tools/rank_traces.hpp):
// device names in the merge, the "process" entries, and every directory that cannot be merged
// refused in one line naming the file or directory and the reason.
#include "dpscope/trace_tools/rank_traces.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dpscope/trace/merge.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/errors.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using ::dpscope::testing::error_of;
using ::dpscope::testing::Outcome;
using testing::rank_header;
using testing::rank_span;
using testing::rank_transfer;
using testing::scratch_dir;
using testing::write_file;

std::vector<std::string> device_names(const TraceData& t) {
  std::vector<std::string> names;
  for (const TraceDeviceInfo& d : t.header.devices) names.push_back(d.name);
  return names;
}

TEST(RankDeviceNames, ANameWithoutAnIndexGetsTheRank) {
  EXPECT_EQ(merged_device_name("cpu", 0, {}), "cpu:0");
  EXPECT_EQ(merged_device_name("host", 3, {}), "host:3");
  EXPECT_EQ(merged_device_name("nvswitch", 1, {"nvswitch:0"}), "nvswitch:1");
}

TEST(RankDeviceNames, ANameWithAnIndexStays) {
  EXPECT_EQ(merged_device_name("cuda:1", 1, {"cuda:0"}), "cuda:1");
  EXPECT_EQ(merged_device_name("sim:2", 0, {}), "sim:2");
  EXPECT_EQ(merged_device_name("pcie switch 0", 0, {}), "pcie switch 0");
}

TEST(RankDeviceNames, ANameALowerRankHasGetsTheRank) {
  EXPECT_EQ(merged_device_name("cuda:0", 8, {"cuda:0", "cuda:1"}), "cuda:0 (rank 8)");
  EXPECT_EQ(merged_device_name("cpu", 1, {"cpu:1"}), "cpu (rank 1)");
}

// The three cases through a directory: two nodes of two processes, each process with one GPU of
// its node (cuda:0 and cuda:1 on both nodes) and a host.
TEST(RankDeviceNames, ReadingADirectoryNamesEveryRanksDevices) {
  const auto dir = scratch_dir();
  for (int rank = 0; rank < 4; ++rank) {
    const std::string gpu = fmt::format("cuda:{}", rank % 2);
    write_file(dir / rank_file_name(rank),
               rank_header(rank, 4, 0, {{gpu, "cuda"}, {"host", "host"}}) + rank_span(rank, 10, "k"));
  }
  const TraceData t = read_trace(dir);
  EXPECT_EQ(device_names(t),
            (std::vector<std::string>{"cuda:0", "host:0", "cuda:1", "host:1", "cuda:0 (rank 2)", "host:2",
                                      "cuda:1 (rank 3)", "host:3"}));
  ASSERT_EQ(t.events.size(), 4u);
  for (const Event& e : t.events) EXPECT_EQ(e.dev, 2 * e.rank) << "each rank's own GPU";
}

TEST(RankFiles, NamesAreRankDashKDotJsonl) {
  EXPECT_EQ(rank_of_file_name("rank-0.jsonl"), 0);
  EXPECT_EQ(rank_of_file_name("rank-12.jsonl"), 12);
  EXPECT_EQ(rank_of_file_name("rank-01.jsonl"), std::nullopt);
  EXPECT_EQ(rank_of_file_name("rank-.jsonl"), std::nullopt);
  EXPECT_EQ(rank_of_file_name("rank-1.jsonl.tmp"), std::nullopt);
  EXPECT_EQ(rank_of_file_name("merged.jsonl"), std::nullopt);
  EXPECT_EQ(rank_of_file_name("rank-1x.jsonl"), std::nullopt);
  EXPECT_EQ(rank_file_name(7), "rank-7.jsonl");
}

TEST(RankFiles, OtherFilesInTheDirectoryAreLeftAlone) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 1, 0) + rank_span(0, 1, "a"));
  write_file(dir / "merged.jsonl", "not a trace\n");
  write_file(dir / "notes.txt", "hello\n");
  EXPECT_EQ(read_trace(dir).events.size(), 1u);
}

TEST(ProcessEntries, AreReadFromTheRunObject) {
  const TraceData t = parse_trace(rank_header(2, 4, -1234), "rank-2.jsonl");
  const std::optional<ProcessEntry> p = process_entry(t.header, t.path);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->rank, 2);
  EXPECT_EQ(p->world_size, 4);
  EXPECT_EQ(p->clock_offset_ns, -1234);
  EXPECT_EQ(p->clock_uncertainty_ns, 7);
  EXPECT_EQ(process_entry(parse_trace(testing::header_line()).header, "x"), std::nullopt);
  TraceHeader bad;
  bad.run_json = R"({"process":{"rank":0,"world_size":0,"clock_offset_ns":0,"clock_uncertainty_ns":0}})";
  EXPECT_EQ(error_of([&] { process_entry(bad, "r.jsonl"); }).message,
            "r.jsonl: header field 'run.process.world_size' must be an integer from 1 to 1000000");
  bad.run_json = R"({"process":{"rank":0,"world_size":1,"clock_uncertainty_ns":0}})";
  EXPECT_EQ(error_of([&] { process_entry(bad, "r.jsonl"); }).message,
            "r.jsonl: header field 'run.process.clock_offset_ns' must be an integer from "
            "-1152921504606846976 to 1152921504606846976");
  bad.run_json = R"({"process":[]})";
  EXPECT_EQ(error_of([&] { process_entry(bad, "r.jsonl"); }).message,
            "r.jsonl: header field 'run.process' must be an object");
}

// ---- directories that cannot be read, one line each ----

TEST(ReadRankDirectory, ADirectoryWithoutRankFilesIsRefused) {
  const auto dir = scratch_dir();
  write_file(dir / "run.jsonl", testing::header_line());
  const Outcome o = error_of([&] { read_trace(dir); });
  EXPECT_EQ(o.kind, ErrorKind::kFormat);
  EXPECT_EQ(o.message,
            fmt::format("'{}' has no rank-K.jsonl files (the per-rank traces of mpirun -np N dpscope "
                        "train --backend mpi --trace DIR)",
                        dir.string()));
}

TEST(ReadRankDirectory, AGapBetweenRanksIsRefused) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 3, 0));
  write_file(dir / "rank-2.jsonl", rank_header(2, 3, 0));
  EXPECT_EQ(error_of([&] { read_trace(dir); }).message,
            fmt::format("'{}' has rank-2.jsonl but no rank-1.jsonl", dir.string()));
}

TEST(ReadRankDirectory, RanksMissingAtTheEndAreRefused) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 4, 0));
  EXPECT_EQ(error_of([&] { read_trace(dir); }).message,
            fmt::format("'{}' has only rank-0.jsonl, but the run had 4 ranks (world_size in its headers): "
                        "rank-1.jsonl is missing",
                        dir.string()));
  write_file(dir / "rank-1.jsonl", rank_header(1, 4, 0));
  EXPECT_EQ(error_of([&] { read_trace(dir); }).message,
            fmt::format("'{}' has rank-0.jsonl to rank-1.jsonl, but the run had 4 ranks (world_size in its "
                        "headers): rank-2.jsonl is missing",
                        dir.string()));
}

TEST(ReadRankDirectory, ARankFileWithoutItsProcessEntryIsRefused) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0));
  write_file(dir / "rank-1.jsonl", testing::header_line());
  EXPECT_EQ(
      error_of([&] { read_trace(dir); }).message,
      fmt::format("{}: its header has no \"process\" entry (rank, world_size, clock offset), so it is no "
                  "process rank's trace (train --backend mpi --trace DIR writes them)",
                  (dir / "rank-1.jsonl").string()));
}

// Regression test: a rank directory whose headers name different models or devices merged without complaint.
TEST(ReadRankDirectory, RankFilesOfDifferentModelsDevicesOrClocksAreRefused) {
  const auto dir = scratch_dir();
  const auto with_params = [](std::string header, const std::string& params) {
    nlohmann::json h = nlohmann::json::parse(header);
    h["params"] = nlohmann::json::parse(params);
    return h.dump() + "\n";
  };
  const std::string two = R"([{"index":0,"name":"0.weight","shape":[8,2],"bytes":64},)"
                          R"({"index":1,"name":"0.bias","shape":[8],"bytes":32}])";
  const std::string wider = R"([{"index":0,"name":"0.weight","shape":[16,2],"bytes":128},)"
                            R"({"index":1,"name":"0.bias","shape":[16],"bytes":64}])";
  write_file(dir / "rank-0.jsonl", with_params(rank_header(0, 2, 0), two));
  write_file(dir / "rank-1.jsonl", with_params(rank_header(1, 2, 0), wider));
  EXPECT_EQ(
      error_of([&] { read_trace(dir); }).message,
      fmt::format("{}: its header says parameter 0 '0.weight' [16, 2], but {} says '0.weight' [8, 2]: the "
                  "rank files are not of one run",
                  (dir / "rank-1.jsonl").string(), (dir / "rank-0.jsonl").string()));
  write_file(dir / "rank-1.jsonl", with_params(rank_header(1, 2, 0), R"([])"));
  EXPECT_THAT(error_of([&] { read_trace(dir); }).message, ::testing::HasSubstr("parameter count 0, but"));
  write_file(dir / "rank-1.jsonl", with_params(rank_header(1, 2, 0, {{"cuda:0", "cuda"}}), two));
  EXPECT_THAT(error_of([&] { read_trace(dir); }).message,
              ::testing::HasSubstr("its header says devices [cuda], but"));
  // A host lane on one rank only is no difference: it appears once a rank emits on it.
  write_file(dir / "rank-1.jsonl",
             with_params(rank_header(1, 2, 0, {{"cpu", "cpu"}, {"host", "host"}}), two));
  EXPECT_NO_THROW(read_trace(dir));
  nlohmann::json simulated = nlohmann::json::parse(with_params(rank_header(1, 2, 0), two));
  simulated["clock"] = "simulated";
  write_file(dir / "rank-1.jsonl", simulated.dump() + "\n");
  EXPECT_THAT(error_of([&] { read_trace(dir); }).message,
              ::testing::HasSubstr("its header says clock simulated, but"));
}

TEST(ReadRankDirectory, RankFilesOfDifferentWorldSizesAreRefused) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0));
  write_file(dir / "rank-1.jsonl", rank_header(1, 3, 0));
  EXPECT_EQ(error_of([&] { read_trace(dir); }).message,
            fmt::format("{}: its header says world_size 3, but {} says 2: the rank files are not of one run",
                        (dir / "rank-1.jsonl").string(), (dir / "rank-0.jsonl").string()));
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 0));
  write_file(dir / "rank-2.jsonl", rank_header(2, 2, 0));
  EXPECT_EQ(error_of([&] { read_trace(dir); }).message,
            fmt::format("{}: its header says it is rank 2 of a run of 2 ranks (world_size)",
                        (dir / "rank-2.jsonl").string()));
}

TEST(ReadRankDirectory, ARankFileNamingAnotherRankIsRefused) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0));
  write_file(dir / "rank-1.jsonl", rank_header(0, 2, 0));
  EXPECT_EQ(
      error_of([&] { read_trace(dir); }).message,
      fmt::format("{}: its header says it is rank 0, its name rank 1", (dir / "rank-1.jsonl").string()));
}

TEST(ReadRankDirectory, AMalformedLineNamesItsRankFile) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0) + rank_span(0, 1, "a"));
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 0) + rank_span(1, 1, "a") + "{\"type\":\"span\"}\n");
  EXPECT_EQ(error_of([&] { read_trace(dir); }).message,
            fmt::format("{}:3: missing field 'ts'", (dir / "rank-1.jsonl").string()));
  const TraceData lenient = read_trace(dir, {.strict = false});
  EXPECT_EQ(lenient.events.size(), 2u);
  ASSERT_EQ(lenient.problems.size(), 1u);
  EXPECT_EQ(lenient.problems[0].file, (dir / "rank-1.jsonl").string());
  EXPECT_EQ(lenient.problems[0].line, 3u);
}

TEST(ReadRankDirectory, ATransferToARankOrDeviceTheRunLacksIsRefused) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0) + rank_transfer(0, 5, 0, 0, 1, R"(,"dst_rank":2)"));
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 0) + rank_transfer(1, 5, 4, 0, 1, R"(,"src_rank":0)"));
  EXPECT_EQ(error_of([&] { read_trace(dir); }).message,
            fmt::format("{}:2: field 'dst_rank' is 2, but the run has ranks 0 to 1",
                        (dir / "rank-0.jsonl").string()));
  const TraceData lenient = read_trace(dir, {.strict = false});
  ASSERT_EQ(lenient.events.size(), 2u) << "kept, with the end unknown";
  EXPECT_EQ(lenient.transfer(lenient.events[0]).dst, -1);
  EXPECT_EQ(lenient.transfer(lenient.events[1]).src, -1);
  ASSERT_EQ(lenient.problems.size(), 2u);
  EXPECT_EQ(lenient.problems[1].reason,
            "field 'src' is 4, which is not a device in rank 0's header (rank-0.jsonl)");
  EXPECT_EQ(lenient.problems[1].file, (dir / "rank-1.jsonl").string());
}

TEST(ReadRankDirectory, ATimeMovedOutOfTheFormatsRangeIsRefused) {
  const auto dir = scratch_dir();
  const int64_t last_ns = (int64_t{1} << 62) - 1000;  // in range in its own file
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0) + rank_span(0, 1, "a"));
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 5000) + rank_span(1, last_ns - 100, "b"));
  const std::string reason = fmt::format(
      "field 'ts' is {} on rank 0's clock (moved by the rank's clock offset, 5000 ns), outside the supported "
      "range [-4611686018427387904, 4611686018427387904) ns",
      last_ns - 100 + 5000);
  EXPECT_EQ(error_of([&] { read_trace(dir); }).message,
            fmt::format("{}:2: {}", (dir / "rank-1.jsonl").string(), reason));
  EXPECT_EQ(error_of([&] { merge_rank_traces(dir, dir / "m.jsonl"); }).message,
            fmt::format("{}:2: {}", (dir / "rank-1.jsonl").string(), reason));
  const TraceData lenient = read_trace(dir, {.strict = false});
  EXPECT_EQ(lenient.events.size(), 1u) << "the event is left out";
  ASSERT_EQ(lenient.problems.size(), 1u);
  EXPECT_EQ(lenient.problems[0].reason, reason);
}

TEST(ReadRankDirectory, APartialLastLineOfARankIsLeftOutAndSaidOfThatRank) {
  const auto dir = scratch_dir();
  write_file(dir / "rank-0.jsonl", rank_header(0, 2, 0) + rank_span(0, 1, "a"));
  const std::string half = rank_span(1, 9, "b");
  write_file(dir / "rank-1.jsonl", rank_header(1, 2, 0) + rank_span(1, 1, "a") + half.substr(0, 30));
  const TraceData t = read_trace(dir);
  EXPECT_EQ(t.events.size(), 2u);
  EXPECT_TRUE(t.partial_last_line);
  EXPECT_FALSE(t.ranks[0].partial_last_line);
  EXPECT_TRUE(t.ranks[1].partial_last_line);
}

// A single rank file read alone: the remote end of a transfer is unknown, not an error; the field
// must still be a rank number and the id a device id.
TEST(RemoteEnds, ASingleRankFileReadsThemAsUnknownEnds) {
  const std::string text = rank_header(0, 2, 0) + rank_transfer(0, 5, 0, 9, 1, R"(,"dst_rank":1)") +
                           rank_transfer(0, 6, 0, 0, 2, R"(,"dst_rank":0)") + rank_transfer(0, 7, 0, 9, 3);
  EXPECT_EQ(error_of([&] { parse_trace(text, "rank-0.jsonl"); }).message,
            "rank-0.jsonl:4: field 'dst' is 9, which is not a device in the header")
      << "without dst_rank the end is this file's";
  const TraceData t = parse_trace(text, "rank-0.jsonl", {.strict = false});
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.transfer(t.events[0]).dst, -1);
  EXPECT_EQ(t.remote_ends_of(t.events[0])->dst, 9);
  EXPECT_EQ(t.transfer(t.events[1]).dst, 0) << "its own rank: its own device";
  EXPECT_EQ(t.remote_ends_of(t.events[1]), nullptr);
  EXPECT_EQ(error_of([&] {
              parse_trace(rank_header(0, 2, 0) + rank_transfer(0, 5, 0, 1, 1, R"(,"dst_rank":-1)"), "r");
            }).message,
            "r:2: field 'dst_rank' must be a non-negative integer");
  // A trace that is no rank's file: every rank field names another process.
  const TraceData plain =
      parse_trace(testing::header_line() + rank_transfer(0, 5, 0, 2, 1, R"(,"src_rank":0)"), "plain");
  EXPECT_EQ(plain.transfer(plain.events[0]).src, -1);
  EXPECT_EQ(plain.transfer(plain.events[0]).dst, 2);
}

}  // namespace
}  // namespace dpscope::trace
