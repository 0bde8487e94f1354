// zstd-compressed traces (trace_tools/compressed.hpp): written by the recorder and `trace merge`
// when the name ends in .zst, read by content by read_trace, followers and rank directories, a
// followed file decoded block by block as it grows, and a frame cut off reported (strict) or its
// decoded lines kept (lenient).
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "dpscope/base/error.hpp"
#include "dpscope/trace/merge.hpp"
#include "dpscope/trace_tools/compressed.hpp"
#include "dpscope/trace_tools/rank_traces.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/cli.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using testing::header_line;
using testing::rank_header;
using testing::rank_span;
using testing::span_line;
using testing::write_file;

// `text` as one zstd frame (ended), written by the writer the recorder uses.
std::string compressed(const std::filesystem::path& scratch, const std::string& text) {
  {
    TraceFileWriter writer(scratch, /*compress=*/true);
    writer.write(text);
    writer.close();
  }
  return dpscope::testing::read_file(scratch);
}

// Expects the same events, strings and payloads (everything a reader derives from the text).
void expect_same_trace(const TraceData& a, const TraceData& b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.header.run_json, b.header.run_json);
  EXPECT_EQ(a.header.devices.size(), b.header.devices.size());
  EXPECT_EQ(a.strings, b.strings);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    const Event& x = a.events[i];
    const Event& y = b.events[i];
    EXPECT_TRUE(x.type == y.type && x.ts_ns == y.ts_ns && x.dur_ns == y.dur_ns && x.name == y.name &&
                x.dev == y.dev && x.step == y.step && x.phase == y.phase && x.payload == y.payload &&
                x.line == y.line && a.transfer(x).bytes == b.transfer(y).bytes &&
                a.transfer(x).flow == b.transfer(y).flow)
        << "event " << i;
  }
  EXPECT_EQ(a.args.size(), b.args.size());
  EXPECT_EQ(a.counters.size(), b.counters.size());
  EXPECT_EQ(a.values.size(), b.values.size());
  EXPECT_EQ(a.samples.size(), b.samples.size());
  EXPECT_EQ(a.buckets.size(), b.buckets.size());
  EXPECT_EQ(a.min_ts_ns, b.min_ts_ns);
  EXPECT_EQ(a.max_end_ns, b.max_end_ns);
  EXPECT_EQ(a.problems.size(), b.problems.size());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CompressedTrace, RecorderWritesZstdWhenTheNameEndsInZstAndReadingGivesTheSameTrace) {
  const auto dir = testing::scratch_dir();
  const auto plain = testing::record_sample_trace(dir / "run.jsonl");
  const auto zst = testing::record_sample_trace(dir / "run.jsonl.zst");
  const std::string bytes = dpscope::testing::read_file(zst);
  EXPECT_TRUE(starts_with_zstd_magic(bytes));
  EXPECT_FALSE(starts_with_zstd_magic(dpscope::testing::read_file(plain)));
  EXPECT_EQ(read_trace_text(zst).text, dpscope::testing::read_file(plain)) << "the same lines, byte for byte";
  EXPECT_TRUE(read_trace_text(zst).compressed);
  EXPECT_FALSE(read_trace_text(zst).cut_off);
  const TraceData a = read_trace(plain);
  const TraceData b = read_trace(zst);
  EXPECT_EQ(b.path, zst.string());
  expect_same_trace(a, b);
}

TEST(CompressedTrace, IsReadByContentNotByName) {
  const auto dir = testing::scratch_dir();
  const std::string text = header_line() + span_line(0) + span_line(10);
  // Plain text named .zst: read as the plain text it is.
  write_file(dir / "plain.jsonl.zst", text);
  EXPECT_EQ(read_trace(dir / "plain.jsonl.zst").events.size(), 2u);
  // A zstd stream named .jsonl: decoded all the same.
  write_file(dir / "packed.jsonl", compressed(dir / "scratch.zst", text));
  EXPECT_EQ(read_trace(dir / "packed.jsonl").events.size(), 2u);
  TraceFollower follower(dir / "plain.jsonl.zst");
  EXPECT_EQ(follower.poll(), 2u);
}

