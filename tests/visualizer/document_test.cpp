// Opening traces: good files, bad files (empty, malformed, truncated, newer version, missing,
// garbage) never crash and say what is wrong with the line; live files are followed as they grow.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "dpscope/trace_tools/compressed.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "replay/document.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

using testing::read_text;
using testing::scratch_dir;
using testing::write_text;

const char* kHeader =
    R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{},"devices":[{"id":0,"name":"sim:0","kind":"sim","hardware":"x","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0}],"links":[],"params":[],"buckets":[]})";
const char* kSpan =
    R"({"type":"span","ts":0,"rank":0,"dev":0,"step":0,"phase":"forward","name":"a","cat":"compute","stream":"compute","dur":10})";

std::string lines(std::initializer_list<std::string> ls) {
  std::string out;
  for (const std::string& l : ls) out += l + "\n";
  return out;
}

TEST(Document, OpensARecordedTrace) {
  const auto path = scratch_dir() / "ddp.jsonl";
  testing::write_ddp_trace(path, 2, 1);
  const auto doc = Document::open(path, {.strict = true});
  EXPECT_EQ(doc->error(), "");
  EXPECT_TRUE(doc->warnings().empty());
  ASSERT_NE(doc->model(), nullptr);
  EXPECT_GT(doc->model()->event_count(), 50u);
  EXPECT_EQ(doc->generation(), 1u);
  EXPECT_FALSE(doc->following());
}

TEST(Document, AnEmptyFileIsAnErrorNamingTheFile) {
  const auto path = scratch_dir() / "empty.jsonl";
  write_text(path, "");
  for (bool strict : {true, false}) {
    const auto doc = Document::open(path, {.strict = strict});
    EXPECT_EQ(doc->model(), nullptr);
    EXPECT_NE(doc->error().find("empty.jsonl"), std::string::npos) << doc->error();
  }
}

TEST(Document, AMissingFileIsAnError) {
  const auto doc = Document::open(scratch_dir() / "nope.jsonl", {});
  EXPECT_EQ(doc->model(), nullptr);
  EXPECT_NE(doc->error().find("nope.jsonl"), std::string::npos) << doc->error();
}

TEST(Document, AMalformedLineIsAnErrorWhenStrictAndAWarningOtherwise) {
  const auto path = scratch_dir() / "bad.jsonl";
  write_text(path, lines({kHeader, kSpan, R"({"type":"span","ts":)", kSpan}));
  const auto strict = Document::open(path, {.strict = true});
  EXPECT_EQ(strict->model(), nullptr);
  EXPECT_NE(strict->error().find("bad.jsonl:3:"), std::string::npos) << strict->error();
  const auto lenient = Document::open(path, {.strict = false});
  ASSERT_NE(lenient->model(), nullptr);
  EXPECT_EQ(lenient->model()->event_count(), 2u);
  ASSERT_EQ(lenient->warnings().size(), 1u);
  EXPECT_NE(lenient->warnings()[0].find("bad.jsonl:3:"), std::string::npos) << lenient->warnings()[0];
}

TEST(Document, ATruncatedLastLineIsLeftOutWithAWarningInEveryMode) {
  // docs/trace-format.md: every reader tolerates a partial last line.
  const auto path = scratch_dir() / "cut.jsonl";
  write_text(path, lines({kHeader, kSpan}) + R"({"type":"span","ts":5,"ra)");
  EXPECT_EQ(trace::read_trace(path).partial_line, 3u);
  for (const bool strict : {true, false}) {
    const auto doc = Document::open(path, {.strict = strict});
    EXPECT_TRUE(doc->error().empty()) << doc->error();
    ASSERT_NE(doc->model(), nullptr) << "strict " << strict;
    EXPECT_EQ(doc->model()->event_count(), 1u);
    ASSERT_EQ(doc->warnings().size(), 1u);
    EXPECT_NE(doc->warnings()[0].find("cut.jsonl:3: truncated"), std::string::npos) << doc->warnings()[0];
  }
  write_text(path, lines({kHeader}));
  EXPECT_EQ(trace::read_trace(path).partial_line, 0u);
}

TEST(Document, ACompressedTraceIsTruncatedOnlyWhenItsTextIs) {
  // Its last byte is zstd's, not the text's: only the decoded text says whether a line is cut.
  const auto path = scratch_dir() / "whole.jsonl.zst";
  for (const bool cut : {false, true}) {
    {
      trace::TraceFileWriter writer(path, /*compress=*/true);
      writer.write(lines({kHeader, kSpan}) + (cut ? R"({"type":"span")" : ""));
      writer.close();
    }
    const auto doc = Document::open(path, {});
    EXPECT_TRUE(doc->error().empty()) << doc->error();
    if (!cut) {
      EXPECT_TRUE(doc->warnings().empty()) << doc->warnings()[0];
      continue;
    }
    ASSERT_EQ(doc->warnings().size(), 1u);
    EXPECT_NE(doc->warnings()[0].find("whole.jsonl.zst:3: truncated"), std::string::npos)
        << doc->warnings()[0];
  }
}

TEST(Document, ANewerMajorVersionIsRefused) {
  std::string header = kHeader;
  header.replace(header.find("\"1.0\""), 5, "\"2.0\"");
  const auto path = scratch_dir() / "future.jsonl";
  write_text(path, lines({header, kSpan}));
  const auto doc = Document::open(path, {.strict = false});
  EXPECT_EQ(doc->model(), nullptr);
  EXPECT_NE(doc->error().find("2.0"), std::string::npos) << doc->error();
}

TEST(Document, GarbageNeverCrashes) {
  const auto dir = scratch_dir();
  std::mt19937 gen(11);
  const std::string good = read_text([&] {
    const auto p = dir / "good.jsonl";
    testing::write_ddp_trace(p, 2, 1);
    return p;
  }());
  for (int round = 0; round < 40; ++round) {
    std::string text = good;
    // Flip, cut or splice random bytes; sometimes keep only a prefix.
    for (int k = 0; k < 20; ++k) text[gen() % text.size()] = static_cast<char>(gen() % 256);
    if (round % 3 == 0) text.resize(gen() % text.size());
    const auto path = dir / fmt::format("garbage{}.jsonl", round);
    write_text(path, text);
    for (bool strict : {true, false}) {
      const auto doc = Document::open(path, {.strict = strict});
      if (doc->model() != nullptr) {
        const ReplayModel& m = *doc->model();
        for (double f : {0.0, 0.3, 0.7, 1.0}) (void)m.state_at(m.at_fraction(f));
      } else {
        EXPECT_FALSE(doc->error().empty());
      }
    }
  }
}

TEST(Document, FollowsALiveFileAsItGrows) {
  const auto path = scratch_dir() / "live.jsonl";
  write_text(path, "");
  const auto doc = Document::open(path, {.follow = true});
  EXPECT_TRUE(doc->following());
  EXPECT_EQ(doc->error(), "");
  EXPECT_EQ(doc->model(), nullptr);
  EXPECT_NE(doc->live_status().find("waiting"), std::string::npos);
  auto t = std::chrono::steady_clock::now();
  auto poll = [&] {
    // Past the throttle: its interval is 4 x the last rebuild's wall time, which a loaded machine
    // can stretch past a second.
    t += std::chrono::hours(1);
    return doc->poll(t);
  };
  {
    std::ofstream out(path, std::ios::app);
    out << kHeader << "\n"
        << kSpan << "\n"
        << R"({"type":"span","ts":20,"ra)";  // a partial line
  }
  EXPECT_TRUE(poll());
  ASSERT_NE(doc->model(), nullptr);
  EXPECT_EQ(doc->model()->event_count(), 1u);
  EXPECT_TRUE(doc->warnings().empty()) << "a partial last line is expected in a live file";
  {
    std::ofstream out(path, std::ios::app);
    out << R"(nk":0,"dev":0,"step":0,"phase":"forward","name":"b","cat":"compute","stream":"compute","dur":10})"
        << "\n";
  }
  EXPECT_TRUE(poll());
  EXPECT_EQ(doc->model()->event_count(), 2u);
  EXPECT_EQ(doc->generation(), 2u);
  EXPECT_FALSE(poll()) << "nothing new: no rebuild";
  EXPECT_NE(doc->live_status().find("2 events"), std::string::npos);
}

TEST(Document, FollowingAFileThatDoesNotExistYetWaits) {
  const auto path = scratch_dir() / "later.jsonl";
  const auto doc = Document::open(path, {.follow = true});
  EXPECT_EQ(doc->error(), "");
  EXPECT_EQ(doc->model(), nullptr);
  write_text(path, lines({kHeader, kSpan}));
  EXPECT_TRUE(doc->poll(std::chrono::steady_clock::now() + std::chrono::seconds(1)));
  ASSERT_NE(doc->model(), nullptr);
  EXPECT_EQ(doc->model()->event_count(), 1u);
}

}  // namespace
}  // namespace dpscope::viz
