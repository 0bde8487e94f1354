// The node-level stage (ui/node_stage_layout.hpp, stage_node_view.cpp): the layout without a window
// (128 tiles for 1,024 GPUs, 2 for 16, nothing overlapping, labels on their own row; a zoomed node
// has 8 GPUs, 8 NICs and 8 rails), the phases a moment falls in, and the stage drawn from a real
// timing-only trace in a window-less ImGui context: the node view for a world of nodes, the cards
// for one node, the phases of the all-reduce under the cursor.
#include <gtest/gtest.h>

#include <chrono>

#include <fmt/format.h>

#include "dpscope/train/train.hpp"
#include "imgui_test_context.hpp"
#include "support/temp_files.hpp"
#include "ui/node_stage_layout.hpp"
#include "ui/viewer.hpp"

namespace dpscope::viz {
namespace {

void expect_no_overlaps(const std::vector<NodeRect>& rects, const std::string& what) {
  for (size_t i = 0; i < rects.size(); ++i)
    for (size_t j = i + 1; j < rects.size(); ++j)
      EXPECT_FALSE(rects[i].overlaps(rects[j])) << what << " " << i << " and " << j;
}

void expect_sound_grid(const NodeGridLayout& g, int nodes, const NodeRect& area) {
  ASSERT_EQ(static_cast<int>(g.tiles.size()), nodes);
  EXPECT_EQ(g.columns * (g.rows - 1) < nodes && nodes <= g.columns * g.rows, true);
  std::vector<NodeRect> boxes;
  for (const NodeTile& t : g.tiles) {
    boxes.push_back(t.box);
    EXPECT_TRUE(area.contains(t.box)) << t.node;
    // The label has its own row: nothing else of the tile is under it.
    EXPECT_TRUE(t.box.contains(t.label));
    EXPECT_TRUE(t.box.contains(t.phases));
    EXPECT_FALSE(t.label.overlaps(t.phases)) << t.node;
    if (t.nvswitch) {
      EXPECT_FALSE(t.label.overlaps(*t.nvswitch));
      EXPECT_FALSE(t.phases.overlaps(*t.nvswitch));
    }
    for (const NodeRect& gpu : t.gpus) {
      EXPECT_TRUE(t.box.contains(gpu));
      EXPECT_FALSE(gpu.overlaps(t.label));
      EXPECT_FALSE(gpu.overlaps(t.phases));
      if (t.nvswitch) {
        EXPECT_FALSE(gpu.overlaps(*t.nvswitch));
      }
    }
    expect_no_overlaps(t.gpus, "gpus of a tile");
  }
  for (const NodeRect& band : g.rail_bands) boxes.push_back(band);
  expect_no_overlaps(boxes, "tiles and rail bands");
}

TEST(NodeGridLayout, ThousandTwentyFourGpusAre128TilesWithTheirGpus) {
  // About the stage's area in the working view at 1280x720 and in present mode at 1920x1080.
  for (const NodeRect area : {NodeRect{0, 0, 820, 430}, NodeRect{0, 0, 1880, 820}}) {
    const NodeGridLayout g = layout_node_grid(128, 8, area, 13.0f);
    expect_sound_grid(g, 128, area);
    EXPECT_EQ(g.rails, 8);
    for (const NodeTile& t : g.tiles) {
      EXPECT_EQ(t.gpus.size(), 8u) << area.x1;
      EXPECT_TRUE(t.nvswitch.has_value());
    }
  }
}

TEST(NodeGridLayout, SixteenGpusAreTwoTiles) {
  const NodeRect area{10, 20, 810, 420};
  const NodeGridLayout g = layout_node_grid(2, 8, area, 13.0f);
  expect_sound_grid(g, 2, area);
  EXPECT_EQ(g.tiles[0].gpus.size(), 8u);
  // Rail k lies in the rail band below its row of tiles, in rail order.
  EXPECT_GT(g.rail_y(0, 1), g.rail_y(0, 0));
  EXPECT_GE(g.rail_y(0, 0), g.rail_bands[0].y0);
  EXPECT_LE(g.rail_y(0, 7), g.rail_bands[0].y1);
}

TEST(NodeGridLayout, TilesTooSmallForGpusStayBoxes) {
  const NodeGridLayout g = layout_node_grid(128, 8, NodeRect{0, 0, 300, 150}, 13.0f);
  expect_sound_grid(g, 128, NodeRect{0, 0, 300, 150});
  EXPECT_TRUE(g.tiles[0].gpus.empty());
  EXPECT_FALSE(g.tiles[0].nvswitch.has_value());
}

TEST(NodeZoomLayout, OneNodeIsEightGpusEightNicsAndEightRails) {
  const NodeRect area{0, 0, 1200, 500};
  const NodeZoomLayout z = layout_node_zoom(8, area, 13.0f);
  ASSERT_EQ(z.gpus.size(), 8u);
  ASSERT_EQ(z.nics.size(), 8u);
  ASSERT_EQ(z.rails.size(), 8u);
  std::vector<NodeRect> all = {z.nvswitch, z.rail_label};
  for (size_t k = 0; k < 8; ++k) {
    all.push_back(z.gpus[k]);
    all.push_back(z.nics[k]);
    all.push_back(z.rails[k]);
    // GPU k, its NIC under it, its rail under that (rail-aligned).
    EXPECT_LT(z.gpus[k].y1, z.nics[k].y0 + 0.01f);
    EXPECT_LE(z.nics[k].y1, z.rails[k].y0 + 0.01f);
    EXPECT_GT(z.nics[k].x0, z.gpus[k].x0);
    EXPECT_LT(z.nics[k].x1, z.gpus[k].x1);
    EXPECT_GT(z.gpus[k].y0, z.nvswitch.y1);
  }
  for (const NodeRect& r : all) EXPECT_TRUE(area.contains(r));
  expect_no_overlaps(all, "zoomed node");
}

TEST(ActivePhases, PipelinedPhasesOverlap) {
  const CollectivePhases p{.rs_start_ns = 0,
                           .rs_dur_ns = 500,
                           .net_start_ns = 100,
                           .net_dur_ns = 600,
                           .ag_start_ns = 300,
                           .ag_dur_ns = 500};
  const ActivePhases start = active_phases(p, 50);
  EXPECT_TRUE(start.rs && !start.net && !start.ag);
  const ActivePhases mid = active_phases(p, 400);
  EXPECT_TRUE(mid.rs && mid.net && mid.ag);
  const ActivePhases tail = active_phases(p, 750);
  EXPECT_TRUE(!tail.rs && !tail.net && tail.ag);
  EXPECT_FALSE(active_phases(p, 800).any());
}

// The stage drawn from a real `train --timing-only` trace in a window-less ImGui context.
class NodeStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fonts_ = testing::create_imgui_test_context(ImVec2(1280, 720));
    dir_ = dpscope::testing::scratch_dir();
  }
  void TearDown() override { ImGui::DestroyContext(); }