TEST(CompressedTrace, AFrameCutOffIsOneLineNamingTheFileOrKeepsWhatDecodedWhenLenient) {
  const auto dir = testing::scratch_dir();
  const auto path = dir / "cut.jsonl.zst";
  TraceFileWriter writer(path, /*compress=*/true);
  writer.write(header_line() + span_line(0) + span_line(10));
  writer.flush();  // a block ended, the frame not: a run still writing, or one killed
  const std::string expected = path.string() +
                               ": the zstd frame is cut off (the file ends mid-frame: still being written, "
                               "or truncated)";
  EXPECT_EQ(error_of([&] { read_trace(path); }), expected);
  const TraceData lenient = read_trace(path, {.strict = false});
  EXPECT_EQ(lenient.events.size(), 2u);
  ASSERT_EQ(lenient.problems.size(), 1u);
  EXPECT_EQ(lenient.problems[0].line, 4u);
  EXPECT_EQ(lenient.problems[0].reason,
            "the zstd frame is cut off (the file ends mid-frame): later lines are lost");
  writer.close();
  EXPECT_EQ(read_trace(path).events.size(), 2u) << "once closed the frame is whole";

  // Truncated inside a block: the lines of the blocks before it survive.
  TraceFileWriter two_blocks(path, /*compress=*/true);
  two_blocks.write(header_line() + span_line(0));
  two_blocks.flush();
  const uint64_t first_block_end = std::filesystem::file_size(path);
  two_blocks.write(span_line(10) + span_line(20));
  two_blocks.close();
  const uint64_t whole = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, whole - 2);  // inside the frame's checksum: every line decodes
  EXPECT_EQ(error_of([&] { read_trace(path); }), expected);
  EXPECT_EQ(read_trace(path, {.strict = false}).events.size(), 3u);
  std::filesystem::resize_file(path, first_block_end + (whole - 4 - first_block_end) / 2);  // mid-block
  EXPECT_EQ(error_of([&] { read_trace(path); }), expected);
  EXPECT_EQ(read_trace(path, {.strict = false}).events.size(), 1u);
  std::filesystem::resize_file(path, first_block_end);
  EXPECT_EQ(read_trace(path, {.strict = false}).events.size(), 1u);
}

TEST(CompressedTrace, ATraceOfManyDecodedPiecesReadsAsItsPlainText) {
  // Names that barely compress, so the file spans several of the pieces the reader decodes at a
  // time (256 KiB of zstd bytes each) and lines cross the pieces' ends.
  const auto dir = testing::scratch_dir();
  std::string text = header_line();
  uint64_t x = 88172645463325252ull;
  constexpr int kSpans = 50000;
  for (int i = 0; i < kSpans; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    text += fmt::format(
        R"({{"type":"span","ts":{},"rank":0,"dev":0,"step":0,"phase":"forward","name":"k{:016x}","cat":"compute","stream":"compute","dur":10,"args":{{"flops":{}}}}})"
        "\n",
        i * 10, x, x % 1000);
  }
  write_file(dir / "big.jsonl", text);
  const std::string zst = compressed(dir / "big.jsonl.zst", text);
  ASSERT_GT(zst.size(), size_t{2} << 18) << "more than 2 pieces";
  const TraceData plain = read_trace(dir / "big.jsonl");
  const TraceData packed = read_trace(dir / "big.jsonl.zst");
  expect_same_trace(plain, packed);
  EXPECT_EQ(plain.value_pool, packed.value_pool);
  EXPECT_FALSE(packed.partial_last_line);

  // A malformed last line is reported with its number, as in the plain file.
  write_file(dir / "bad.jsonl.zst", compressed(dir / "scratch.zst", text + "{not json\n"));
  EXPECT_EQ(error_of([&] { read_trace(dir / "bad.jsonl.zst"); }),
            fmt::format("{}:{}: not valid JSON", (dir / "bad.jsonl.zst").string(), kSpans + 2));
  // A malformed line early and a frame cut off later: the cut is what strict reading reports.
  const std::string early_bad =
      compressed(dir / "scratch.zst", header_line() + "{not json\n" + text.substr(header_line().size()));
  write_file(dir / "cut.jsonl.zst", early_bad.substr(0, early_bad.size() - 2));
  EXPECT_EQ(error_of([&] { read_trace(dir / "cut.jsonl.zst"); }),
            (dir / "cut.jsonl.zst").string() +
                ": the zstd frame is cut off (the file ends mid-frame: still being written, or truncated)");
}

