// Headless screenshots (run under `xvfb-run`, see CMakeLists.txt): DP and DDP traces written by
// `dpscope train` (trace_fixtures.hpp) at several positions give non-blank frames, different frames at
// different positions, and identical frames for the same input; lesson mode draws its panel; a
// torch.profiler run imported by `dpscope trace import` is drawn as one run; the
// ring's chunk colours on a card follow the schedule, counted in pixels. The PNGs stay in the build
// tree (test-output/visualizer/...) to look at.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dpscope/trace_tools/reader.hpp"
#include "png_image.hpp"
#include "replay/compare.hpp"
#include "replay/replay_model.hpp"
#include "run_command.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

using testing::quoted;
using testing::run_command;
using testing::scratch_dir;

const std::string kViz = DPSCOPE_VIZ;

size_t distinct_colours(const Image& img) {
  std::set<uint32_t> colours;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3)
    colours.insert((uint32_t{img.rgb[i]} << 16) | (uint32_t{img.rgb[i + 1]} << 8) | img.rgb[i + 2]);
  return colours.size();
}

size_t differing_pixels(const Image& a, const Image& b) {
  size_t n = 0;
  for (size_t i = 0; i + 2 < a.rgb.size() && i + 2 < b.rgb.size(); i += 3)
    n += a.rgb[i] != b.rgb[i] || a.rgb[i + 1] != b.rgb[i + 1] || a.rgb[i + 2] != b.rgb[i + 2];
  return n;
}

class Screenshots : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* display = std::getenv("DISPLAY");
    if (display == nullptr || *display == '\0')
      GTEST_SKIP() << "no DISPLAY: run this binary under xvfb-run -a";
    dir_ = scratch_dir();
  }
  Image shoot(const std::filesystem::path& trace, const std::string& name, const std::string& extra) {
    const auto png = dir_ / (name + ".png");
    const auto r = run_command(kViz + " " + quoted(trace.string()) + " --screenshot " + quoted(png.string()) +
                               " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(std::filesystem::exists(png)) << r.output;
    return load_png(png);
  }
  void expect_rich(const Image& img, int width, int height, const std::string& what) {
    EXPECT_EQ(img.width, width) << what;
    EXPECT_EQ(img.height, height) << what;
    // A blank or single-colour frame has a handful of colours; ours has text, cards and lanes.
    EXPECT_GT(distinct_colours(img), 200u) << what;
  }
  std::filesystem::path dir_;
};

TEST_F(Screenshots, DdpTraceAtSeveralPositions) {
  const auto trace = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(trace, 4, 3, 8);
  const Image start = shoot(trace, "ddp-start", "--seek 0 --size 1600x900");
  const Image step1 = shoot(trace, "ddp-step1", "--seek step:2 --size 1600x900");
  const Image mid = shoot(trace, "ddp-0.55", "--seek 0.55 --size 1600x900");
  const Image event = shoot(trace, "ddp-event200", "--seek event:200 --size 1600x900");
  for (const auto* img : {&start, &step1, &mid, &event}) expect_rich(*img, 1600, 900, "ddp");
  // The playhead, the cards' activity and the chips move: frames differ by many pixels.
  EXPECT_GT(differing_pixels(start, step1), 2000u);
  EXPECT_GT(differing_pixels(step1, mid), 2000u);
  EXPECT_GT(differing_pixels(mid, event), 2000u);
}

TEST_F(Screenshots, DpTraceAtSeveralPositions) {
  const auto trace = dir_ / "dp.jsonl";
  testing::write_dp_trace(trace, 4, 3, 10);
  const Image a = shoot(trace, "dp-0.1", "--seek 0.1 --size 1600x900");
  const Image b = shoot(trace, "dp-step1", "--seek step:2 --size 1600x900");
  const Image c = shoot(trace, "dp-0.8", "--seek 0.8 --size 1600x900");
  for (const auto* img : {&a, &b, &c}) expect_rich(*img, 1600, 900, "dp");
  EXPECT_GT(differing_pixels(a, b), 2000u);
  EXPECT_GT(differing_pixels(b, c), 2000u);
}

