// The recorder's exact text: the JSON helpers it writes with (json_text.hpp) and whole event lines,
// byte for byte as docs/trace-format.md shows them (the reader tests check meaning; these check
// that a faster writer still writes the same bytes); and its writing thread: what flush() and
// flush_soon() make visible, every line of many threads kept, a failed write reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "dpscope/core/device.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/json_text.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "support/file_size_limit.hpp"
#include "support/presets.hpp"
#include "trace_test_util.hpp"

namespace dpscope {
namespace {

template <typename Fn>
std::string written(Fn&& fn) {
  fmt::memory_buffer out;
  fn(out);
  return fmt::to_string(out);
}

TEST(JsonText, IntegersAreWrittenInDecimalAtEveryWidth) {
  EXPECT_EQ(written([](auto& out) { append_json_int(out, 0); }), "0");
  EXPECT_EQ(written([](auto& out) { append_json_int(out, -1); }), "-1");
  EXPECT_EQ(written([](auto& out) { append_json_int(out, std::numeric_limits<int64_t>::min()); }),
            "-9223372036854775808");
  EXPECT_EQ(written([](auto& out) { append_json_int(out, std::numeric_limits<uint64_t>::max()); }),
            "18446744073709551615");
  // After other text, and more than the inline buffer's worth: nothing is lost or left over.
  const std::string many = written([](auto& out) {
    append_raw(out, "[");
    for (int i = 0; i < 200; ++i) {
      append_json_int(out, int64_t{1} << (i % 63));
      append_raw(out, ",");
    }
  });
  std::string expected = "[";
  for (int i = 0; i < 200; ++i) expected += std::to_string(int64_t{1} << (i % 63)) + ",";
  EXPECT_EQ(many, expected);
}

TEST(JsonText, StringsEscapeQuotesBackslashesAndControlCharactersAnywhere) {
  EXPECT_EQ(written([](auto& out) { append_json_string(out, ""); }), R"("")");
  EXPECT_EQ(written([](auto& out) { append_json_string(out, "forward 0.Linear"); }), R"("forward 0.Linear")");
  EXPECT_EQ(written([](auto& out) { append_json_string(out, "\"a\\b\""); }), R"("\"a\\b\"")");
  EXPECT_EQ(written([](auto& out) { append_json_string(out, std::string_view("\n\r\t\x01x\x1f", 6)); }),
            R"("\n\r\t\u0001x\u001f")");
  EXPECT_EQ(written([](auto& out) { append_json_string(out, std::string_view("a\0b", 3)); }),
            R"("a\u0000b")");
  EXPECT_EQ(written([](auto& out) { append_json_string(out, "ü — µs"); }), "\"ü — µs\"");  // UTF-8 as is
}

TEST(JsonText, NumbersAreIntegersWhenWholeShortestOtherwiseAndNullWhenNotFinite) {
  EXPECT_EQ(written([](auto& out) { append_json_number(out, 102760448.0); }), "102760448");
  EXPECT_EQ(written([](auto& out) { append_json_number(out, -3.0); }), "-3");
  EXPECT_EQ(written([](auto& out) { append_json_number(out, 2.3021); }), "2.3021");
  EXPECT_EQ(written([](auto& out) { append_json_number(out, 1e300); }), "1e+300");
  EXPECT_EQ(written([](auto& out) { append_json_number(out, std::numeric_limits<double>::infinity()); }),
            "null");
  EXPECT_EQ(written([](auto& out) { append_json_number(out, std::nan("")); }), "null");
}

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(TraceRecorderText, EventLinesAreWrittenByteForByte) {
  const auto dir = trace::testing::scratch_dir();
  const Device gpu = Device::sim(0, dpscope::testing::roofline_preset("h100-sxm"));
  TraceHeader header;
  header.clock = "simulated";
  add_trace_device(header, gpu);
  const Device devices[] = {gpu};
  auto recorder = TraceRecorder::open(dir / "t.jsonl", header, devices);
  gpu.set_rank(2);
  gpu.set_step(-1);
  gpu.set_phase(Phase::kBackward);
  recorder->kernel_span(gpu, StreamKind::kCompute, "backward \"0\".Linear", 1234567890123, 4035,
                        KernelCost{.flops = 102760448, .bytes = 0.5});
  gpu.set_step(7);
  recorder->instant(gpu, 91000, GradReady{.param = 5});
  recorder->loss_counter(gpu, 50000, 2.3021);
  recorder->transfer(gpu, {.src = 0,
                           .dst = 1,
                           .bytes = 65536,
                           .ts_ns = 80000,
                           .dur_ns = 1200,
                           .stream = StreamKind::kComm,
                           .name = "ring reduce-scatter"});
  recorder->transfer(gpu, {.src = 0,
                           .dst = 1,
                           .bytes = 64,
                           .ts_ns = 80100,
                           .dur_ns = 5,
                           .stream = StreamKind::kComm,
                           .name = "ring all-gather",
                           .collective = 4,
                           .algo = "ring",
                           .algo_step = 1,
                           .chunk = 2,
                           .src_rank = 1,
                           .dst_rank = 3});
  recorder->close();
  const std::vector<std::string> lines = lines_of(dir / "t.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[1], R"({"type":"span","ts":1234567890123,"rank":2,"dev":0,"step":-1,"phase":"backward",)"
                      R"("name":"backward \"0\".Linear","cat":"compute","stream":"compute","dur":4035,)"
                      R"("args":{"flops":102760448,"bytes":0.5}})");
  EXPECT_EQ(lines[2], R"({"type":"instant","ts":91000,"rank":2,"dev":0,"step":7,"phase":"backward",)"
                      R"("name":"grad_ready","args":{"param":5}})");
  EXPECT_EQ(lines[3], R"({"type":"counter","ts":50000,"rank":2,"dev":0,"step":7,"phase":"backward",)"
                      R"("name":"loss","values":{"loss":2.3021}})");
  EXPECT_EQ(
      lines[4],
      R"({"type":"transfer","ts":80000,"rank":2,"dev":0,"step":7,"phase":"backward",)"
      R"("name":"ring reduce-scatter","stream":"comm","dur":1200,"src":0,"dst":1,"bytes":65536,"flow":1})");
  EXPECT_EQ(lines[5],
            R"({"type":"transfer","ts":80100,"rank":2,"dev":0,"step":7,"phase":"backward",)"
            R"("name":"ring all-gather","stream":"comm","dur":5,"src":0,"dst":1,"bytes":64,"flow":2,)"
            R"("coll":4,"algo":"ring","algo_step":1,"chunk":2,"src_rank":1,"dst_rank":3})");
}

// A collective that failed the fingerprint check (docs/trace-format.md, lesson 13): its span's args
// end with `error`, the message escaped; one that ran has no `error` key at all. The reader gives
// the message back through collective_error(), and nothing for the one that ran.
TEST(TraceRecorderText, AFailedCollectiveCarriesItsErrorLastInItsArgs) {
  const auto dir = trace::testing::scratch_dir();
  const Device gpu = Device::sim(0, dpscope::testing::roofline_preset("h100-sxm"));
  TraceHeader header;
  header.clock = "simulated";
  add_trace_device(header, gpu);
  const Device devices[] = {gpu};
  auto recorder = TraceRecorder::open(dir / "t.jsonl", header, devices);
  gpu.set_rank(0);
  gpu.set_step(1);
  gpu.set_phase(Phase::kNone);
  const CollectiveArgs ran{.coll = 6,
                           .op = "all_reduce",
                           .algo = "ring",
                           .bytes = 4,
                           .count = 1,
                           .dtype = "float32",
                           .redop = "sum",
                           .root = -1,
                           .ranks = 4,
                           .slices = 1,
                           .steps = 6};
  CollectiveArgs failed = ran;
  failed.coll = 7;
  failed.algo = "auto";
  failed.steps = 0;
  failed.error = "Detected mismatch: \"Rank 0\" differs";
  recorder->span(gpu, {.stream = StreamKind::kComm,
                       .cat = SpanCategory::kCollective,
                       .name = "all_reduce ring 4 B",
                       .ts_ns = 100,
                       .dur_ns = 50,
                       .args = ran});
  recorder->span(gpu, {.stream = StreamKind::kComm,
                       .cat = SpanCategory::kCollective,
                       .name = "all_reduce auto 4 B",
                       .ts_ns = 150,
                       .dur_ns = 2000,
                       .args = failed});
  recorder->close();
  const std::vector<std::string> lines = lines_of(dir / "t.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], R"({"type":"span","ts":100,"rank":0,"dev":0,"step":1,"phase":"none",)"
                      R"("name":"all_reduce ring 4 B","cat":"collective","stream":"comm","dur":50,)"
                      R"("args":{"coll":6,"group":0,"op":"all_reduce","algo":"ring","bytes":4,"count":1,)"
                      R"("dtype":"float32","redop":"sum","root":-1,"ranks":4,"slices":1,"steps":6}})");
  EXPECT_EQ(lines[2], R"({"type":"span","ts":150,"rank":0,"dev":0,"step":1,"phase":"none",)"
                      R"("name":"all_reduce auto 4 B","cat":"collective","stream":"comm","dur":2000,)"
                      R"("args":{"coll":7,"group":0,"op":"all_reduce","algo":"auto","bytes":4,"count":1,)"
                      R"("dtype":"float32","redop":"sum","root":-1,"ranks":4,"slices":1,"steps":0,)"
                      R"("error":"Detected mismatch: \"Rank 0\" differs"}})");
  const trace::TraceData data = trace::read_trace(dir / "t.jsonl");
  ASSERT_EQ(data.events.size(), 2u);
  EXPECT_EQ(data.collective_error(data.events[0]), std::nullopt);
  EXPECT_EQ(data.collective_error(data.events[1]), "Detected mismatch: \"Rank 0\" differs");
}

TEST(TraceRecorderText, SamplesCarryTheirEpochOnlyWhenKnown) {
  const auto dir = trace::testing::scratch_dir();
  const Device gpu = Device::sim(0, dpscope::testing::roofline_preset("h100-sxm"));
  TraceHeader header;
  add_trace_device(header, gpu);
  const Device devices[] = {gpu};
  auto recorder = TraceRecorder::open(dir / "t.jsonl", header, devices);
  gpu.set_rank(1);
  gpu.set_step(0);
  gpu.set_phase(Phase::kData);
  const int64_t indices[] = {32, 33, 34, 35};
  recorder->samples(gpu, 0, indices, 2);
  recorder->samples(gpu, 5, indices, std::nullopt);
  recorder->close();
  const std::vector<std::string> lines = lines_of(dir / "t.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], R"({"type":"samples","ts":0,"rank":1,"dev":0,"step":0,"phase":"data",)"
                      R"("indices":[32,33,34,35],"epoch":2})");
  EXPECT_EQ(lines[2], R"({"type":"samples","ts":5,"rank":1,"dev":0,"step":0,"phase":"data",)"
                      R"("indices":[32,33,34,35]})");
}

// A recorder on one simulated GPU writing to `path`.
struct OneGpuRecorder {
  explicit OneGpuRecorder(const std::filesystem::path& path)
      : gpu(Device::sim(0, dpscope::testing::roofline_preset("h100-sxm"))) {
    TraceHeader header;
    add_trace_device(header, gpu);
    const Device devices[] = {gpu};
    recorder = TraceRecorder::open(path, header, devices);
  }
  Device gpu;
  std::unique_ptr<TraceRecorder> recorder;
};

TEST(TraceRecorderWriting, FlushShowsTheLinesAtOnceFlushSoonMomentsLater) {
  for (const char* name : {"t.jsonl", "t.jsonl.zst"}) {
    const auto path = trace::testing::scratch_dir() / name;
    OneGpuRecorder r(path);
    trace::TraceFollower follower(path);
    EXPECT_EQ(follower.poll(), 0u);
    r.recorder->instant(r.gpu, 10, GradReady{.param = 1});
    r.recorder->flush();
    EXPECT_EQ(follower.poll(), 1u) << name << ": flush() returns once the line is in the file";
    // Handed over while the writing thread lingers after its last write (no wake-up call), then
    // after it has gone to sleep (woken).
    for (const int param : {2, 3}) {
      if (param == 3) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // > its 2 ms linger
      r.recorder->instant(r.gpu, 10 * param, GradReady{.param = param});
      r.recorder->flush_soon();
      uint64_t seen = 0;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while ((seen += follower.poll()) < 1 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_EQ(seen, 1u) << name << ": flush_soon()'s line " << param
                          << " reaches the file without another call";
    }
    r.recorder->close();
    EXPECT_EQ(follower.poll(), 0u);
    EXPECT_EQ(follower.data().events.size(), 3u);
  }
}

// 4 threads emit 30,000 events each (several MiB: lines go to the writer while others are being
// written), one of them flushing soon every 35: every line is in the file once, each thread's in
// the order it emitted them.
TEST(TraceRecorderWriting, EveryLineOfManyThreadsIsWrittenInEachThreadsOrder) {
  for (const char* name : {"many.jsonl", "many.jsonl.zst"}) {
    const auto path = trace::testing::scratch_dir() / name;
    constexpr int kThreads = 4;
    constexpr int kEach = 30'000;
    {
      std::vector<Device> gpus;
      TraceHeader header;
      for (int i = 0; i < kThreads; ++i) {
        gpus.push_back(Device::sim(i, dpscope::testing::roofline_preset("h100-sxm")));
        add_trace_device(header, gpus.back());
      }
      auto recorder = TraceRecorder::open(path, header, gpus);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < kEach; ++i) {
            recorder->kernel_span(gpus[static_cast<size_t>(t)], StreamKind::kCompute, "k", i, 1,
                                  KernelCost{});
            if (t == 0 && i % 35 == 0) recorder->flush_soon();
          }
        });
      }
      for (std::thread& thread : threads) thread.join();
      recorder->close();
    }
    const trace::TraceData data = trace::read_trace(path);
    ASSERT_EQ(data.events.size(), static_cast<size_t>(kThreads * kEach)) << name;
    EXPECT_TRUE(data.problems.empty()) << name;
    // In file order, each device's timestamps are 0, 1, 2, ...: every line once, in emitting order.
    std::vector<const trace::Event*> by_line;
    for (const trace::Event& e : data.events) by_line.push_back(&e);
    std::sort(by_line.begin(), by_line.end(), [](auto* a, auto* b) { return a->line < b->line; });
    std::map<int, int64_t> next;  // device id (the host has one too) -> its next timestamp
    for (const trace::Event* e : by_line) {
      ASSERT_EQ(e->ts_ns, next[e->dev]) << name << " device " << e->dev << ", line " << e->line;
      ++next[e->dev];
    }
  }
}