TEST(TracePieces, LinesCutAnywhereBetweenPiecesReadAsTheWholeText) {
  // Every kind of line, a blank one and a malformed one, read in pieces so small that pieces end
  // inside the header, inside events and right after line ends: plain and compressed alike.
  const auto dir = testing::scratch_dir();
  const std::string text =
      header_line() + span_line(0, "first") + "\n" +
      R"({"type":"transfer","ts":5,"rank":0,"dev":0,"step":0,"phase":"backward","name":"ring all-reduce","stream":"comm","dur":4,"src":0,"dst":0,"bytes":64,"flow":9,"coll":2,"algo":"ring","algo_step":1,"chunk":0})"
      "\n"
      R"({"type":"counter","ts":6,"rank":0,"dev":0,"step":0,"phase":"forward","name":"memory","values":{"a":1,"b":2}})"
      "\n{not json\n" +
      R"({"type":"instant","ts":7,"rank":0,"dev":0,"step":1,"phase":"forward","name":"error","args":{"message":"boom","param":3}})"
      "\n" +
      span_line(9, "last");
  write_file(dir / "t.jsonl", text);
  write_file(dir / "t.jsonl.zst", compressed(dir / "scratch.zst", text));
  const TraceData whole = parse_trace(text, "t", {.strict = false});
  ASSERT_EQ(whole.events.size(), 5u);
  ASSERT_EQ(whole.problems.size(), 1u);
  for (const char* name : {"t.jsonl", "t.jsonl.zst"}) {
    for (size_t piece : {1, 2, 3, 7, 64, 100000}) {
      SCOPED_TRACE(fmt::format("{} in pieces of {} bytes", name, piece));
      const TraceData lenient = read_trace(dir / name, {.strict = false, .piece_bytes = piece});
      expect_same_trace(whole, lenient);
      EXPECT_EQ(whole.value_pool, lenient.value_pool);
      ASSERT_EQ(lenient.problems.size(), 1u);
      EXPECT_EQ(lenient.problems[0].line, 6u);
      EXPECT_EQ(lenient.problems[0].reason, "not valid JSON");
      EXPECT_FALSE(lenient.partial_last_line);
      EXPECT_EQ(error_of([&] { read_trace(dir / name, {.piece_bytes = piece}); }),
                fmt::format("{}:6: not valid JSON", (dir / name).string()));
    }
  }
  // A last line without its '\n', cut between pieces too, is left out (a file being written).
  write_file(dir / "partial.jsonl", text + R"({"type":"instant")");
  const TraceData partial = read_trace(dir / "partial.jsonl", {.strict = false, .piece_bytes = 5});
  EXPECT_EQ(partial.events.size(), 5u);
  EXPECT_TRUE(partial.partial_last_line);
  // A header cut by the end of the file.
  write_file(dir / "header.jsonl", header_line().substr(0, 20));
  EXPECT_EQ(error_of([&] { read_trace(dir / "header.jsonl", {.piece_bytes = 3}); }),
            (dir / "header.jsonl").string() + ":1: incomplete header line (the file ends before its '\\n')");
}