  std::filesystem::path timing_only_trace(int devices) {
    TrainConfig config;
    config.mode = TrainMode::kDdp;
    config.timing_only = true;
    config.devices = devices;
    config.preset = "h100-sxm";
    config.model = "4096-4096-4096-1000";
    config.batch = 64;
    config.steps = 2;
    const auto path = dir_ / fmt::format("scaling-{}.jsonl", devices);
    config.trace = path.string();
    run_training(config);
    return path;
  }
  std::unique_ptr<Viewer> open(const std::filesystem::path& path) {
    auto v = std::make_unique<Viewer>(ViewerOptions{.headless = true});
    v->set_fonts(fonts_, fonts_);
    v->open(path, {});
    return v;
  }
  void frame(Viewer& v) {
    v.update(std::chrono::steady_clock::now(), 0.0);
    ImGui::NewFrame();
    v.draw();
    ImGui::Render();
  }
  // The first collective span with phases, and its phases.
  static const trace::Event* first_phased(const ReplayModel& m, CollectivePhases* phases) {
    for (const trace::Event& e : m.data().events)
      if (auto p = collective_phases(m.data(), e)) {
        *phases = *p;
        return &e;
      }
    return nullptr;
  }

  Fonts fonts_;
  std::filesystem::path dir_;
};

