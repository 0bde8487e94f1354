// Headless screenshots of the node-level stage (lesson 12): a `train --timing-only` run of 1,024
// H100s (128 nodes of 8) at the first moment of a hierarchical all-reduce, where only phase 1
// (the reduce-scatter inside each node) runs. Counted in pixels: one orange phase-1 band per node
// tile (128) plus the legend's swatch, at 1280x720 (stage only) and in present mode at 1280x720 and
// 1920x1080; no blue phase-2 band yet. The PNGs stay in the scratch directory to look at.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dpscope/train/train.hpp"
#include "png_image.hpp"
#include "run_command.hpp"
#include "support/temp_files.hpp"

namespace dpscope::viz {
namespace {

struct Rgb {
  int r, g, b;
};
constexpr Rgb kPhase1Orange{230, 159, 0};  // palette.cpp kOrange (Okabe-Ito), pal.reduce
constexpr Rgb kPhase2Blue{0, 114, 178};    // kBlue, pal.data

// Connected regions (4-neighbour) of exactly colour `c` with at least `min_pixels` pixels.
int regions_of(const Image& img, Rgb c, int min_pixels) {
  std::vector<char> seen(static_cast<size_t>(img.width) * static_cast<size_t>(img.height), 0);
  int count = 0;
  std::vector<std::pair<int, int>> stack;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      if (seen[static_cast<size_t>(y) * img.width + x] || !img.is(x, y, c.r, c.g, c.b)) continue;
      int pixels = 0;
      stack.assign(1, {x, y});
      seen[static_cast<size_t>(y) * img.width + x] = 1;
      while (!stack.empty()) {
        const auto [px, py] = stack.back();
        stack.pop_back();
        ++pixels;
        const std::pair<int, int> next[4] = {{px + 1, py}, {px - 1, py}, {px, py + 1}, {px, py - 1}};
        for (const auto& [nx, ny] : next) {
          if (nx < 0 || ny < 0 || nx >= img.width || ny >= img.height) continue;
          char& s = seen[static_cast<size_t>(ny) * img.width + nx];
          if (s || !img.is(nx, ny, c.r, c.g, c.b)) continue;
          s = 1;
          stack.push_back({nx, ny});
        }
      }
      if (pixels >= min_pixels) ++count;
    }
  return count;
}

TEST(NodeStageScreenshots, PhaseOneLightsOneBandPerNodeTile) {
  const char* display = std::getenv("DISPLAY");
  if (display == nullptr || *display == '\0') GTEST_SKIP() << "no DISPLAY: run this binary under xvfb-run -a";
  const auto dir = dpscope::testing::scratch_dir();
  const auto trace = dir / "scaling.jsonl";
  TrainConfig config;
  config.mode = TrainMode::kDdp;
  config.timing_only = true;
  config.devices = 1024;
  config.model = "4096-4096-4096-1000";
  config.batch = 64;
  config.steps = 2;
  config.trace = trace.string();
  run_training(config);
  // The first hierarchical all-reduce's start: phase 1 runs, phase 2 not yet.
  int64_t start_ns = -1;
  std::ifstream in(trace);
  std::string line;
  while (start_ns < 0 && std::getline(in, line)) {
    const nlohmann::json e = nlohmann::json::parse(line);
    if (e.value("type", "") == "span" && e["args"].contains("phase_net_start_ns")) {
      ASSERT_GT(e["args"]["phase_net_start_ns"].get<int64_t>(), 1);
      start_ns = e["ts"].get<int64_t>() + 1;
    }
  }
  ASSERT_GE(start_ns, 0);
  const std::string seek = fmt::format("--seek t:{}ns", start_ns);
  const std::pair<std::string, std::string> shots[] = {
      {"node-stage-1280x720", "--size 1280x720 --stage-only"},
      {"node-stage-present-1280x720", "--size 1280x720 --present"},
      {"node-stage-present-1920x1080", "--size 1920x1080 --present"},
  };
  for (const auto& [name, flags] : shots) {
    const auto png = dir / (name + ".png");
    const auto r = testing::run_command(fmt::format("{} {} --screenshot {} {} {}", DPSCOPE_VIZ,
                                                    testing::quoted(trace.string()),
                                                    testing::quoted(png.string()), seek, flags));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Image img = load_png(png);
    // 128 node tiles' phase-1 bands and the legend's phase-1 swatch.
    EXPECT_EQ(regions_of(img, kPhase1Orange, 20), 128 + 1) << name << " " << png;
    // Phase 2 is not running: its colour appears only in the legend.
    EXPECT_EQ(regions_of(img, kPhase2Blue, 20), 1) << name << " " << png;
  }
  // --node 5: that node alone, no tile grid (a handful of phase-1 regions, not 128).
  const auto png = dir / "node-5.png";
  const auto r = testing::run_command(
      fmt::format("{} {} --screenshot {} {} --size 1280x720 --stage-only --node 5", DPSCOPE_VIZ,
                  testing::quoted(trace.string()), testing::quoted(png.string()), seek));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const int zoomed = regions_of(load_png(png), kPhase1Orange, 20);
  EXPECT_GE(zoomed, 2) << png;  // the node's phase 1 and the legend's swatch
  EXPECT_LT(zoomed, 20) << png;
}

// --node K needs a trace of several nodes and a node it has: one usage line, exit 2, before any
// window (no display needed).
TEST(NodeStageScreenshots, NodeFlagNamesTheTracesNodes) {
  const auto dir = dpscope::testing::scratch_dir();
  const auto trace = dir / "two-nodes.jsonl";
  TrainConfig config;
  config.mode = TrainMode::kDdp;
  config.timing_only = true;
  config.devices = 16;
  config.model = "64-64-10";
  config.steps = 1;
  config.trace = trace.string();
  run_training(config);
  const auto png = testing::quoted((dir / "x.png").string());
  auto r = testing::run_command(fmt::format("env -u DISPLAY {} {} --node 2 --screenshot {}", DPSCOPE_VIZ,
                                            testing::quoted(trace.string()), png));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output, "dpscope-viz: error: --node 2: the trace has 2 nodes, 0 to 1\n");
  const auto one_node = dir / "one-node.jsonl";
  config.devices = 8;
  config.trace = one_node.string();
  run_training(config);
  r = testing::run_command(fmt::format("env -u DISPLAY {} {} --node 0 --screenshot {}", DPSCOPE_VIZ,
                                       testing::quoted(one_node.string()), png));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--node 0: " + one_node.string() + " has no cluster of several nodes"),
            std::string::npos)
      << r.output;
  r = testing::run_command(fmt::format("env -u DISPLAY {} {} {} --compare --node 0 --screenshot {}",
                                       DPSCOPE_VIZ, testing::quoted(trace.string()),
                                       testing::quoted(one_node.string()), png));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--node shows one node on the stage"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dpscope::viz
