// TraceFollower: reads only what was appended since the last poll, waits for incomplete lines,
// and starts over when the file is truncated or replaced.
#include <gtest/gtest.h>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using testing::append_file;
using testing::header_line;
using testing::span_line;
using testing::write_file;

TEST(TraceFollower, WaitsForTheFileAndItsHeader) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 0u) << "no file yet";
  EXPECT_FALSE(follower.has_header());
  const std::string header = header_line();
  write_file(path, header.substr(0, 40));
  EXPECT_EQ(follower.poll(), 0u) << "half a header";
  EXPECT_FALSE(follower.has_header());
  append_file(path, header.substr(40));
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_TRUE(follower.has_header());
  EXPECT_EQ(follower.data().header.devices.size(), 3u);
}

TEST(TraceFollower, SeesAppendedEventsAndCompletesPartialLines) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  write_file(path, header_line() + span_line(0));
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 1u);
  EXPECT_EQ(follower.poll(), 0u) << "nothing new";

  const std::string third = span_line(20, "third");
  append_file(path, span_line(10) + third.substr(0, 25));
  EXPECT_EQ(follower.poll(), 1u) << "the second line is complete, the third is not";
  EXPECT_TRUE(follower.data().partial_last_line);
  append_file(path, third.substr(25) + "\n" + span_line(30));
  EXPECT_EQ(follower.poll(), 2u);
  EXPECT_FALSE(follower.data().partial_last_line);

  const TraceData& data = follower.data();
  ASSERT_EQ(data.events.size(), 4u);
  EXPECT_EQ(data.events[2].ts_ns, 20);
  EXPECT_EQ(data.str(data.events[2].name), "third");
  EXPECT_EQ(data.events[2].line, 4u);
  EXPECT_EQ(data.events[3].line, 6u) << "the blank line 5 is counted";
  EXPECT_EQ(data.max_end_ns, 40);
  EXPECT_EQ(follower.restarts(), 0u);
}

TEST(TraceFollower, FollowsARecorderThatFlushesEveryStep) {
  testing::expect_follower_sees_each_flushed_step(testing::scratch_dir() / "live.jsonl");
}

TEST(TraceFollower, StartsOverWhenTheFileIsTruncated) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  write_file(path, header_line() + span_line(0) + span_line(10) + span_line(20));
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 3u);
  write_file(path, header_line() + span_line(500, "new run"));
  EXPECT_EQ(follower.poll(), 1u);
  EXPECT_EQ(follower.restarts(), 1u);
  ASSERT_EQ(follower.data().events.size(), 1u);
  EXPECT_EQ(follower.data().str(follower.data().events[0].name), "new run");
  EXPECT_EQ(follower.data().events[0].line, 2u);
}

TEST(TraceFollower, StartsOverWhenTheFileIsRewrittenLongerInPlace) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  write_file(path, header_line() + span_line(0));
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 1u);
  write_file(path, header_line() + span_line(7, "other") + span_line(8) + span_line(9));
  EXPECT_EQ(follower.poll(), 3u);
  EXPECT_EQ(follower.restarts(), 1u);
  EXPECT_EQ(follower.data().events[0].ts_ns, 7);
}

TEST(TraceFollower, StartsOverWhenTheFileIsReplaced) {
  const auto dir = testing::scratch_dir();
  const auto path = dir / "live.jsonl";
  write_file(path, header_line() + span_line(0) + span_line(10));
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 2u);
  // Same length and same bytes, but a different file: a new run that happened to match so far.
  write_file(dir / "next.jsonl", header_line() + span_line(0) + span_line(10) + span_line(20));
  std::filesystem::rename(dir / "next.jsonl", path);
  EXPECT_EQ(follower.poll(), 3u);
  EXPECT_EQ(follower.restarts(), 1u);
  EXPECT_EQ(follower.data().events.size(), 3u);
}

TEST(TraceFollower, KeepsItsDataWhileTheFileIsGone) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  write_file(path, header_line() + span_line(0));
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 1u);
  std::filesystem::remove(path);
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_EQ(follower.data().events.size(), 1u);
}

TEST(TraceFollower, LenientByDefaultAndReportsBadLinesWithTheirNumbers) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  write_file(path, header_line() + span_line(0));
  TraceFollower follower(path);
  follower.poll();
  append_file(path, "{oops\n" + span_line(10));
  EXPECT_EQ(follower.poll(), 1u);
  ASSERT_EQ(follower.data().problems.size(), 1u);
  EXPECT_EQ(follower.data().problems[0].line, 3u);
  EXPECT_EQ(follower.data().problems[0].reason, "not valid JSON");
}

TEST(TraceFollower, StrictModeThrowsOnceAndThenContinuesAfterTheBadLine) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  write_file(path, header_line() + span_line(0) + "{oops\n" + span_line(10));
  TraceFollower follower(path, {.strict = true});
  try {
    follower.poll();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ":3: not valid JSON");
  }
  EXPECT_EQ(follower.poll(), 1u);
  ASSERT_EQ(follower.data().events.size(), 2u);
  EXPECT_EQ(follower.data().events[1].line, 4u);
}

TEST(TraceFollower, ABadHeaderIsReportedAtEveryPoll) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  write_file(path, header_line("3.1"));
  TraceFollower follower(path);
  for (int i = 0; i < 2; ++i) {
    try {
      follower.poll();
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                path.string() +
                    ": trace format version 3.1 is newer than this dpscope supports (1.x); upgrade dpscope");
    }
  }
  EXPECT_FALSE(follower.has_header());
}

TEST(TraceFollower, CanBeMoved) {
  const auto path = testing::scratch_dir() / "live.jsonl";
  write_file(path, header_line() + span_line(0));
  TraceFollower first(path);
  EXPECT_EQ(first.poll(), 1u);
  TraceFollower moved = std::move(first);
  append_file(path, span_line(5));
  EXPECT_EQ(moved.poll(), 1u);
  EXPECT_EQ(moved.data().events.size(), 2u);
}

}  // namespace
}  // namespace dpscope::trace
