// TraceFollower on a directory of growing rank-K.jsonl files (a multi-process run watched live):
// nothing merged until every rank has its header, ranks merged as read_trace(DIR) merges them, the
// live edge at the latest time every rank has written, rank files that appear later picked up, a
// new run starting over, and the one-line errors.
#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/errors.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using ::dpscope::testing::error_of;
using testing::append_file;
using testing::rank_header;
using testing::rank_span;
using testing::rank_transfer;
using testing::scratch_dir;
using testing::write_file;

std::filesystem::path rank_path(const std::filesystem::path& dir, int rank) {
  return dir / rank_file_name(rank);
}

TEST(DirectoryFollower, WaitsForEveryRanksHeaderLine) {
  const auto dir = scratch_dir() / "run";  // made later, by the run
  TraceFollower follower(dir / "");
  EXPECT_TRUE(follower.is_directory());
  EXPECT_EQ(follower.poll(), 0u);
  std::filesystem::create_directories(dir);
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_EQ(follower.waiting_for(), fmt::format("rank-K.jsonl files in {}/", dir.string()));
  const std::string header0 = rank_header(0, 3, 0);
  write_file(rank_path(dir, 0), header0.substr(0, 20));
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_EQ(follower.waiting_for(), fmt::format("the header lines of the rank files in {}/", dir.string()));
  append_file(rank_path(dir, 0), header0.substr(20) + rank_span(0, 10, "a0"));
  write_file(rank_path(dir, 2), rank_header(2, 3, 0) + rank_span(2, 10, "a2"));
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_FALSE(follower.has_header());
  EXPECT_EQ(follower.waiting_for(), "rank-1.jsonl (2 of 3 ranks have written their header)");
  write_file(rank_path(dir, 1), rank_header(1, 3, 0));
  EXPECT_EQ(follower.poll(), 2u) << "what ranks 0 and 2 wrote while rank 1 was missing";
  EXPECT_TRUE(follower.has_header());
  EXPECT_EQ(follower.waiting_for(), "");
  const TraceData& d = follower.data();
  ASSERT_EQ(d.header.devices.size(), 3u);
  EXPECT_EQ(d.header.devices[2].name, "cpu:2");
  EXPECT_EQ(d.ranks.size(), 3u);
  ASSERT_TRUE(d.ranks_written_until_ns.has_value());
  EXPECT_EQ(*d.ranks_written_until_ns, INT64_MIN) << "rank 1 has written no event: nothing is complete";
}

// The live edge after each step of three ranks appending at different paces, with clock offsets:
// the latest time every rank has written (on rank 0's clock); the merged events are the ranks'
// events so far, mapped as read_trace(DIR) maps them.
TEST(DirectoryFollower, TheLiveEdgeIsTheLatestTimeEveryRankHasWritten) {
  const auto dir = scratch_dir();
  write_file(rank_path(dir, 0), rank_header(0, 3, 0));
  write_file(rank_path(dir, 1), rank_header(1, 3, 1000));
  write_file(rank_path(dir, 2), rank_header(2, 3, -500));
  TraceFollower follower(dir);
  EXPECT_FALSE(follower.is_directory() && follower.has_header());
  EXPECT_EQ(follower.poll(), 0u);
  ASSERT_TRUE(follower.has_header());
  const TraceData& d = follower.data();

  struct Step {
    int rank;
    int64_t ts;     // on the rank's clock
    int64_t edge;   // expected after the step, rank 0's clock
    size_t events;  // merged so far
  };
  // Rank 1 (offset +1000) starts late; rank 2 (offset -500) runs ahead on its own clock.
  const Step steps[] = {
      {0, 100, INT64_MIN, 1},  // ranks 1 and 2 have nothing yet
      {2, 900, INT64_MIN, 2},  // 400 on rank 0's clock; rank 1 still nothing
      {1, 0, 100, 3},          // 1000 for rank 1: the edge is rank 0's 100
      {0, 700, 400, 4},        // now rank 2 (400) is the slowest
      {2, 2000, 700, 5},       // rank 2 at 1500, rank 1 at 1000: rank 0's 700
      {0, 1200, 1000, 6},      // rank 1 is behind now
      {1, 600, 1200, 7},       // rank 1 at 1600: rank 0's 1200
  };
  for (const Step& s : steps) {
    append_file(rank_path(dir, s.rank), rank_span(s.rank, s.ts, fmt::format("r{}@{}", s.rank, s.ts)));
    EXPECT_EQ(follower.poll(), 1u);
    ASSERT_EQ(d.events.size(), s.events);
    const Event& last = d.events.back();
    EXPECT_EQ(last.rank, s.rank);
    EXPECT_EQ(last.dev, s.rank) << "rank K's cpu is merged device K";
    EXPECT_EQ(last.ts_ns, s.ts + d.ranks[static_cast<size_t>(s.rank)].clock_offset_ns);
    ASSERT_TRUE(d.ranks_written_until_ns.has_value());
    EXPECT_EQ(*d.ranks_written_until_ns, s.edge) << "after rank " << s.rank << " wrote " << s.ts;
  }
  EXPECT_EQ(follower.poll(), 0u) << "nothing new";
  // The events followed are the events read_trace(DIR) merges (it also sorts them by time).
  const TraceData whole = read_trace(dir);
  ASSERT_EQ(whole.events.size(), d.events.size());
  for (const Event& e : whole.events) {
    const bool found = std::any_of(d.events.begin(), d.events.end(), [&](const Event& f) {
      return f.ts_ns == e.ts_ns && f.dev == e.dev && d.str(f.name) == whole.str(e.name);
    });
    EXPECT_TRUE(found) << whole.str(e.name);
  }
}