TEST(TracePieces, ALargeTraceParsedOnTwoThreadsReadsAsOneParserReadsIt) {
  // Large runs of lines are cut into chunks parsed on two threads (split_parser.hpp), all but the
  // first into side traces appended afterwards: strings, arg shapes, payloads, remote ends, line
  // numbers and problems must come out as one parser reading the whole text gives them, in file
  // order, however the chunks are cut (the default, a few, hundreds).
  const auto dir = testing::scratch_dir();
  std::string text = rank_header(0, 2, 0);
  constexpr int kGroups = 3000;
  for (int i = 0; i < kGroups; ++i) {
    text += fmt::format(
        R"({{"type":"span","ts":{},"rank":0,"dev":0,"step":{},"phase":"forward","name":"k{}","cat":"compute","stream":"compute","dur":10,"args":{{"flops":{},"op":"o{}"}}}})"
        "\n",
        i * 10, i, i % 37, i, i % 5);
    text += fmt::format(
        R"({{"type":"transfer","ts":{},"rank":0,"dev":0,"step":{},"phase":"backward","name":"ring all-reduce","stream":"comm","dur":4,"src":0,"dst":1,"dst_rank":1,"bytes":{},"flow":{},"coll":{},"algo":"ring","algo_step":1,"chunk":0}})"
        "\n",
        i * 10 + 1, i, 64 + i, i, i);
    text += fmt::format(
        R"({{"type":"counter","ts":{},"rank":0,"dev":0,"step":{},"phase":"forward","name":"memory","values":{{"a{}":{},"b":2}}}})"
        "\n",
        i * 10 + 2, i, i % 3, i);
    // Runs of values many events share, under two key lists with equal numbers: a copied run is
    // reused for the same keys only (split_parser.hpp copies each chunk's runs once).
    text += fmt::format(
        R"({{"type":"instant","ts":{},"rank":0,"dev":0,"step":{},"phase":"forward","name":"mark","args":{{"x":{},"y":2,"op":"o{}"}}}})"
        "\n",
        i * 10 + 3, i, i % 4, i % 2);
    text += fmt::format(
        R"({{"type":"instant","ts":{},"rank":0,"dev":0,"step":{},"phase":"forward","name":"mark","args":{{"p":{},"q":2,"op":"o{}"}}}})"
        "\n",
        i * 10 + 4, i, i % 4, i % 2);
    if (i % 997 == 5) text += "{not json\n";
  }
  write_file(dir / "big.jsonl", text);
  write_file(dir / "big.jsonl.zst", compressed(dir / "scratch.zst", text));
  const TraceData whole = parse_trace(text, (dir / "big.jsonl").string(), {.strict = false});
  ASSERT_EQ(whole.events.size(), 5u * kGroups);
  ASSERT_EQ(whole.problems.size(), 4u);
  for (const auto& [name, chunk] :
       {std::pair{"big.jsonl", 0}, {"big.jsonl.zst", 0}, {"big.jsonl", 100000}, {"big.jsonl.zst", 4096}}) {
    SCOPED_TRACE(fmt::format("{} in chunks of {} bytes", name, chunk));
    const ReadOptions options{.strict = false, .chunk_bytes = static_cast<size_t>(chunk)};
    const TraceData read = read_trace(dir / name, options);
    ASSERT_EQ(read.events.size(), whole.events.size());
    for (size_t i = 0; i < whole.events.size(); ++i) {
      const Event& a = whole.events[i];
      const Event& b = read.events[i];
      ASSERT_EQ(a.line, b.line) << i;
      ASSERT_EQ(whole.str(a.name), read.str(b.name)) << i;
      ASSERT_EQ(a.step, b.step) << i;
      if (a.type == EventType::kSpan || a.type == EventType::kInstant) {
        const Args& x = whole.args[a.payload];
        const Args& y = read.args[b.payload];
        ASSERT_EQ(whole.arg_values(x).size(), read.arg_values(y).size()) << i;
        for (size_t k = 0; k < whole.arg_values(x).size(); ++k) {
          ASSERT_EQ(whole.str(whole.arg_values(x)[k].first), read.str(read.arg_values(y)[k].first)) << i;
          ASSERT_EQ(whole.arg_values(x)[k].second, read.arg_values(y)[k].second) << i;
        }
        ASSERT_EQ(whole.arg_texts(x).size(), read.arg_texts(y).size()) << i;
        for (size_t k = 0; k < whole.arg_texts(x).size(); ++k) {
          ASSERT_EQ(whole.str(whole.arg_texts(x)[k].first), read.str(read.arg_texts(y)[k].first)) << i;
          ASSERT_EQ(whole.str(whole.arg_texts(x)[k].second), read.str(read.arg_texts(y)[k].second)) << i;
        }
      } else if (a.type == EventType::kCounter) {
        const ArgValues x = whole.counter_values(whole.counters[a.payload]);
        const ArgValues y = read.counter_values(read.counters[b.payload]);
        ASSERT_EQ(x.size(), y.size()) << i;
        for (size_t k = 0; k < x.size(); ++k) {
          ASSERT_EQ(whole.str(x[k].first), read.str(y[k].first)) << i;
          ASSERT_EQ(x[k].second, y[k].second) << i;
        }
      } else {
        const Transfer& x = whole.transfer(a);
        const Transfer& y = read.transfer(b);
        ASSERT_EQ(x.bytes, y.bytes) << i;
        ASSERT_EQ(x.flow, y.flow) << i;
        ASSERT_EQ(whole.str(x.algo), read.str(y.algo)) << i;
        ASSERT_NE(read.remote_ends_of(b), nullptr) << i;
        EXPECT_EQ(read.remote_ends_of(b)->dst_rank, 1) << i;
      }
    }
    EXPECT_EQ(read.strings, whole.strings) << "in the order one parser interns them";
    EXPECT_EQ(read.shapes.size(), whole.shapes.size());
    ASSERT_EQ(read.problems.size(), whole.problems.size());
    for (size_t p = 0; p < whole.problems.size(); ++p)
      EXPECT_EQ(read.problems[p].line, whole.problems[p].line);
    EXPECT_EQ(read.min_ts_ns, whole.min_ts_ns);
    EXPECT_EQ(read.max_end_ns, whole.max_end_ns);
    // Strict: the first malformed line, wherever the chunks were cut.
    EXPECT_EQ(error_of([&] { read_trace(dir / name, {.chunk_bytes = static_cast<size_t>(chunk)}); }),
              fmt::format("{}:{}: not valid JSON", (dir / name).string(), whole.problems[0].line));
  }
  // A malformed line only late in the file: found in a side chunk, reported alike.
  std::string clean = text;
  for (size_t at; (at = clean.find("{not json\n")) != std::string::npos;) clean.erase(at, 10);
  const size_t at = clean.find('\n', clean.size() * 3 / 4) + 1;
  write_file(dir / "late.jsonl", clean.substr(0, at) + "{not json\n" + clean.substr(at));
  const auto line = std::count(clean.begin(), clean.begin() + static_cast<std::ptrdiff_t>(at), '\n') + 1;
  // (In pieces of 300 kB, the error is met while appending an earlier piece's chunks, with the
  // other thread parsing the next piece's.)
  for (const auto& [piece, chunk] : {std::pair<size_t, size_t>{0, 0}, {0, 4096}, {300000, 4096}}) {
    EXPECT_EQ(error_of([&] { read_trace(dir / "late.jsonl", {.piece_bytes = piece, .chunk_bytes = chunk}); }),
              fmt::format("{}:{}: not valid JSON", (dir / "late.jsonl").string(), line));
    const TraceData lenient =
        read_trace(dir / "late.jsonl", {.strict = false, .piece_bytes = piece, .chunk_bytes = chunk});
    ASSERT_EQ(lenient.problems.size(), 1u);
    EXPECT_EQ(lenient.problems[0].line, static_cast<uint32_t>(line));
    EXPECT_EQ(lenient.events.size(), 5u * kGroups);
  }
}