// Regression test: a full disk during --trace exited with code 2 (a usage error) and said "error while
// writing trace" without the reason, at close. It is a runtime failure (kWriteFailed: exit code 1)
// naming strerror, reported at the first flush that reaches the file: here open()'s, which writes the
// header; in a run whose disk fills later, the next flush_soon() (the run stops at its next step).
TEST(TraceRecorderWriting, AFailedWriteIsAWriteFailureWithTheSystemsReason) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full to fail a write";
  try {
    OneGpuRecorder r("/dev/full");
    ADD_FAILURE() << "opening a trace on /dev/full wrote its header";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kWriteFailed);
    EXPECT_FALSE(e.is_usage_error());
    EXPECT_EQ(std::string(e.what()), "cannot write trace '/dev/full': No space left on device");
  }
}

// ... and a write that fails later, on the writing thread, stops the run at its next flush_soon()
// instead of after its last step. RLIMIT_FSIZE fails the writes past the header (EFBIG).
TEST(TraceRecorderWriting, AWriteThatFailsMidRunIsReportedByTheNextFlushSoon) {
  const auto path = trace::testing::scratch_dir() / "limited.jsonl";
  OneGpuRecorder r(path);  // the header is in the file
  std::string message;
  ErrorKind kind = ErrorKind::kInternal;
  {
    const dpscope::testing::FileSizeLimit limit(std::filesystem::file_size(path) + 100);
    for (int step = 0; step < 500 && message.empty(); ++step) {
      for (int i = 0; i < 100; ++i) r.recorder->instant(r.gpu, step * 100 + i, GradReady{.param = 1});
      try {
        r.recorder->flush_soon();
      } catch (const Error& e) {
        message = e.what();
        kind = e.kind();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  EXPECT_EQ(kind, ErrorKind::kWriteFailed);
  EXPECT_EQ(message, "cannot write trace '" + path.string() + "': File too large");
  try {
    r.recorder->close();
    ADD_FAILURE() << "close() reported nothing";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message) << "close() says it again, as the run's last word";
  }
}

// The disk fills mid-line: the file ends at its last whole line, a finished trace (before, it ended
// in half a line, which readers take for a trace still being written: a warning, the line left out).
TEST(TraceRecorderWriting, AWriteThatFailsMidLineLeavesTheTraceAtItsLastWholeLine) {
  const auto path = trace::testing::scratch_dir() / "cut.jsonl";
  OneGpuRecorder r(path);
  const uintmax_t header_bytes = std::filesystem::file_size(path);
  bool failed = false;
  {
    // 1000 bytes past the header: no line boundary falls on it (an instant's line is ~70 bytes).
    const dpscope::testing::FileSizeLimit limit(header_bytes + 1000);
    for (int step = 0; step < 500 && !failed; ++step) {
      for (int i = 0; i < 100; ++i) r.recorder->instant(r.gpu, step * 100 + i, GradReady{.param = 1});
      try {
        r.recorder->flush_soon();
      } catch (const Error&) {
        failed = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ASSERT_TRUE(failed);
  try {
    r.recorder->close();
  } catch (const Error&) {
    // said again; the file is what this test reads
  }
  const std::string text = trace::testing::read_file(path);
  ASSERT_GT(text.size(), header_bytes);
  EXPECT_LE(text.size(), header_bytes + 1000);
  EXPECT_EQ(text.back(), '\n') << "the file ends mid-line";
  const trace::TraceData data = trace::read_trace(path, {.strict = true});
  EXPECT_TRUE(data.problems.empty());
  EXPECT_EQ(data.events.size(), static_cast<size_t>(std::count(text.begin(), text.end(), '\n') - 1));
  EXPECT_GT(data.events.size(), 0u);
}

}  // namespace
}  // namespace dpscope