TEST_F(NodeStageTest, AThousandGpuRunShows128NodesAndThePhasesAtTheCursor) {
  auto v = open(timing_only_trace(1024));
  const ReplayModel& m = *v->active_document()->model();
  ASSERT_TRUE(m.data().header.cluster.has_value());
  CollectivePhases p;
  const trace::Event* e = first_phased(m, &p);
  ASSERT_NE(e, nullptr);
  // Just after it starts: only the reduce-scatter inside the node.
  v->seek(m.at_time(e->ts_ns + 1));
  frame(*v);
  frame(*v);
  ASSERT_TRUE(v->stage().node_stage_drawn());
  EXPECT_EQ(v->stage().node_grid().tiles.size(), 128u);
  EXPECT_TRUE(v->stage().node_phases().rs);
  EXPECT_FALSE(v->stage().node_phases().net);
  EXPECT_NE(v->stage().node_status().find("1 reduce-scatter in the node"), std::string::npos)
      << v->stage().node_status();
  // Later in the pipeline the stage shows exactly the phases the trace says run then; the network
  // phase runs until the all-gather has begun.
  for (const int64_t offset : {p.rs_start_ns + p.rs_dur_ns, p.net_start_ns + 1, p.ag_start_ns + 1}) {
    v->seek(m.at_time(e->ts_ns + offset));
    frame(*v);
    const ActivePhases want = active_phases(p, offset);
    const ActivePhases got = v->stage().node_phases();
    EXPECT_EQ(got.rs, want.rs) << offset << " " << v->stage().node_status();
    EXPECT_EQ(got.net, want.net) << offset;
    EXPECT_EQ(got.ag, want.ag) << offset;
  }
  EXPECT_TRUE(active_phases(p, p.ag_start_ns + 1).net);
  // Zoomed to node 5: its 8 GPUs, NICs and rails.
  v->stage().set_zoom_node(5);
  frame(*v);
  EXPECT_TRUE(v->stage().node_grid().tiles.empty());
  EXPECT_EQ(v->stage().node_zoom().gpus.size(), 8u);
  EXPECT_EQ(v->stage().node_zoom().rails.size(), 8u);
  // A node past the world's last zooms back out.
  v->stage().set_zoom_node(500);
  frame(*v);
  EXPECT_EQ(v->stage().zoom_node(), -1);
  EXPECT_EQ(v->stage().node_grid().tiles.size(), 128u);
}

TEST_F(NodeStageTest, AClickOnATileZoomsToItsNodeAndEscZoomsOut) {
  constexpr int kKeyEscape = 9;
  ImGuiIO& io = ImGui::GetIO();
  io.KeyMap[ImGuiKey_Escape] = kKeyEscape;
  auto v = std::make_unique<Viewer>(ViewerOptions{.headless = false});
  v->set_fonts(fonts_, fonts_);
  v->open(timing_only_trace(16), {});
  frame(*v);
  frame(*v);
  ASSERT_EQ(v->stage().node_grid().tiles.size(), 2u);
  const NodeRect tile = v->stage().node_grid().tiles[1].box;
  io.MousePos = ImVec2((tile.x0 + tile.x1) * 0.5f, (tile.y0 + tile.y1) * 0.5f);
  frame(*v);  // hover first, so the stage's window is the hovered one
  io.MouseDown[0] = true;
  frame(*v);
  io.MouseDown[0] = false;
  frame(*v);
  EXPECT_EQ(v->stage().zoom_node(), 1);
  EXPECT_EQ(v->stage().node_zoom().gpus.size(), 8u);
  io.KeysDown[kKeyEscape] = true;
  frame(*v);
  io.KeysDown[kKeyEscape] = false;
  frame(*v);
  EXPECT_EQ(v->stage().zoom_node(), -1);
  EXPECT_EQ(v->stage().node_grid().tiles.size(), 2u);
}