TEST(CompressedTrace, BytesThatAreNoZstdStreamAreOneLineNamingTheFile) {
  const auto dir = testing::scratch_dir();
  const auto path = dir / "bad.jsonl.zst";
  std::string bytes = compressed(dir / "scratch.zst", header_line() + span_line(0));
  for (size_t i = 4; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xFF);  // the magic, then junk
  write_file(path, bytes);
  const std::string error = error_of([&] { read_trace(path); });
  EXPECT_EQ(error.rfind(path.string() + ": not a valid zstd stream (", 0), 0u) << error;
  EXPECT_EQ(error.back(), ')') << error;
  TraceFollower follower(path);
  EXPECT_EQ(error_of([&] { follower.poll(); }).rfind(path.string() + ": not a valid zstd stream (", 0), 0u);
}

TEST(CompressedTrace, AFollowerDecodesEachFlushedBlockAsTheFileGrows) {
  const auto dir = testing::scratch_dir();
  const auto path = dir / "live.jsonl.zst";
  TraceFileWriter writer(path, /*compress=*/true);
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 0u) << "an empty file";
  writer.write(header_line());
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_FALSE(follower.has_header()) << "written, not flushed: still inside zstd";
  writer.flush();
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_TRUE(follower.has_header());
  for (int block = 0; block < 5; ++block) {
    writer.write(span_line(100 * block) + span_line(100 * block + 50));
    writer.flush();
    EXPECT_EQ(follower.poll(), 2u) << "block " << block;
    EXPECT_FALSE(follower.data().partial_last_line);
  }
  // A block that ends mid-line: the half line waits, decoded, for the block that completes it.
  const std::string line = span_line(900, "split");
  writer.write(line.substr(0, 30));
  writer.flush();
  EXPECT_EQ(follower.poll(), 0u);
  EXPECT_TRUE(follower.data().partial_last_line);
  writer.write(line.substr(30));
  writer.close();
  EXPECT_EQ(follower.poll(), 1u);
  EXPECT_EQ(follower.data().str(follower.data().events.back().name), "split");
  EXPECT_EQ(follower.data().events.back().line, 12u);
  EXPECT_EQ(follower.restarts(), 0u);
}