TEST_F(Screenshots, T4TraceShowsThePcieHostTree) {
  // Made by the runtime (`dpscope bench --preset t4`): the stage draws the two PCIe switches
  // between the GPUs and the host, and no GPU-GPU link.
  const auto trace = dir_ / "t4.jsonl";
  testing::write_t4_bench_trace(trace);
  const Image img = shoot(trace, "t4-bench", "--seek 0.5 --size 1600x900");
  expect_rich(img, 1600, 900, "t4");
  const Image later = shoot(trace, "t4-bench-0.9", "--seek 0.9 --size 1600x900");
  EXPECT_GT(differing_pixels(img, later), 500u);
}

TEST_F(Screenshots, SameInputGivesTheSamePixels) {
  const auto trace = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(trace, 4, 2, 8);
  const Image a = shoot(trace, "same-a", "--seek 0.4 --size 1280x720");
  const Image b = shoot(trace, "same-b", "--seek 0.4 --size 1280x720");
  ASSERT_EQ(a.rgb.size(), b.rgb.size());
  EXPECT_EQ(differing_pixels(a, b), 0u);
}

TEST_F(Screenshots, PresentationModeAndOtherSizes) {
  const auto trace = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(trace, 8, 2, 8);
  expect_rich(shoot(trace, "ddp8-present", "--present --seek 0.3 --size 1920x1080"), 1920, 1080, "present");
  expect_rich(shoot(trace, "ddp8-small", "--seek 0.3 --size 800x600"), 800, 600, "small");
  const auto single = dir_ / "single.jsonl";
  testing::write_single_trace(single, 2);
  expect_rich(shoot(single, "single", "--seek 0.5 --size 1280x720"), 1280, 720, "single");
}