TEST_F(NodeStageTest, SixteenGpusAreTwoNodesAndEightAreOneCard) {
  auto two = open(timing_only_trace(16));
  frame(*two);
  ASSERT_TRUE(two->stage().node_stage_drawn());
  EXPECT_EQ(two->stage().node_grid().tiles.size(), 2u);
  // One node: no cluster in the header, the GPU card as before.
  auto one = open(timing_only_trace(8));
  EXPECT_FALSE(one->active_document()->model()->data().header.cluster.has_value());
  frame(*one);
  EXPECT_FALSE(one->stage().node_stage_drawn());
  EXPECT_FALSE(one->stage().boxes().empty());
}

// Lesson 12 zoomed to one node in the working view at 1280x720, in the app's own fonts (DejaVu Sans
// at 15 px, its small 0.84x and bold 1.1x, fonts.cpp): while backward and a bucket's all-reduce run,
// the status above takes two lines and the NVSwitch bar is short. Its label is still drawn, whole,
// inside the bar (it was left out: the bold line did not fit the bar's height).
TEST_F(NodeStageTest, AZoomedNodesSwitchLabelFitsInsideItsBarAt1280x720) {
  const std::filesystem::path dejavu = "/usr/share/fonts/truetype/dejavu";
  if (!std::filesystem::exists(dejavu / "DejaVuSans.ttf") ||
      !std::filesystem::exists(dejavu / "DejaVuSans-Bold.ttf"))
    GTEST_SKIP() << "DejaVu fonts not installed (Debian fonts-dejavu-core)";
  ImFontAtlas* atlas = ImGui::GetIO().Fonts;
  atlas->Clear();
  Fonts fonts;
  fonts.body = atlas->AddFontFromFileTTF((dejavu / "DejaVuSans.ttf").c_str(), 15.0f);
  fonts.small = atlas->AddFontFromFileTTF((dejavu / "DejaVuSans.ttf").c_str(), 15.0f * 0.84f);
  fonts.bold = atlas->AddFontFromFileTTF((dejavu / "DejaVuSans-Bold.ttf").c_str(), 15.0f * 1.1f);
  unsigned char* pixels = nullptr;
  int width = 0;
  int height = 0;
  atlas->GetTexDataAsRGBA32(&pixels, &width, &height);
  fonts_ = fonts;

  TrainConfig config;  // lessons/12-scaling.toml's scenario
  config.mode = TrainMode::kDdp;
  config.timing_only = true;
  config.devices = 1024;
  config.preset = "h100-sxm";
  config.model = "4096-4096-4096-4096-4096-4096-4096-1000";
  config.batch = 64;
  config.steps = 2;
  const auto path = dir_ / "lesson-12.jsonl";
  config.trace = path.string();
  run_training(config);
  auto v = open(path);
  const ReplayModel& m = *v->active_document()->model();
  // Lesson 12's chapter 2: the second step's first bucket launched, backward still running.
  const trace::Event* launched = nullptr;
  for (const trace::Event& e : m.data().events)
    if (e.known == EventName::kBucketLaunched && e.step == 1) {
      launched = &e;
      break;
    }
  ASSERT_NE(launched, nullptr);
  v->seek(m.at_time(launched->ts_ns + 1));
  v->stage().set_zoom_node(5);
  for (int i = 0; i < 3; ++i) frame(*v);
  ASSERT_EQ(v->stage().zoom_node(), 5);
  EXPECT_TRUE(v->stage().node_status().starts_with("compute: backward")) << v->stage().node_status();
  const NodeRect bar = v->stage().node_zoom().nvswitch;
  const NodeRect label = v->stage().node_switch_label();
  EXPECT_TRUE(v->stage().node_switch_label_text().starts_with("NVSwitch"))
      << "no label in a bar " << bar.width() << " x " << bar.height() << " px";
  EXPECT_GT(label.width(), 0.0f);
  EXPECT_TRUE(bar.contains(label)) << "label (" << label.x0 << ", " << label.y0 << ")-(" << label.x1 << ", "
                                   << label.y1 << ") bar (" << bar.x0 << ", " << bar.y0 << ")-(" << bar.x1
                                   << ", " << bar.y1 << ")";
  // The phase running is named in it (colour is never the only cue).
  EXPECT_NE(v->stage().node_switch_label_text().find("phase"), std::string::npos)
      << v->stage().node_switch_label_text();
}

}  // namespace
}  // namespace dpscope::viz