TEST(CompressedTrace, AFollowerDecodesAFileThatGrowsAFewBytesAtATime) {
  const auto dir = testing::scratch_dir();
  std::string text = header_line();
  for (int i = 0; i < 50; ++i) text += span_line(10 * i);
  const std::string bytes = compressed(dir / "whole.zst", text);
  const auto path = dir / "growing.jsonl.zst";
  write_file(path, "");
  TraceFollower follower(path);
  size_t seen = 0;
  for (size_t end = 0; end < bytes.size();) {
    end = std::min(bytes.size(), end + 7);  // cuts the magic, the frame header, blocks anywhere
    write_file(path, bytes.substr(0, end));
    seen += follower.poll();
  }
  EXPECT_EQ(seen, 50u);
  EXPECT_EQ(follower.restarts(), 0u);
  expect_same_trace(follower.data(), parse_trace(text, path.string()));
}

TEST(CompressedTrace, AFollowerOfARecorderSeesEveryStepAfterItsFlush) {
  testing::expect_follower_sees_each_flushed_step(testing::scratch_dir() / "live.jsonl.zst");
}

TEST(CompressedTrace, AFollowerStartsOverWhenACompressedFileIsRewritten) {
  const auto dir = testing::scratch_dir();
  const auto path = dir / "live.jsonl.zst";
  write_file(path, compressed(dir / "a.zst", header_line() + span_line(0) + span_line(10)));
  TraceFollower follower(path);
  EXPECT_EQ(follower.poll(), 2u);
  write_file(path, compressed(dir / "b.zst", header_line() + span_line(500, "new run")));
  EXPECT_EQ(follower.poll(), 1u);
  EXPECT_EQ(follower.restarts(), 1u);
  ASSERT_EQ(follower.data().events.size(), 1u);
  EXPECT_EQ(follower.data().str(follower.data().events[0].name), "new run");
}

