// dpscope-viz on the command line without a display: usage errors exit 2 with one line, bad
// traces in headless mode exit 1 with one line naming the file, the line and the reason (before
// any window is opened), and --bench-frames prints its table — also on the benchmark's trace, which
// bench/viz_trace_gen writes with the runtime in timing-only mode.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/trace_tools/reader.hpp"

#include "replay/replay_model.hpp"
#include "run_command.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

using testing::quoted;
using testing::run_command;
using testing::scratch_dir;
using testing::write_text;

const std::string kViz = DPSCOPE_VIZ;
const char* kHeader =
    R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{},"devices":[{"id":0,"name":"sim:0","kind":"sim","hardware":"x","memory_bytes":0,"peak_flops":0,"mem_bandwidth":0}],"links":[],"params":[],"buckets":[]})";
const char* kSpan =
    R"({"type":"span","ts":0,"rank":0,"dev":0,"step":0,"phase":"forward","name":"a","cat":"compute","stream":"compute","dur":10})";

size_t line_count(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// A headless run on `text` must fail with exit 1 and one line containing `expected`.
void expect_trace_error(const std::string& name, const std::string& text, const std::string& expected) {
  const auto dir = scratch_dir();
  const auto trace = dir / name;
  write_text(trace, text);
  // No DISPLAY: the trace is checked before any window is needed.
  const auto r = run_command("env -u DISPLAY " + kViz + " " + quoted(trace.string()) + " --screenshot " +
                             quoted((dir / "out.png").string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_EQ(r.output.rfind("dpscope-viz: error: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out.png"));
}

// --lesson: an unknown lesson or knob, or a knob without a lesson, is a usage error (exit 2, one line)
// before anything runs.
TEST(VizCli, LessonModeUsageErrors) {
  const std::string lessons = quoted(std::string(DPSCOPE_SOURCE_DIR) + "/lessons");
  const struct {
    std::string args;
    std::string expected;
  } cases[] = {
      {"--lesson 99 --lessons-dir " + lessons, "no lesson '99' in"},
      {"--lesson 5 --lessons-dir " + lessons + " --knob devices=99", "--devices must be"},
      {"--lesson 5 --lessons-dir " + lessons + " --knob nope=1", "nope"},
      {"--lesson 5 --lessons-dir " + lessons + " --knob devices", "expected FLAG=VALUE"},
      {"--knob devices=2 x.jsonl", "--knob needs --lesson"},
      {"--lesson 5 a.jsonl b.jsonl", "--lesson takes one trace file"},
  };
  for (const auto& c : cases) {
    const auto r = run_command("env -u DISPLAY " + kViz + " " + c.args + " --screenshot " +
                               quoted((scratch_dir() / "out.png").string()));
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST(VizCli, CompareUsageErrors) {
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--compare a.jsonl", "--compare takes 2 to 4 trace files, got 1"},
           {"--compare a b c d e", "--compare takes 2 to 4 trace files, got 5"},
           {"--compare a.jsonl b.jsonl --lesson 5", "--compare and --lesson cannot be combined"},
           {"a.jsonl b.jsonl --screenshot x.png", "headless modes take one trace file"}}) {
    const auto r = run_command("env -u DISPLAY " + kViz + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << args << "\n" << r.output;
  }
}

TEST(VizCli, StageBoxesNeedAScreenshot) {
  const auto r = run_command("env -u DISPLAY " + kViz + " x.jsonl --stage-boxes " +
                             quoted((scratch_dir() / "boxes.jsonl").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--stage-boxes needs --screenshot"), std::string::npos) << r.output;
}

TEST(VizCli, MalformedTraceNamesTheLineAndReason) {
  expect_trace_error("bad.jsonl", std::string(kHeader) + "\n" + kSpan + "\n{\"type\":\"span\",\"ts\":oops}\n",
                     "bad.jsonl:3:");
}

TEST(VizCli, TruncatedLastLineIsToleratedHeadless) {
  // Without --follow too: the complete lines are shown, the cut one is left out.
  const auto dir = scratch_dir();
  const auto trace = dir / "cut.jsonl";
  write_text(trace, std::string(kHeader) + "\n" + kSpan + "\n{\"type\":\"sp");
  const auto r = run_command("env -u DISPLAY " + kViz + " " + quoted(trace.string()) + " --bench-frames 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
}

// A directory is read as process ranks' rank-K.jsonl files: one that cannot be merged is one line.
TEST(VizCli, ADirectoryThatIsNoRunIsAnError) {
  const auto dir = scratch_dir();
  const auto run = dir / "run";
  std::filesystem::create_directories(run);
  auto expect_error = [&](const std::string& expected) {
    const auto r = run_command("env -u DISPLAY " + kViz + " " + quoted(run.string()) + " --screenshot " +
                               quoted((dir / "out.png").string()));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output, "dpscope-viz: error: " + expected + "\n");
    EXPECT_FALSE(std::filesystem::exists(dir / "out.png"));
  };
  expect_error(
      fmt::format("'{}' has no rank-K.jsonl files (the per-rank traces of mpirun -np N dpscope train "
                  "--backend mpi --trace DIR)",
                  run.string()));
  testing::write_rank_directory(run, 3, 1);
  std::filesystem::remove(run / "rank-1.jsonl");
  expect_error(fmt::format("'{}' has rank-2.jsonl but no rank-1.jsonl", run.string()));
}

TEST(VizCli, EmptyTraceIsAnError) { expect_trace_error("empty.jsonl", "", "empty.jsonl"); }

TEST(VizCli, NewerVersionIsRefused) {
  std::string header = kHeader;
  header.replace(header.find("\"1.0\""), 5, "\"9.1\"");
  expect_trace_error("future.jsonl", header + "\n" + kSpan + "\n", "9.1");
}

TEST(VizCli, NotATraceAtAll) {
  expect_trace_error("photo.jsonl", "\x89PNG\r\n\x1a\n binary", "photo.jsonl:1:");
}

TEST(VizCli, UsageErrorsExitTwoWithOneLine) {
  const auto dir = scratch_dir();
  const auto trace = dir / "ddp.jsonl";
  testing::write_ddp_trace(trace, 2, 2);
  const std::string t = quoted(trace.string());
  const std::string png = quoted((dir / "x.png").string());
  const std::pair<std::string, std::string> cases[] = {
      {t + " --screenshot " + png + " --seek 1.5", "--seek '1.5'"},
      {t + " --screenshot " + png + " --seek step:9", "the trace has steps 1..2"},
      {t + " --screenshot " + png + " --seek t:1s", "--seek t:1.000 s: the trace runs from"},
      {t + " --screenshot " + png + " --size 100", "--size '100'"},
      {t + " --screenshot " + png + " --zoom 5", "--zoom '5': no unit"},
      {t + " --zoom wide", "--zoom 'wide'"},
      {t + " --bench-frames 0", "--bench-frames"},
      {"--screenshot " + png, "--screenshot needs a trace file"},
      {t + " --no-such-flag", "no-such-flag"},
      {t + " --screenshot " + png + " --bench-frames 3", "cannot be combined"},
      {t + " --screenshot " + png + " --seek step:0", "steps count from 1"},
      {t + " --screenshot " + png + " --seek chapter:2", "--seek chapter:2 needs --lesson"},
      {t + " --screenshot " + png + " --seek chapter:0", "the chapter is not a positive integer"},
      {t + " --stage-only --bench-frames 3", "--stage-only and --bench-frames cannot be combined"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_command("env -u DISPLAY " + kViz + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << args << "\n" << r.output;
  }
}

TEST(VizCli, ScreenshotWithoutADisplaySaysHowToGetOne) {
  const auto dir = scratch_dir();
  const auto trace = dir / "ddp.jsonl";
  testing::write_ddp_trace(trace, 2, 1);
  const auto r = run_command("env -u DISPLAY -u WAYLAND_DISPLAY " + kViz + " " + quoted(trace.string()) +
                             " --screenshot " + quoted((dir / "x.png").string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_NE(r.output.find("xvfb-run"), std::string::npos) << r.output;
}

TEST(VizCli, BenchFramesPrintsLoadAndFrameTimes) {
  const auto dir = scratch_dir();
  const auto trace = dir / "ddp.jsonl";
  testing::write_ddp_trace(trace, 4, 3);
  const auto r = run_command("env -u DISPLAY " + kViz + " " + quoted(trace.string()) +
                             " --bench-frames 5 --size 1280x720");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* row : {"load ", "full zoom-out", "zoomed in", "playing", "mean ms", "p95 ms"})
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
}

// --bench-knobs: a row per knob of the lesson (lesson 5: GPUs and preset), each change timed from the
// run to the loaded trace, and the way back to the default, whose runs the viewer has made.
TEST(VizCli, BenchKnobsTimesEachKnobChangeOfTheLesson) {
  const std::string lessons = quoted(std::string(DPSCOPE_SOURCE_DIR) + "/lessons");
  const auto r =
      run_command("env -u DISPLAY " + kViz + " --lesson 5 --lessons-dir " + lessons + " --bench-knobs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* row :
       {"knob benchmark: lesson 05-ring-allreduce (2 knobs, 1 round)", "--devices      4 -> 5",
        "--preset       h100-sxm -> a100-sxm", "back s", "slowest change to a new value: "})
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("slowest change to a new value: ([0-9.]+) s")));
  EXPECT_GT(std::stod(m[1]), 0.0);
}

TEST(VizCli, BenchKnobsUsageErrors) {
  const std::string lessons = quoted(std::string(DPSCOPE_SOURCE_DIR) + "/lessons");
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--bench-knobs 2", "--bench-knobs needs --lesson"},
           {"--lesson 5 --lessons-dir " + lessons + " --bench-knobs 0", "--bench-knobs"},
           {"--lesson 5 --lessons-dir " + lessons + " x.jsonl --bench-knobs 2",
            "--bench-knobs runs the lesson itself: it takes no trace, --screenshot or --bench-frames"},
           {"--lesson 99 --lessons-dir " + lessons + " --bench-knobs 2", "no lesson '99' in"}}) {
    const auto r = run_command("env -u DISPLAY " + kViz + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_EQ(line_count(r.output), 1u) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << args << "\n" << r.output;
  }
}

TEST(VizCli, BenchmarkTraceIsTheRuntimesTimingOnlyDdpAndBenchFramesRunsOnIt) {
  const auto dir = scratch_dir();
  const auto trace = dir / "bench.jsonl";
  const auto gen =
      run_command(std::string(DPSCOPE_VIZ_TRACE_GEN) + " --devices 2 --layers 2 --width 16 --batch 3 " +
                  "--events 3000 --out " + quoted(trace.string()));
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_EQ(line_count(gen.output), 1u) << gen.output;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(
      gen.output, match, std::regex(R"((\d+) events, (\d+) steps of (\d+) events, 2 ranks, model 16-16-16)")))
      << gen.output;
  const uint64_t events = std::stoull(match[1]);
  const int64_t steps = std::stoll(match[2]);
  const uint64_t per_step = std::stoull(match[3]);
  // The fewest steps that reach the target.
  EXPECT_GE(events, 3000u);
  EXPECT_LT(events - per_step, 3000u);

  const trace::TraceData data = trace::read_trace(trace, {.strict = true});
  EXPECT_TRUE(data.problems.empty());
  EXPECT_EQ(data.events.size(), events);
  EXPECT_NE(data.header.run_json.find(R"("timing_only":true)"), std::string::npos) << data.header.run_json;
  const ReplayModel m(data);
  EXPECT_EQ(m.first_step(), 0);
  EXPECT_EQ(m.last_step(), steps - 1);
  // Meta tensors carry no numbers: no gradient values. The sampler's rows are real: rank r of 2
  // reads rows s*6 + r, s*6 + r + 2, s*6 + r + 4 in step s (3 per rank, no shuffle).
  size_t samples = 0;
  for (const trace::Event& e : data.events) {
    EXPECT_NE(e.type, trace::EventType::kValues);
    if (e.type != trace::EventType::kSamples) continue;
    ++samples;
    const std::vector<int64_t> expected = {e.step * 6 + e.rank, e.step * 6 + e.rank + 2,
                                           e.step * 6 + e.rank + 4};
    EXPECT_EQ(data.samples[e.payload].indices, expected) << "step " << e.step << " rank " << e.rank;
  }
  EXPECT_EQ(samples, static_cast<size_t>(2 * steps));

  const auto r = run_command("env -u DISPLAY " + kViz + " " + quoted(trace.string()) + " --bench-frames 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(fmt::format("events {}", events)), std::string::npos) << r.output;
}

TEST(VizCli, HelpListsTheModes) {
  const auto r = run_command(kViz + " --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--follow", "--present", "--screenshot", "--seek", "--zoom", "--size", "--bench-frames"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace dpscope::viz
