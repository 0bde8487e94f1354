// The recorder's exact text: the JSON helpers it writes with (json_text.hpp) and whole event lines,
// byte for byte as docs/trace-format.md shows them (the reader tests check meaning; these check
// that a faster writer still writes the same bytes).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "dpscope/core/device.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_format/json_text.hpp"
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
  recorder->close();
  const std::vector<std::string> lines = lines_of(dir / "t.jsonl");
  ASSERT_EQ(lines.size(), 5u);
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
}

}  // namespace
}  // namespace dpscope