TEST(CompressedTrace, RankFilesMayBeCompressed) {
  EXPECT_EQ(rank_of_file_name("rank-3.jsonl.zst"), 3);
  EXPECT_EQ(rank_of_file_name("rank-3.zst"), std::nullopt);
  EXPECT_EQ(rank_of_file_name("rank-.jsonl.zst"), std::nullopt);

  const dpscope::testing::TempDir plain_dir;
  const dpscope::testing::TempDir mixed_dir;
  const std::string rank0 = rank_header(0, 2, 0) + rank_span(0, 100, "a") + rank_span(0, 300, "c");
  const std::string rank1 = rank_header(1, 2, 50) + rank_span(1, 100, "b");
  write_file(plain_dir / "rank-0.jsonl", rank0);
  write_file(plain_dir / "rank-1.jsonl", rank1);
  write_file(mixed_dir / "rank-0.jsonl.zst", compressed(plain_dir.path() / "scratch.zst", rank0));
  write_file(mixed_dir / "rank-1.jsonl", rank1);
  std::filesystem::remove(plain_dir.path() / "scratch.zst");
  const TraceData a = read_trace(plain_dir.path());
  const TraceData b = read_trace(mixed_dir.path());
  expect_same_trace(a, b);
  EXPECT_EQ(b.ranks[0].path, mixed_dir / "rank-0.jsonl.zst");

  TraceFollower follower(mixed_dir.path());
  EXPECT_EQ(follower.poll(), 3u);
  EXPECT_TRUE(follower.is_directory());

  // `trace merge` reads them, and writes zstd when OUT ends in .zst.
  const dpscope::testing::TempDir out;
  const MergeResult plain_merge = merge_rank_traces(mixed_dir.path(), out.path() / "merged.jsonl");
  const MergeResult zst_merge = merge_rank_traces(mixed_dir.path(), out.path() / "merged.jsonl.zst");
  EXPECT_EQ(plain_merge.events, 3u);
  EXPECT_EQ(zst_merge.events, 3u);
  EXPECT_TRUE(starts_with_zstd_magic(dpscope::testing::read_file(out.path() / "merged.jsonl.zst")));
  EXPECT_EQ(read_trace_text(out.path() / "merged.jsonl.zst").text,
            dpscope::testing::read_file(out.path() / "merged.jsonl"));
  EXPECT_EQ(out.files(), (std::vector<std::string>{"merged.jsonl", "merged.jsonl.zst"})) << "no .tmp left";
}

TEST(CompressedTrace, ARankWithBothAPlainAndACompressedFileIsRefused) {
  const dpscope::testing::TempDir dir;
  write_file(dir / "rank-0.jsonl", rank_header(0, 1, 0));
  write_file(dir / "rank-0.jsonl.zst", rank_header(0, 1, 0));
  EXPECT_EQ(error_of([&] { read_trace(dir.path()); }),
            fmt::format("'{}' has both rank-0.jsonl and rank-0.jsonl.zst: which is rank 0's trace?",
                        dir.path().string()));
}

TEST(CompressedTrace, WriterErrorsNameTheFile) {
  const auto missing = testing::scratch_dir() / "no" / "such" / "run.jsonl.zst";
  EXPECT_EQ(error_of([&] { TraceFileWriter writer(missing, true); }),
            fmt::format("cannot write trace '{}': No such file or directory", missing.string()));
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full to fail a write";
  // Regression test: a full disk said "error while writing trace" without the reason, and only at close.
  for (const bool compress : {true, false}) {
    TraceFileWriter full("/dev/full", compress);
    full.write(header_line());
    EXPECT_EQ(error_of([&] { full.flush(); }), "cannot write trace '/dev/full': No space left on device");
    EXPECT_NO_THROW(full.close()) << "reported once, at the write that failed";
  }
  TraceFileWriter closing("/dev/full", /*compress=*/false);
  closing.write(header_line());
  EXPECT_EQ(error_of([&] { closing.close(); }), "cannot write trace '/dev/full': No space left on device");
}