TEST(DirectoryFollower, MergesTransfersBetweenRanksAndKeepsPartialLinesForLater) {
  const auto dir = scratch_dir();
  write_file(rank_path(dir, 0), rank_header(0, 2, 0));
  write_file(rank_path(dir, 1), rank_header(1, 2, 10, {{"host", "host"}, {"cpu", "cpu"}}));
  TraceFollower follower(dir);
  follower.poll();
  const std::string send = rank_transfer(0, 50, 0, 1, 3, R"(,"dst_rank":1)");
  append_file(rank_path(dir, 0), send.substr(0, 40));
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_TRUE(follower.data().partial_last_line);
  EXPECT_TRUE(follower.data().ranks[0].partial_last_line);
  append_file(rank_path(dir, 0), send.substr(40));
  EXPECT_EQ(follower.poll(), 1u);
  EXPECT_FALSE(follower.data().partial_last_line);
  const Event& e = follower.data().events.back();
  EXPECT_EQ(follower.data().transfer(e).src, 0);
  EXPECT_EQ(follower.data().transfer(e).dst, 2) << "rank 1's cpu (its device 1, merged id 2)";
}

TEST(DirectoryFollower, StartsOverWhenARankFileIsReplacedByANewRun) {
  const auto dir = scratch_dir();
  write_file(rank_path(dir, 0), rank_header(0, 2, 0) + rank_span(0, 1, "old") + rank_span(0, 2, "old"));
  write_file(rank_path(dir, 1), rank_header(1, 2, 0) + rank_span(1, 1, "old"));
  TraceFollower follower(dir);
  EXPECT_EQ(follower.poll(), 3u);
  write_file(rank_path(dir, 0), rank_header(0, 2, 0) + rank_span(0, 5, "new"));
  EXPECT_EQ(follower.poll(), 2u) << "rank 0's new file and rank 1's file read anew";
  EXPECT_EQ(follower.restarts(), 1u);
  EXPECT_EQ(follower.data().events.size(), 2u);
}

TEST(DirectoryFollower, FollowsAPathThatBecomesADirectory) {
  const auto path = scratch_dir() / "later";
  TraceFollower follower(path);
  EXPECT_FALSE(follower.is_directory());
  EXPECT_EQ(follower.poll(), 0u);
  std::filesystem::create_directories(path);
  write_file(rank_path(path, 0), rank_header(0, 1, 0) + rank_span(0, 1, "a"));
  EXPECT_EQ(follower.poll(), 1u);
  EXPECT_TRUE(follower.is_directory());
  EXPECT_EQ(follower.data().header.devices[0].name, "cpu:0");
}

// ---- errors: one line, naming the file; polling again says the same, it never hangs ----

TEST(DirectoryFollower, ARankFileWithoutItsProcessEntryIsAnError) {
  const auto dir = scratch_dir();
  write_file(rank_path(dir, 0), testing::header_line());
  TraceFollower follower(dir);
  const std::string expected = fmt::format(
      "{}: its header has no \"process\" entry (rank, world_size, clock offset), so it is no "
      "process rank's trace (train --backend mpi --trace DIR writes them)",
      rank_path(dir, 0).string());
  EXPECT_EQ(error_of([&] { follower.poll(); }).message, expected);
  EXPECT_EQ(error_of([&] { follower.poll(); }).message, expected);
}

TEST(DirectoryFollower, RankFilesOfDifferentRunsAreAnError) {
  const auto dir = scratch_dir();
  write_file(rank_path(dir, 0), rank_header(0, 2, 0));
  write_file(rank_path(dir, 1), rank_header(1, 4, 0));
  TraceFollower follower(dir);
  EXPECT_EQ(error_of([&] { follower.poll(); }).message,
            fmt::format("{}: its header says world_size 4, but {} says 2: the rank files are not of one run",
                        rank_path(dir, 1).string(), rank_path(dir, 0).string()));
}

TEST(DirectoryFollower, ARankFileBeyondTheWorldSizeIsAnError) {
  const auto dir = scratch_dir();
  write_file(rank_path(dir, 0), rank_header(0, 1, 0));
  TraceFollower follower(dir);
  follower.poll();
  ASSERT_TRUE(follower.has_header());
  write_file(rank_path(dir, 3), "");
  EXPECT_EQ(
      error_of([&] { follower.poll(); }).message,
      fmt::format("{}: rank 3, but the run has ranks 0 to 0 (world_size in their headers): the rank files "
                  "are not of one run",
                  rank_path(dir, 3).string()));
}

TEST(DirectoryFollower, AMalformedLineIsAProblemOfItsRankFile) {
  const auto dir = scratch_dir();
  write_file(rank_path(dir, 0), rank_header(0, 1, 0) + "{\"type\":\"span\"}\n" + rank_span(0, 3, "a"));
  TraceFollower lenient(dir);
  EXPECT_EQ(lenient.poll(), 1u);
  ASSERT_EQ(lenient.data().problems.size(), 1u);
  EXPECT_EQ(lenient.data().problems[0].file, rank_path(dir, 0).string());
  TraceFollower strict(dir, {.strict = true});
  EXPECT_EQ(error_of([&] { strict.poll(); }).message,
            fmt::format("{}:2: missing field 'ts'", rank_path(dir, 0).string()));
  EXPECT_EQ(strict.poll(), 1u) << "goes on after the bad line";
}

}  // namespace
}  // namespace dpscope::trace