TEST_F(Screenshots, LessonModeAddsTheLessonPanelAndRunsTheLessonItself) {
  const std::string lessons = std::string(DPSCOPE_SOURCE_DIR) + "/lessons";
  // No trace given: dpscope-viz runs the lesson's scenario through the dpscope beside it.
  const auto png = dir_ / "lesson5.png";
  const auto r = run_command(kViz + " --lesson 5 --lessons-dir " + quoted(lessons) + " --screenshot " +
                             quoted(png.string()) + " --seek 0.3 --size 1600x900");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Image lesson = load_png(png);
  expect_rich(lesson, 1600, 900, "lesson 5");
  // The same trace without --lesson: the right column differs (the lesson panel replaces Plots).
  const auto run = run_command(std::string(DPSCOPE_CLI) + " lesson run 5 --lessons-dir " + quoted(lessons) +
                               " --no-viz --out " + quoted(dir_.string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto trace = dir_ / "05-ring-allreduce.trace.jsonl";
  const Image plain = shoot(trace, "lesson5-plain", "--seek 0.3 --size 1600x900");
  const Image given = shoot(trace, "lesson5-given",
                            "--lesson 5 --lessons-dir " + quoted(lessons) + " --seek 0.3 --size 1600x900");
  EXPECT_EQ(differing_pixels(lesson, given), 0u) << "the lesson's own run draws like the one given";
  size_t right_column = 0;
  for (int y = 30; y < 400; ++y)
    for (int x = 1100; x < 1600; ++x) {
      const size_t i = (static_cast<size_t>(y) * 1600 + static_cast<size_t>(x)) * 3;
      right_column += plain.rgb[i] != given.rgb[i] || plain.rgb[i + 1] != given.rgb[i + 1];
    }
  EXPECT_GT(right_column, 5000u);

  // Presentation mode at a chapter with a question: the question is there, large, in the caption
  // column on the right, in the classroom palette's question colour (pure yellow).
  const Image present =
      shoot(trace, "lesson5-present-chapter1",
            "--lesson 5 --lessons-dir " + quoted(lessons) + " --present --seek chapter:1 --size 1280x720");
  size_t question = 0;
  for (int y = 0; y < 720; ++y)
    for (int x = 1280 * 2 / 3; x < 1280; ++x) {
      const size_t i = (static_cast<size_t>(y) * 1280 + static_cast<size_t>(x)) * 3;
      question += present.rgb[i] == 255 && present.rgb[i + 1] == 255 && present.rgb[i + 2] == 0 ? 1 : 0;
    }
  EXPECT_GT(question, 500u) << "the question's text, in the caption column";
  // A chapter the lesson does not have is a usage error naming how many it has.
  const auto bad =
      run_command(kViz + " " + quoted(trace.string()) + " --lesson 5 --lessons-dir " + quoted(lessons) +
                  " --seek chapter:99 --screenshot " + quoted((dir_ / "no.png").string()));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("dpscope-viz: error: --seek chapter:99: lesson 05-ring-allreduce has "),
            std::string::npos)
      << bad.output;
}

TEST_F(Screenshots, CompareDrawsTheRunsSideBySide) {
  testing::write_single_trace(dir_ / "single.jsonl", 2);
  testing::write_dp_trace(dir_ / "dp.jsonl", 4, 2, 16);
  testing::write_ddp_trace(dir_ / "ddp.jsonl", 4, 2, 4);
  const auto png = dir_ / "compare.png";
  const auto r =
      run_command(kViz + " --compare " + quoted((dir_ / "single.jsonl").string()) + " " +
                  quoted((dir_ / "dp.jsonl").string()) + " " + quoted((dir_ / "ddp.jsonl").string()) +
                  " --screenshot " + quoted(png.string()) + " --seek 0.5 --size 1600x900");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Image compare = load_png(png);
  expect_rich(compare, 1600, 900, "compare");
  const Image stage = shoot(dir_ / "ddp.jsonl", "ddp-alone", "--seek 0.5 --size 1600x900");
  EXPECT_GT(differing_pixels(compare, stage), 50000u) << "the comparison replaces the stage";
}

// dpscope-viz DIR: a directory of process ranks' files is drawn as one run, a card per process
// named by rank (cpu:0, cpu:1, ...), in rank order.
TEST_F(Screenshots, ADirectoryOfRankFilesIsDrawnAsOneRun) {
  const auto run = dir_ / "mpi-run";
  testing::write_rank_directory(run, 4, 3);
  const auto png = dir_ / "mpi-run.png";
  const auto boxes = dir_ / "mpi-run.boxes.jsonl";
  const auto r = run_command(kViz + " " + quoted(run.string()) + " --screenshot " + quoted(png.string()) +
                             " --seek 0.4 --size 1600x900 --stage-boxes " + quoted(boxes.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_rich(load_png(png), 1600, 900, "mpi-run");
  std::istringstream lines(testing::read_text(boxes));
  std::vector<std::string> devices;
  for (std::string line; std::getline(lines, line);) devices.push_back(nlohmann::json::parse(line)["device"]);
  EXPECT_EQ(devices, (std::vector<std::string>{"cpu:0", "cpu:1", "cpu:2", "cpu:3"}));
}

// `dpscope trace import` of the committed torch.profiler traces (tests/data/torch-profiler, a real
// two-rank gloo DDP run) is drawn as one run: a card per process, and a rich frame at each step.
TEST_F(Screenshots, AnImportedTorchProfilerRunIsDrawnAsOneRun) {
  const auto run = dir_ / "torch-profiler";
  const std::filesystem::path fixtures =
      std::filesystem::path(DPSCOPE_TEST_DATA_DIR) / "torch-profiler" / "ddp-gloo";
  const auto imported = run_command(std::string(DPSCOPE_CLI) + " trace import " + quoted(fixtures.string()) +
                                    " " + quoted(run.string()));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  const auto png = dir_ / "torch-profiler-step1.png";
  const auto boxes = dir_ / "torch-profiler.boxes.jsonl";
  const auto r = run_command(kViz + " " + quoted(run.string()) + " --screenshot " + quoted(png.string()) +
                             " --seek step:1 --size 1600x900 --stage-boxes " + quoted(boxes.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Image step1 = load_png(png);
  expect_rich(step1, 1600, 900, "torch-profiler step 1");
  std::istringstream lines(testing::read_text(boxes));
  std::vector<std::string> devices;
  for (std::string line; std::getline(lines, line);) devices.push_back(nlohmann::json::parse(line)["device"]);
  EXPECT_EQ(devices, (std::vector<std::string>{"cpu:0", "cpu:1"}));
  const Image step2 = shoot(run, "torch-profiler-step2", "--seek step:2 --size 1600x900");
  expect_rich(step2, 1600, 900, "torch-profiler step 2");
  EXPECT_GT(differing_pixels(step1, step2), 2000u) << "the playhead and the cards move between steps";
}

// The palette's colour of `rank` (ui/palette.cpp kRankColors), so the test can find a rank's
// stripes among the pixels.
std::array<unsigned char, 3> rank_rgb(int rank) {
  static constexpr std::array<std::array<unsigned char, 3>, 4> kFirstRanks = {
      {{119, 170, 221}, {238, 102, 119}, {170, 170, 0}, {153, 221, 255}}};
  return kFirstRanks[static_cast<size_t>(rank)];
}

// Pixels of exactly `rgb` inside the box the stage drew for `device` (--stage-boxes output).
size_t pixels_of(const Image& img, const std::string& boxes_jsonl, const std::string& device,
                 std::array<unsigned char, 3> rgb) {
  std::istringstream lines(boxes_jsonl);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json b = nlohmann::json::parse(line);
    if (b["device"] != device) continue;
    size_t n = 0;
    for (int y = b["y0"].get<int>(); y < b["y1"].get<int>(); ++y)
      for (int x = b["x0"].get<int>(); x < b["x1"].get<int>(); ++x) {
        const size_t i =
            (static_cast<size_t>(y) * static_cast<size_t>(img.width) + static_cast<size_t>(x)) * 3;
        n += img.rgb[i] == rgb[0] && img.rgb[i + 1] == rgb[1] && img.rgb[i + 2] == rgb[2];
      }
    return n;
  }
  ADD_FAILURE() << "no box for " << device;
  return 0;
}

// The ring at chunk level, in pixels: on GPU 0's card the stripes of the other ranks' colours are
// absent as the all-reduce starts, present once reduce-scatter is done (GPU 0 then holds partial
// sums and one complete chunk), and at the end fill all four chunks equally.
TEST_F(Screenshots, RingChunkColoursFollowTheSchedule) {
  const std::string lessons = std::string(DPSCOPE_SOURCE_DIR) + "/lessons";
  const auto run = run_command(std::string(DPSCOPE_CLI) + " lesson run 5 --lessons-dir " + quoted(lessons) +
                               " --no-viz --out " + quoted(dir_.string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto trace = dir_ / "05-ring-allreduce.trace.jsonl";
  const trace::TraceData data = trace::read_trace(trace);
  const ReplayModel model(data);
  ASSERT_FALSE(model.collectives().empty());
  const Collective& c = model.collectives().front();
  int64_t scattered = 0;
  for (uint32_t e : c.transfers)
    if (data.str(model.event(e).name).find("reduce-scatter") != std::string_view::npos)
      scattered = std::max(scattered, model.event(e).end_ns());
  auto at = [&](const std::string& name, int64_t t_ns, std::array<size_t, 4>& counts) {
    const auto boxes = dir_ / (name + ".boxes.jsonl");
    const Image img =
        shoot(trace, name,
              fmt::format("--seek t:{}ns --size 1600x900 --stage-boxes {}", t_ns, quoted(boxes.string())));
    const std::string text = testing::read_text(boxes);
    for (int r = 0; r < 4; ++r) counts[static_cast<size_t>(r)] = pixels_of(img, text, "sim:0", rank_rgb(r));
  };
  std::array<size_t, 4> start{}, middle{}, end{};
  at("ring-start", model.event(c.transfers.front()).ts_ns, start);
  at("ring-scattered", scattered, middle);
  at("ring-end", c.end_ns, end);
  EXPECT_GT(start[0], 100u) << "GPU 0's own contribution, in every chunk";
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(start[static_cast<size_t>(r)], 0u) << "rank " << r << " before any transfer arrived";
    EXPECT_GT(middle[static_cast<size_t>(r)], 0u) << "rank " << r << " after reduce-scatter";
    EXPECT_GT(end[static_cast<size_t>(r)], middle[static_cast<size_t>(r)]) << "rank " << r << " at the end";
  }
  // At the end every chunk holds every rank once: stripes of one width, so the inner stripes
  // (ranks 1 and 2) cover the same area; the last one loses a column to the box's outline.
  EXPECT_NEAR(static_cast<double>(end[2]), static_cast<double>(end[1]), 0.05 * static_cast<double>(end[1]));
  EXPECT_GT(static_cast<double>(end[3]), 0.7 * static_cast<double>(end[1]));
}

// The height in pixels of the first line of pure white text (the classroom palette's text colour)
// in the left part of the box the stage drew for `device`: its title, "GPU 0".
int title_text_height(const Image& img, const std::string& boxes_jsonl, const std::string& device) {
  std::istringstream lines(boxes_jsonl);
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json b = nlohmann::json::parse(line);
    if (b["device"] != device) continue;
    const int x0 = b["x0"].get<int>(), x1 = b["x1"].get<int>();
    const int y0 = b["y0"].get<int>(), y1 = b["y1"].get<int>();
    int first = -1;
    for (int y = y0 + 6; y < y0 + (y1 - y0) / 3; ++y) {
      bool white = false;
      for (int x = x0 + 8; x < x0 + (x1 - x0) * 2 / 5 && !white; ++x) {
        const size_t i =
            (static_cast<size_t>(y) * static_cast<size_t>(img.width) + static_cast<size_t>(x)) * 3;
        white = img.rgb[i] == 255 && img.rgb[i + 1] == 255 && img.rgb[i + 2] == 255;
      }
      if (white && first < 0) first = y;
      if (!white && first >= 0) return y - first;
    }
    return 0;
  }
  ADD_FAILURE() << "no box for " << device;
  return 0;
}

// Presentation mode reads from the back of the room: a slide (--present --stage-only) at 1920x1080
// has card text at least 1.4x as tall, in pixels, as at 1280x720; --compare --present shows the
// comparison, not one run's stage.
TEST_F(Screenshots, PresentationTextGrowsWithTheWindowAndKeepsTheComparison) {
  const auto trace = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(trace, 4, 2, 8);
  int heights[2] = {0, 0};
  int i = 0;
  for (const char* size : {"1280x720", "1920x1080"}) {
    const auto boxes = dir_ / fmt::format("slide-{}.boxes.jsonl", size);
    const Image img = shoot(trace, fmt::format("slide-{}", size),
                            fmt::format("--present --stage-only --seek 0.3 --size {} --stage-boxes {}", size,
                                        quoted(boxes.string())));
    heights[i++] = title_text_height(img, testing::read_text(boxes), "sim:0");
  }
  EXPECT_GE(heights[0], 10) << "the title's text at 1280x720";
  EXPECT_GE(heights[1], heights[0] * 1.4)
      << heights[0] << " px at 1280x720, " << heights[1] << " px at 1920x1080";

  testing::write_single_trace(dir_ / "single.jsonl", 2);
  const auto png = dir_ / "compare-present.png";
  const auto r = run_command(kViz + " --compare " + quoted((dir_ / "single.jsonl").string()) + " " +
                             quoted(trace.string()) + " --present --screenshot " + quoted(png.string()) +
                             " --seek 0.3 --size 1280x720");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Image compare = load_png(png);
  expect_rich(compare, 1280, 720, "compare in present mode");
  const Image stage = shoot(trace, "present-alone", "--present --seek 0.3 --size 1280x720");
  EXPECT_GT(differing_pixels(compare, stage), 50000u) << "the comparison replaces the stage in --present";
}

// Pixels of exactly `rgb` in the rectangle [x0, x1) x [y0, y1) of the image.
size_t pixels_in(const Image& img, int x0, int y0, int x1, int y1, std::array<unsigned char, 3> rgb) {
  size_t n = 0;
  for (int y = std::max(y0, 0); y < std::min(y1, img.height); ++y)
    for (int x = std::max(x0, 0); x < std::min(x1, img.width); ++x) {
      const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(img.width) + static_cast<size_t>(x)) * 3;
      n += img.rgb[i] == rgb[0] && img.rgb[i + 1] == rgb[1] && img.rgb[i + 2] == rgb[2];
    }
  return n;
}

// Lesson 13's mismatched collective in pixels (the stage alone, normal palette): while rank 0
// waits alone in its all-reduce its card is outlined in amber (the warning colour) and no banner
// shows; once it has stopped, while ranks 1-3 still finish their backward, an amber banner says so;
// only when every rank has stopped is the banner red ("Run failed").
TEST_F(Screenshots, AMismatchedCollectiveWaitsInAmberAndTheBannerTurnsRedOnlyWhenEveryRankStopped) {
  const auto trace = dir_ / "lone.jsonl";
  testing::write_failed_ddp_trace(trace, 4, "256-512-512-4", 16);
  const trace::TraceData data = trace::read_trace(trace);
  const ReplayModel model(data);
  int64_t wait_mid_ns = -1;
  for (const trace::Event& e : data.events)
    if (data.collective_error(e) && e.rank == 0) wait_mid_ns = e.ts_ns + e.dur_ns / 2;
  ASSERT_GE(wait_mid_ns, 0);
  const RunErrors& errors = model.run_errors();
  ASSERT_EQ(errors.marks.size(), 4u);
  ASSERT_LT(errors.marks.front().ts_ns, errors.marks.back().ts_ns);
  constexpr std::array<unsigned char, 3> kAmber = {255, 196, 70};  // Palette::normal().warning
  constexpr std::array<unsigned char, 3> kRed = {255, 95, 95};     // Palette::normal().error
  struct Counts {
    size_t card_amber = 0;
    size_t amber = 0;
    size_t red = 0;
  };
  auto at = [&](const std::string& name, int64_t t_ns) {
    const auto boxes = dir_ / (name + ".boxes.jsonl");
    const Image img = shoot(trace, name,
                            fmt::format("--stage-only --seek t:{}ns --size 1600x900 --stage-boxes {}", t_ns,
                                        quoted(boxes.string())));
    return Counts{pixels_of(img, testing::read_text(boxes), "sim:0", kAmber),
                  pixels_in(img, 0, 0, img.width, img.height, kAmber),
                  pixels_in(img, 0, 0, img.width, img.height, kRed)};
  };
  const Counts waiting = at("lone-waiting", wait_mid_ns);
  const Counts stopped =
      at("lone-rank0-stopped", (errors.marks.front().ts_ns + errors.marks.back().ts_ns) / 2);
  const Counts failed = at("lone-failed", errors.marks.back().ts_ns);
  EXPECT_GT(waiting.card_amber, 1000u) << "GPU 0's card, outlined in amber while it waits";
  EXPECT_EQ(waiting.red, 0u) << "no banner before any rank stopped";
  EXPECT_GT(stopped.amber, waiting.amber + 20000) << "the amber banner: rank 0 stopped, ranks 1-3 still run";
  EXPECT_EQ(stopped.red, 0u) << "the run has not failed yet";
  EXPECT_GT(failed.red, 20000u) << "the red banner: every rank stopped";
  EXPECT_LT(failed.amber, 1000u);
}

// A real PyTorch run recorded by dpscope_torch (tests/data/dpscope-torch/straggler: rank 1 sleeps
// 30 ms in every backward) gets the Diagnosis panel in the right column: its per-step bars are
// drawn in rank 1's colour, which nothing else there uses; a DataParallel trace has no panel and
// none of those pixels.
TEST_F(Screenshots, ARealStragglerRunShowsItsDiagnosis) {
  const auto run = std::filesystem::path(DPSCOPE_TEST_DATA_DIR) / "dpscope-torch" / "straggler";
  const Image img = shoot(run, "torch-straggler", "--seek step:3 --size 1280x720");
  expect_rich(img, 1280, 720, "torch straggler");
  const int right_x = 1280 - 1280 * 34 / 100 + 4;
  const size_t late = pixels_in(img, right_x, 0, 1280, 720 * 6 / 10, rank_rgb(1));
  EXPECT_GT(late, 1500u) << "rank 1's bars in the Diagnosis panel";
  expect_rich(shoot(run, "torch-straggler-present", "--seek step:3 --size 1920x1080 --present"), 1920, 1080,
              "torch straggler, presentation mode");
  const auto dp = dir_ / "dp.jsonl";
  testing::write_dp_trace(dp, 2, 2);
  const Image dp_img = shoot(dp, "dp-no-diagnosis", "--seek step:2 --size 1280x720");
  EXPECT_LT(pixels_in(dp_img, right_x, 0, 1280, 720 * 6 / 10, rank_rgb(1)), 50u);
}

}  // namespace
}  // namespace dpscope::viz

namespace dpscope::viz {
namespace {

// Pixels of exactly `rgb` in the columns [x0, x1) of `image`.
size_t count_color(const Image& image, int x0, int x1, std::array<uint8_t, 3> rgb) {
  size_t n = 0;
  for (int y = 0; y < image.height; ++y)
    for (int x = x0; x < x1; ++x) {
      const size_t i =
          (static_cast<size_t>(y) * static_cast<size_t>(image.width) + static_cast<size_t>(x)) * 3;
      n += image.rgb[i] == rgb[0] && image.rgb[i + 1] == rgb[1] && image.rgb[i + 2] == rgb[2] ? 1 : 0;
    }
  return n;
}

// A lesson's compare chapter: its runs side by side, each at its own moment (the chapter's trigger
// matched in that run); leaving the chapter returns to the single view. The model first: lesson 6's
// runs each hold their own all-reduce of the chapter's size, and lesson 8's run without set_epoch
// repeats every batch of the first epoch, the run with it none.
TEST_F(Screenshots, ACompareChapterShowsItsRunsSideBySideEachAtItsMoment) {
  const std::string lessons = std::string(DPSCOPE_SOURCE_DIR) + "/lessons";
  for (const char* id : {"6", "8"}) {
    const auto run = run_command(std::string(DPSCOPE_CLI) + " lesson run " + id + " --lessons-dir " +
                                 quoted(lessons) + " --no-viz --out " + quoted(dir_.string()));
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  for (const char* algo : {"ring", "tree", "naive"}) {
    const testing::LoadedTrace t =
        testing::load_trace(dir_ / fmt::format("06-ring-tree-naive.{}.trace.jsonl", algo));
    const RunMoment small = run_moment(*t.model, t.model->begin_ns());
    EXPECT_EQ(small.collective, fmt::format("all_reduce {} 4.00 KiB", algo));
    EXPECT_EQ(small.step, 0);
    EXPECT_GT(small.collective_ns, 0);
    EXPECT_EQ(small.messages, std::string(algo) == "ring"    ? 14
                              : std::string(algo) == "naive" ? 7
                                                             : 3)
        << algo << ": ring 2(N-1) on 8 GPUs, naive: rank 0 sends the sum to the 7 others";
    const RunMoment large = run_moment(*t.model, t.model->step_window(1).first);
    EXPECT_EQ(large.collective, fmt::format("all_reduce {} 64.00 MiB", algo));
    EXPECT_EQ(large.t1_ns - large.t0_ns, large.collective_ns) << "a bench size's step is its all-reduce";
  }
  const testing::LoadedTrace with = testing::load_trace(dir_ / "08-distributed-sampler.trace.jsonl");
  const testing::LoadedTrace without =
      testing::load_trace(dir_ / "08-distributed-sampler.no-set-epoch.trace.jsonl");
  const SampleRows a = sample_rows(*with.model, with.model->end_ns());
  const SampleRows b = sample_rows(*without.model, without.model->end_ns());
  ASSERT_EQ(b.ranks.size(), 2u);
  EXPECT_EQ(b.epochs, 2);
  EXPECT_EQ(b.repeated, 4) << "both ranks' two batches of epoch 2";
  EXPECT_TRUE(b.ranks[0].batches[2].repeats);
  EXPECT_FALSE(b.ranks[0].batches[0].repeats);
  EXPECT_EQ(a.repeated, 0);
  EXPECT_EQ(sample_rows(*without.model, without.model->step_window(2).first - 1).repeated, 0)
      << "before epoch 2, nothing repeats yet";

  // Lesson 6's first chapter in presentation mode at 1280x720: three run columns, each with its
  // all-reduce bar in the communication colour, left of the caption column.
  const auto l6 = dir_ / "06-ring-tree-naive.trace.jsonl";
  const std::string lesson6 = "--lesson 6 --lessons-dir " + quoted(lessons);
  for (const char* size : {"1280x720", "1920x1080"}) {
    const Image present =
        shoot(l6, fmt::format("l6-present-{}", size), lesson6 + " --present --seek chapter:1 --size " + size);
    // The bars' row: count the runs of the comm colour across it.
    const Image plain =
        shoot(l6, fmt::format("l6-plain-{}", size), "--present --seek t:0ns --size " + std::string(size));
    const int stage_w = present.width * 2 / 3;
    int best = 0;
    for (int y = 0; y < present.height; ++y) {
      int runs = 0;
      bool in = false;
      for (int x = 0; x < stage_w; ++x) {
        const size_t i =
            (static_cast<size_t>(y) * static_cast<size_t>(present.width) + static_cast<size_t>(x)) * 3;
        const bool comm = present.rgb[i] > 200 && present.rgb[i + 1] > 80 && present.rgb[i + 1] < 160 &&
                          present.rgb[i + 2] < 60;
        runs += comm && !in ? 1 : 0;
        in = comm;
      }
      best = std::max(best, runs);
    }
    EXPECT_EQ(best, 3) << size << ": one bar per run, side by side";
    EXPECT_GT(differing_pixels(present, plain), 50000u) << size;
  }
  // Leaving the compare chapters returns to the stage: lesson 8's chapter 2 (the forward pass of
  // rank 1's first step) draws the stage as dpscope-viz without a lesson does at that moment.
  const auto l8 = dir_ / "08-distributed-sampler.trace.jsonl";
  int64_t chapter2_ns = -1;
  for (const trace::Event& e : with.data->events)
    if (e.rank == 1 && e.step == 0 && e.phase == Phase::kForward &&
        (chapter2_ns < 0 || e.ts_ns < chapter2_ns))
      chapter2_ns = e.ts_ns;
  const Image stage = shoot(
      l8, "l8-chapter2", "--lesson 8 --lessons-dir " + quoted(lessons) + " --seek chapter:2 --size 1280x720");
  const Image plain8 = shoot(l8, "l8-plain", fmt::format("--seek t:{}ns --size 1280x720", chapter2_ns));
  size_t stage_diff = 0;
  for (int y = 30; y < 400; ++y)
    for (int x = 0; x < 800; ++x) {
      const size_t i = (static_cast<size_t>(y) * 1280 + static_cast<size_t>(x)) * 3;
      stage_diff += stage.rgb[i] != plain8.rgb[i] || stage.rgb[i + 1] != plain8.rgb[i + 1];
    }
  EXPECT_EQ(stage_diff, 0u) << "outside a compare chapter, the stage";

  // Lesson 8's last chapter: the run without set_epoch outlines its repeated batches in the warning
  // colour (the classroom palette's gold); the run with it has none.
  const Image l8present =
      shoot(l8, "l8-present",
            "--lesson 8 --lessons-dir " + quoted(lessons) + " --present --seek chapter:4 --size 1280x720");
  const int half = l8present.width / 3;
  EXPECT_EQ(count_color(l8present, 0, half, {255, 215, 0}), 0u) << "the run with set_epoch repeats nothing";
  EXPECT_GT(count_color(l8present, half, l8present.width * 2 / 3, {255, 215, 0}), 400u)
      << "the no-set-epoch run's repeated batches, outlined";
}

// The lesson panel says which comparison trace cannot be read, and why (it used to show the text as
// written and say nothing).
TEST_F(Screenshots, ALessonSaysWhichComparisonTraceItCannotRead) {
  const std::string lessons = std::string(DPSCOPE_SOURCE_DIR) + "/lessons";
  const auto run = run_command(std::string(DPSCOPE_CLI) + " lesson run 6 --lessons-dir " + quoted(lessons) +
                               " --no-viz --out " + quoted(dir_.string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto l6 = dir_ / "06-ring-tree-naive.trace.jsonl";
  const std::string args =
      "--lesson 6 --lessons-dir " + quoted(lessons) + " --seek chapter:1 --size 1280x720";
  const Image good = shoot(l6, "l6-good", args);
  const int right = good.width * 2 / 3;
  const std::array<uint8_t, 3> warning = {255, 196, 70};
  EXPECT_EQ(count_color(good, right, good.width, warning), 0u);
  std::filesystem::remove(dir_ / "06-ring-tree-naive.tree.trace.jsonl");
  testing::write_text(dir_ / "06-ring-tree-naive.naive.trace.jsonl", "{\"type\":\"header\", broken\n");
  const Image bad = shoot(l6, "l6-bad", args);
  EXPECT_GT(count_color(bad, right, bad.width, warning), 10u) << "the panel's lines, in the warning colour";
  EXPECT_GT(count_color(bad, 0, right, warning), 10u) << "and each empty column says why";
}

}  // namespace
}  // namespace dpscope::viz