TEST(CompressedTrace, TrainWritesZstdAndTraceStatsReadsIt) {
  const auto dir = testing::scratch_dir();
  const auto path = dir / "run.jsonl.zst";
  const auto train = dpscope::testing::run_dpscope(
      "train --mode dp --device sim --devices 2 --model 2-8-3 --dataset spirals:64 --batch 16 --steps 2 "
      "--trace '" +
      path.string() + "'");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_TRUE(starts_with_zstd_magic(dpscope::testing::read_file(path)));
  const size_t events = read_trace(path).events.size();
  EXPECT_GT(events, 0u);
  const auto stats = dpscope::testing::run_dpscope("trace stats '" + path.string() + "'");
  EXPECT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_EQ(stats.output.rfind(fmt::format("{}: {} events, simulated clock, ", path.string(), events), 0), 0u)
      << stats.output;
}

// Random traces of every kind of line, good and bad, read in random pieces and chunks: the same
// trace (events, strings in order, args, problems with their lines and reasons) as one parser of the
// whole text, and in strict mode the same first error.
TEST(TracePieces, RandomTracesInRandomPiecesAndChunksReadAsOneParserReadsThem) {
  const auto dir = testing::scratch_dir();
  std::mt19937 gen(2026);
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(gen() % n); };
  for (int round = 0; round < 6; ++round) {
    std::string text = header_line();
    const int lines = 2000 + static_cast<int>(pick(3000));
    for (int i = 0; i < lines; ++i) {
      const int64_t ts = i * 10;
      switch (pick(12)) {
        case 0: text += "{not json\n"; break;
        case 1: text += "\n"; break;  // blank
        case 2:
          text += R"({"type":"span","ts":"late"})"
                  "\n";
          break;  // a field of the wrong type
        case 3:
          text += R"({"type":"from_the_future","ts":1})"
                  "\n";
          break;  // skipped, no problem
        case 4:
          text += fmt::format(
              R"({{"type":"counter","ts":{},"rank":0,"dev":0,"step":{},"phase":"forward","name":"memory","values":{{"k{}":{},"b":2}}}})"
              "\n",
              ts, i, pick(4), pick(3));
          break;
        case 5:
          text += fmt::format(
              R"({{"type":"instant","ts":{},"rank":0,"dev":0,"step":{},"phase":"backward","name":"n{}","args":{{"op":"o{}","x":{}}}}})"
              "\n",
              ts, i, pick(50), pick(7), pick(3));
          break;
        default: text += span_line(ts, fmt::format("k{}", pick(200)).c_str()) + "\n"; break;
      }
    }
    const TraceData whole = parse_trace(text, (dir / "r.jsonl").string(), {.strict = false});
    std::string strict_error = "(no error)";
    try {
      parse_trace(text, (dir / "r.jsonl").string());
    } catch (const Error& e) {
      strict_error = e.what();
    }
    write_file(dir / "r.jsonl", text);
    for (int reading = 0; reading < 3; ++reading) {
      const size_t piece = size_t{1} + pick(200000);
      const size_t chunk = size_t{1} + pick(70000);
      SCOPED_TRACE(fmt::format("round {}: pieces of {} bytes, chunks of {}", round, piece, chunk));
      const TraceData read =
          read_trace(dir / "r.jsonl", {.strict = false, .piece_bytes = piece, .chunk_bytes = chunk});
      expect_same_trace(whole, read);
      ASSERT_EQ(read.problems.size(), whole.problems.size());
      for (size_t p = 0; p < whole.problems.size(); ++p) {
        EXPECT_EQ(read.problems[p].line, whole.problems[p].line) << p;
        EXPECT_EQ(read.problems[p].reason, whole.problems[p].reason) << p;
      }
      for (size_t i = 0; i < whole.events.size(); ++i) {
        const Event& a = whole.events[i];
        if (a.type != EventType::kInstant || a.payload < 0) continue;
        const Event& b = read.events[i];
        ASSERT_EQ(whole.text_arg(a, "op"), read.text_arg(b, "op")) << i;
        ASSERT_EQ(whole.arg(a, "x"), read.arg(b, "x")) << i;
      }
      EXPECT_EQ(error_of([&] { read_trace(dir / "r.jsonl", {.piece_bytes = piece, .chunk_bytes = chunk}); }),
                strict_error);
    }
  }
}

}  // namespace
}  // namespace dpscope::trace
