// The whole UI without a window (ImGui's "null" setup, as in --bench-frames): every view draws in
// every mode — normal, presentation, help open, developer panel open, errors, live — and the
// keyboard drives the Player exactly like its buttons.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <imgui.h>
#include <imgui_internal.h>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "dpscope/train/train.hpp"
#include "imgui_test_context.hpp"
#include "support/cli.hpp"
#include "trace_fixtures.hpp"
#include "ui/lesson_view.hpp"
#include "ui/timeline_lanes.hpp"
#include "ui/viewer.hpp"

namespace dpscope::viz {
namespace {

// Key indices for the test's own key map (a backend would use its window system's codes).
constexpr int kKeyRight = 1;
constexpr int kKeyLeft = 2;
constexpr int kKeySpace = 3;
constexpr int kKeyHome = 4;
constexpr int kKeyEnd = 5;
constexpr int kKeyPageDown = 6;

class ViewerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fonts_ = testing::create_imgui_test_context();
    ImGuiIO& io = ImGui::GetIO();
    io.KeyMap[ImGuiKey_RightArrow] = kKeyRight;
    io.KeyMap[ImGuiKey_LeftArrow] = kKeyLeft;
    io.KeyMap[ImGuiKey_Space] = kKeySpace;
    io.KeyMap[ImGuiKey_Home] = kKeyHome;
    io.KeyMap[ImGuiKey_End] = kKeyEnd;
    io.KeyMap[ImGuiKey_PageDown] = kKeyPageDown;
    dir_ = testing::scratch_dir();
  }
  void TearDown() override { ImGui::DestroyContext(); }

  std::unique_ptr<Viewer> make(bool headless, bool present = false) {
    auto v = std::make_unique<Viewer>(ViewerOptions{.present = present, .headless = headless});
    v->set_fonts(fonts_, fonts_);
    return v;
  }
  // One frame; `key` (if any) is held down during it.
  void frame(Viewer& v, int key = -1, bool shift = false, bool ctrl = false, ImWchar ch = 0) {
    ImGuiIO& io = ImGui::GetIO();
    for (bool& k : io.KeysDown) k = false;
    if (key >= 0) io.KeysDown[key] = true;
    io.KeyShift = shift;
    io.KeyCtrl = ctrl;
    if (ch != 0) io.AddInputCharacter(ch);
    v.update(std::chrono::steady_clock::now(), 0.0);
    ImGui::NewFrame();
    v.draw();
    ImGui::Render();
    ASSERT_NE(ImGui::GetDrawData(), nullptr);
  }
  // A key press: down for one frame, then up.
  void press(Viewer& v, int key, bool shift = false, bool ctrl = false) {
    frame(v, key, shift, ctrl);
    frame(v);
  }

  Fonts fonts_;
  std::filesystem::path dir_;
};

TEST_F(ViewerTest, DrawsEveryViewInEveryMode) {
  const auto path = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(path, 4, 2);
  auto v = make(false);
  v->open(path, {});
  for (View* view : v->views()) view->visible = true;  // the developer panel too
  const ReplayModel& m = *v->active_document()->model();
  for (double f : {0.0, 0.2, 0.5, 0.8, 1.0}) {
    v->seek(m.at_fraction(f));
    frame(*v);
    EXPECT_GT(ImGui::GetDrawData()->TotalVtxCount, 1000) << f;
  }
  // In the middle of an all-reduce, where every card draws its chunk row.
  const Collective& last = m.collectives().back();
  const Cursor mid = m.at_time((last.begin_ns + last.end_ns) / 2);
  for (int32_t d : last.members)
    EXPECT_EQ(m.state_at(mid).devices[static_cast<size_t>(d)].chunks.coll, last.id);
  v->seek(mid);
  frame(*v);
  // 4 GPUs, the host and the NVSwitch (an H100 box) on the stage.
  EXPECT_EQ(v->stage().boxes().size(), 6u);
  v->toggle_help();
  v->select_event(m.event_at(m.event_count() / 2));
  frame(*v);
  v->set_present(true);
  EXPECT_TRUE(v->take_present_changed());
  frame(*v);
  frame(*v);
  v->set_present(false);
  frame(*v);
  EXPECT_TRUE(v->help_open());
}

TEST_F(ViewerTest, StageDrawsTheT4PcieHostTree) {
  // A runtime-made T4 trace: the header has no GPU-GPU link, and the stage shows the two PCIe
  // switches beside the host, each linked to its two GPUs and to the host.
  const auto path = dir_ / "t4.jsonl";
  testing::write_t4_bench_trace(path);
  auto v = make(true);
  v->open(path, {});
  const ReplayModel& m = *v->active_document()->model();
  for (const TraceLinkInfo& l : m.data().header.links) {
    const ModelDevice& a = m.devices()[static_cast<size_t>(m.device_index(l.src))];
    const ModelDevice& b = m.devices()[static_cast<size_t>(m.device_index(l.dst))];
    EXPECT_TRUE(a.is_switch || b.is_switch)
        << a.name << " - " << b.name << ": every T4 link ends at a switch";
  }
  v->seek(m.at_fraction(0.5));
  frame(*v);
  const std::vector<StageView::Box>& boxes = v->stage().boxes();
  ASSERT_EQ(boxes.size(), 7u) << "4 GPUs, the host, 2 PCIe switches";
  const StageView::Box* host = nullptr;
  std::vector<const StageView::Box*> switches;
  for (const StageView::Box& b : boxes) {
    const ModelDevice& d = m.devices()[static_cast<size_t>(b.device)];
    if (d.is_host) host = &b;
    if (d.is_switch) switches.push_back(&b);
  }
  ASSERT_NE(host, nullptr);
  ASSERT_EQ(switches.size(), 2u);
  EXPECT_EQ(m.devices()[static_cast<size_t>(switches[0]->device)].name, "pcie switch 0");
  EXPECT_LT(switches[0]->center.x, host->center.x) << "switch 0 left of the host";
  EXPECT_GT(switches[1]->center.x, host->center.x) << "switch 1 right of the host";
  EXPECT_EQ(switches[0]->center.y, host->center.y);
  EXPECT_EQ(switches[1]->center.y, host->center.y);
}

// Lesson 8's screenshots showed GPU 1's card drawn over GPU 0's: two cards each wider than half
// the stage. For every GPU count the lessons use, no two boxes of the stage overlap.
TEST_F(ViewerTest, StageBoxesNeverOverlap) {
  for (const int gpus : {1, 2, 3, 4, 8}) {
    const auto path = dir_ / fmt::format("ddp{}.jsonl", gpus);
    testing::write_ddp_trace(path, gpus, 1);
    auto v = make(true);
    v->open(path, {});
    frame(*v);
    const std::vector<StageView::Box>& boxes = v->stage().boxes();
    ASSERT_GE(boxes.size(), static_cast<size_t>(gpus) + 1) << gpus << " GPUs and the host";
    for (size_t i = 0; i < boxes.size(); ++i)
      for (size_t j = i + 1; j < boxes.size(); ++j) {
        const StageView::Box& a = boxes[i];
        const StageView::Box& b = boxes[j];
        const bool apart = std::fabs(a.center.x - b.center.x) >= a.half.x + b.half.x ||
                           std::fabs(a.center.y - b.center.y) >= a.half.y + b.half.y;
        EXPECT_TRUE(apart) << gpus << " GPUs: boxes of devices " << a.device << " and " << b.device
                           << " overlap";
      }
  }
}

// Presentation mode shows the stage and a caption only, and its cards shrink their text to keep
// every row (the review found rows silently dropped at 1280x720): 8 GPUs at both classroom sizes.
TEST_F(ViewerTest, PresentationModeKeepsEveryCardRowAtClassroomSizes) {
  const auto path = dir_ / "ddp8.jsonl";
  testing::write_ddp_trace(path, 8, 2);
  // The app's presentation text is 21 px (app/fonts.cpp): the same size here.
  ImFontConfig big;
  big.SizePixels = 21.0f;
  ImFont* font = ImGui::GetIO().Fonts->AddFontDefault(&big);
  unsigned char* pixels = nullptr;
  int atlas_w = 0;
  int atlas_h = 0;
  ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&pixels, &atlas_w, &atlas_h);
  const Fonts present{.body = font, .bold = font, .small = font, .scale = 1.4f};
  float scale_720 = 0.0f;
  for (const ImVec2 size : {ImVec2(1280, 720), ImVec2(1920, 1080)}) {
    ImGui::GetIO().DisplaySize = size;
    auto v = make(true, /*present=*/true);
    v->set_fonts(fonts_, present);
    v->open(path, {});
    const ReplayModel& m = *v->active_document()->model();
    v->seek(m.at_fraction(0.6));
    for (int i = 0; i < 8; ++i) frame(*v);
    EXPECT_EQ(v->stage().clipped_cards(), 0) << size.x << "x" << size.y;
    EXPECT_GE(v->stage().card_scale(), 0.5f);
    if (size.x == 1280) scale_720 = v->stage().card_scale();
    // Only the stage and the caption: no timeline, inspector, plots or player window this frame.
    for (const char* hidden : {"Timeline", "Inspector", "Plots", "Player"}) {
      const ImGuiWindow* w = ImGui::FindWindowByName(hidden);
      EXPECT_TRUE(w == nullptr || !w->WasActive) << hidden;
    }
    EXPECT_NE(ImGui::FindWindowByName("Caption"), nullptr);
  }
  EXPECT_LT(scale_720, 1.0f) << "8 cards at 1280x720 in 21 px text only fit scaled";

  // A tree run keeps every row too: drawn as its tree where that fits (a 4:3 projector at
  // 1440x1080: text 1.125x), as the ring where the tree's four levels of cards in text that grows
  // with the window cannot (16:9 at 1280x720 and at 1920x1080).
  const auto tree = dir_ / "tree8.jsonl";
  ASSERT_EQ(
      dpscope::testing::run_command(
          fmt::format("{} train --mode ddp --devices 8 --model 64-128-4 --batch 16 --steps 1 --algo tree "
                      "--dataset blobs:256:64:4 --trace {} >/dev/null 2>&1",
                      DPSCOPE_CLI, tree.string()))
          .exit_code,
      0);
  for (const ImVec2 size : {ImVec2(1280, 720), ImVec2(1920, 1080), ImVec2(1440, 1080)}) {
    ImGui::GetIO().DisplaySize = size;
    auto v = make(true, /*present=*/true);
    v->set_fonts(fonts_, present);
    v->open(tree, {});
    v->seek(v->active_document()->model()->at_fraction(0.5));
    for (int i = 0; i < 12; ++i) frame(*v);
    EXPECT_EQ(v->stage().clipped_cards(), 0) << "tree run at " << size.x << "x" << size.y;
    // The tree puts rank 0 alone on top; the ring puts half the ranks in the top row.
    float top = 1e9f;
    int on_top = 0;
    for (const StageView::Box& b : v->stage().boxes())
      if (!v->active_document()->model()->devices()[static_cast<size_t>(b.device)].is_host &&
          !v->active_document()->model()->devices()[static_cast<size_t>(b.device)].is_switch)
        top = std::min(top, b.center.y);
    for (const StageView::Box& b : v->stage().boxes())
      if (std::fabs(b.center.y - top) < 1.0f) ++on_top;
    EXPECT_EQ(on_top, size.x == 1440 ? 1 : 4) << size.x << "x" << size.y;
  }
}

// The review found L1's two kernels 80 ns apart drawn as one timeline box: a span's fill stops a
// pixel short of its end, so two spans that nearly touch keep a gap at every zoom where each is
// drawn on its own (narrower ones merge into one box that counts them).
TEST(TimelineSpans, TwoKernels80NsApartStayTwoBoxesAtEveryZoom) {
  int zooms = 0;
  for (double ns_per_px : {0.25, 1.0, 5.0, 20.0, 80.0, 150.0, 300.0}) {
    auto x = [&](double t_ns) { return static_cast<float>(t_ns / ns_per_px); };
    const float a0 = x(0), a1 = x(1000), b0 = x(1080), b1 = x(2000);
    if (a1 - a0 < 3.0f || b1 - b0 < 3.0f) continue;  // level of detail merges them, with a count
    ++zooms;
    EXPECT_LT(span_fill_end_px(a0, a1), b0) << ns_per_px << " ns per pixel";
    EXPECT_GE(b0 - span_fill_end_px(a0, a1), 1.0f) << ns_per_px << " ns per pixel: at least a pixel between";
  }
  EXPECT_GE(zooms, 5);
  EXPECT_EQ(span_fill_end_px(10.0f, 12.0f), 12.0f) << "a narrow span keeps its width";
}

// Presentation text follows the window (the review found the same pixel size at 1920x1080 as at
// 1280x720, and the header cut at "batc..." at 1280x720): card text at 1920x1080 is at least 1.4x
// its height at 1280x720, no header line is cut, every card keeps its rows, and card text is not
// half the caption's size.
TEST_F(ViewerTest, PresentationTextGrowsWithTheWindowAndNothingIsCut) {
  EXPECT_FLOAT_EQ(present_text_scale(ImVec2(1280, 720)), 1.0f);
  EXPECT_FLOAT_EQ(present_text_scale(ImVec2(1920, 1080)), 1.5f);
  EXPECT_FLOAT_EQ(present_text_scale(ImVec2(1920, 720)), 1.0f);  // the smaller side rules
  ImFontConfig big;
  big.SizePixels = 21.0f;  // app/fonts.cpp's presentation size at 1280x720
  ImFont* font = ImGui::GetIO().Fonts->AddFontDefault(&big);
  unsigned char* pixels = nullptr;
  int atlas_w = 0;
  int atlas_h = 0;
  ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&pixels, &atlas_w, &atlas_h);
  const Fonts present{.body = font, .bold = font, .small = font, .scale = 1.4f};
  // A lesson's chapter as long as the course's (three sentences and a question), so its caption
  // competes with the cards for the room.
  LessonScript script;
  script.title = "DDP";
  script.chapters.push_back(
      {.title = "Each rank loads its own batch",
       .narration =
           "The `DistributedSampler` gives every rank a different quarter of the dataset, and each "
           "process copies its own batch to its own GPU.\n\nThere is no scatter from GPU 0: the "
           "global batch is **four** batches, read in parallel. Watch the copy stream of every card.",
       .at_ns = 0});
  script.questions.push_back({.chapter = 1,
                              .prompt = "How many bytes of input does each GPU receive per step?",
                              .unit = "bytes",
                              .answer = 1.0,
                              .answer_text = "1"});
  for (int gpus : {4, 8, -4}) {  // -4: four GPUs in a lesson
    const bool lesson = gpus < 0;
    gpus = std::abs(gpus);
    const auto path = dir_ / fmt::format("ddp{}.jsonl", gpus);
    testing::write_ddp_trace(path, gpus, 2);
    float card_px[2] = {0, 0};
    int i = 0;
    for (const ImVec2 size : {ImVec2(1280, 720), ImVec2(1920, 1080)}) {
      ImGui::GetIO().DisplaySize = size;
      auto v = make(true, /*present=*/true);
      v->set_fonts(fonts_, present);
      v->open(path, {});
      if (lesson) v->add_view(std::make_unique<LessonView>(script, LessonRerun{}, LessonReload{}));
      v->seek(v->active_document()->model()->at_fraction(0.6));
      for (int f = 0; f < 12; ++f) frame(*v);
      const std::string where =
          fmt::format("{} GPUs{} at {}x{}", gpus, lesson ? " in a lesson" : "", size.x, size.y);
      const float caption_px = 21.0f * present_text_scale(size);
      EXPECT_FLOAT_EQ(ImGui::GetIO().FontGlobalScale, present_text_scale(size)) << where;
      EXPECT_EQ(v->stage().clipped_cards(), 0) << where;
      EXPECT_FALSE(v->stage().header_clipped())
          << where << ": " << fmt::format("{}", fmt::join(v->stage().header_lines(), " / "));
      EXPECT_GE(v->stage().card_text_px(), caption_px * 0.6f) << where << ": card text against the caption's";
      card_px[i++] = v->stage().card_text_px();
    }
    EXPECT_GE(card_px[1], card_px[0] * 1.4f) << gpus << " GPUs: card text " << card_px[0]
                                             << " px at 1280x720, " << card_px[1] << " px at 1920x1080";
  }
}

// --compare --present dropped the comparison: presentation mode shows it in the stage's place.
TEST_F(ViewerTest, PresentationKeepsTheComparison) {
  testing::write_single_trace(dir_ / "single.jsonl", 2);
  testing::write_ddp_trace(dir_ / "ddp.jsonl", 4, 2, 4);
  auto v = std::make_unique<Viewer>(ViewerOptions{.present = true, .headless = true, .compare = true});
  v->set_fonts(fonts_, fonts_);
  for (const char* name : {"single.jsonl", "ddp.jsonl"}) v->open(dir_ / name, {});
  frame(*v);
  frame(*v);  // WasActive: drawn in the frame before
  const ImGuiWindow* compare = ImGui::FindWindowByName("Compare");
  ASSERT_NE(compare, nullptr);
  EXPECT_TRUE(compare->WasActive);
  const ImGuiWindow* stage = ImGui::FindWindowByName("Stage");
  EXPECT_TRUE(stage == nullptr || !stage->WasActive);
  EXPECT_EQ(v->compare().runs().size(), 2u);
  const ImGuiWindow* caption = ImGui::FindWindowByName("Caption");
  ASSERT_NE(caption, nullptr);
  EXPECT_TRUE(caption->WasActive);
}

// --stage-only (slides): the stage alone fills the window, with no menu bar, panel or caption.
TEST_F(ViewerTest, StageOnlyDrawsTheStageAloneEdgeToEdge) {
  testing::write_ddp_trace(dir_ / "ddp.jsonl", 4, 2);
  for (bool present : {false, true}) {
    auto v =
        std::make_unique<Viewer>(ViewerOptions{.present = present, .headless = true, .stage_only = true});
    v->set_fonts(fonts_, fonts_);
    v->open(dir_ / "ddp.jsonl", {});
    frame(*v);
    frame(*v);
    const ImGuiWindow* stage = ImGui::FindWindowByName("Stage");
    ASSERT_NE(stage, nullptr);
    EXPECT_TRUE(stage->WasActive);
    EXPECT_EQ(stage->Pos.y, 0.0f) << "no menu bar above it";
    EXPECT_EQ(stage->Size.x, ImGui::GetIO().DisplaySize.x);
    EXPECT_EQ(stage->Size.y, ImGui::GetIO().DisplaySize.y);
    for (const char* hidden : {"Timeline", "Inspector", "Plots", "Player", "Caption", "##MainMenuBar"}) {
      const ImGuiWindow* w = ImGui::FindWindowByName(hidden);
      EXPECT_TRUE(w == nullptr || !w->WasActive) << hidden << (present ? " in --present" : "");
    }
    EXPECT_GE(v->stage().boxes().size(), 5u) << "four cards and the host";
  }
}

// Arrows and their size labels never lie over a card (the review found arrowheads and labels over
// card rows in --present): in presentation mode at both classroom sizes, no point of any transfer's
// path and no label is inside any box, at every moment of a ring all-reduce and of a DDP run.
TEST_F(ViewerTest, PresentationKeepsArrowsAndLabelsOffTheCards) {
  testing::write_t4_bench_trace(dir_ / "t4.jsonl");
  testing::write_ddp_trace(dir_ / "ddp.jsonl", 4, 2);
  ImFontConfig big;
  big.SizePixels = 21.0f;
  ImFont* font = ImGui::GetIO().Fonts->AddFontDefault(&big);
  unsigned char* pixels = nullptr;
  int atlas_w = 0;
  int atlas_h = 0;
  ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&pixels, &atlas_w, &atlas_h);
  const Fonts present{.body = font, .bold = font, .small = font, .scale = 1.4f};
  for (const ImVec2 size : {ImVec2(1280, 720), ImVec2(1920, 1080)}) {
    ImGui::GetIO().DisplaySize = size;
    for (const char* name : {"t4.jsonl", "ddp.jsonl"}) {
      auto v = make(true, /*present=*/true);
      v->set_fonts(fonts_, present);
      v->open(dir_ / name, {});
      const ReplayModel& m = *v->active_document()->model();
      for (int f = 0; f < 8; ++f) frame(*v);  // the card scale settles
      size_t labels = 0;
      size_t paths = 0;
      for (int i = 0; i <= 100; ++i) {
        v->seek(m.at_fraction(i / 100.0));
        frame(*v);
        const std::string where = fmt::format("{} at {}x{}, {:.2f}", name, size.x, size.y, i / 100.0);
        for (const StageView::Box& b : v->stage().boxes()) {
          auto inside = [&](ImVec2 p) {
            return std::fabs(p.x - b.center.x) < b.half.x - 2 && std::fabs(p.y - b.center.y) < b.half.y - 2;
          };
          const std::string box = m.devices()[static_cast<size_t>(b.device)].name;
          for (const ImVec4& r : v->stage().label_rects()) {
            const bool overlap = r.x < b.center.x + b.half.x && b.center.x - b.half.x < r.z &&
                                 r.y < b.center.y + b.half.y && b.center.y - b.half.y < r.w;
            EXPECT_FALSE(overlap) << where << ": a label over " << box;
          }
          for (const std::vector<ImVec2>& pts : v->stage().transfer_paths())
            for (size_t j = 1; j < pts.size(); ++j)
              for (int q = 0; q <= 10; ++q) {
                const ImVec2 p(pts[j - 1].x + (pts[j].x - pts[j - 1].x) * static_cast<float>(q) / 10.0f,
                               pts[j - 1].y + (pts[j].y - pts[j - 1].y) * static_cast<float>(q) / 10.0f);
                EXPECT_FALSE(inside(p)) << where << ": an arrow over " << box;
              }
        }
        labels += v->stage().label_rects().size();
        paths += v->stage().transfer_paths().size();
      }
      EXPECT_GT(paths, 10u) << name << ": transfers were in flight";
      EXPECT_GT(labels, 5u) << name;
    }
  }
}

TEST_F(ViewerTest, CompareTakesTheStagesPlaceWithTheFewestGpusAsBaseline) {
  testing::write_dp_trace(dir_ / "dp.jsonl", 4, 2, 16);
  testing::write_single_trace(dir_ / "single.jsonl", 2);
  testing::write_ddp_trace(dir_ / "ddp.jsonl", 4, 2, 4);
  auto v = std::make_unique<Viewer>(ViewerOptions{.headless = true, .compare = true});
  v->set_fonts(fonts_, fonts_);
  for (const char* name : {"dp.jsonl", "single.jsonl", "ddp.jsonl"}) v->open(dir_ / name, {});
  frame(*v);
  ASSERT_EQ(v->compare().runs().size(), 3u);
  EXPECT_EQ(v->compare().baseline(), 1u) << "the single-device run";
  EXPECT_EQ(v->compare().runs()[2].gpus, 4);
  const ImGuiWindow* stage = ImGui::FindWindowByName("Stage");
  EXPECT_TRUE(stage == nullptr || !stage->WasActive) << "compare is drawn instead of the stage";
  // With one trace there is nothing to compare: the stage comes back.
  auto one = std::make_unique<Viewer>(ViewerOptions{.headless = true, .compare = true});
  one->set_fonts(fonts_, fonts_);
  one->open(dir_ / "ddp.jsonl", {});
  frame(*one);
  EXPECT_FALSE(one->stage().boxes().empty());
}

// The review found "4.00 MiB" written over a card's text: transfer labels keep off every box and
// off each other, at every moment of a ring all-reduce and of a DDP step.
TEST_F(ViewerTest, TransferLabelsNeverCoverACardOrEachOther) {
  testing::write_t4_bench_trace(dir_ / "t4.jsonl");
  testing::write_ddp_trace(dir_ / "ddp.jsonl", 4, 2);
  for (const char* name : {"t4.jsonl", "ddp.jsonl"}) {
    auto v = make(true);
    v->open(dir_ / name, {});
    const ReplayModel& m = *v->active_document()->model();
    size_t labels = 0;
    for (int i = 0; i <= 200; ++i) {
      v->seek(m.at_fraction(i / 200.0));
      frame(*v);
      const std::vector<ImVec4>& rects = v->stage().label_rects();
      labels += rects.size();
      for (size_t a = 0; a < rects.size(); ++a) {
        for (const StageView::Box& b : v->stage().boxes()) {
          const bool overlap = rects[a].x < b.center.x + b.half.x && b.center.x - b.half.x < rects[a].z &&
                               rects[a].y < b.center.y + b.half.y && b.center.y - b.half.y < rects[a].w;
          EXPECT_FALSE(overlap) << name << " at " << i / 200.0 << ": a label over "
                                << m.devices()[static_cast<size_t>(b.device)].name;
        }
      }
    }
    EXPECT_GT(labels, 20u) << name << ": transfers were in flight";
  }
}

// The review found a tree all-reduce's arrows sweeping through the host box and across other
// cards (a tree's parent and child are seldom ring neighbours). Every transfer of an 8-GPU tree
// run now keeps out of every box but its two ends.
TEST_F(ViewerTest, TreeTransfersGoAroundTheCardsAndTheHost) {
  const auto path = dir_ / "tree8.jsonl";
  const auto r = dpscope::testing::run_command(
      fmt::format("{} train --mode ddp --devices 8 --model 784-256-256-10 --batch 32 --steps 2 --algo tree "
                  "--dataset blobs:512:784:10 --trace {} >/dev/null 2>&1",
                  DPSCOPE_CLI, path.string()));
  ASSERT_EQ(r.exit_code, 0);
  auto v = make(true);
  v->open(path, {});
  const ReplayModel& m = *v->active_document()->model();
  size_t paths = 0;
  for (int i = 0; i <= 300; ++i) {
    v->seek(m.at_fraction(i / 300.0));
    frame(*v);
    const ReplayState state = m.state_at(m.at_fraction(i / 300.0));
    ASSERT_EQ(v->stage().transfer_paths().size(), state.transfers.size());
    for (size_t k = 0; k < state.transfers.size(); ++k) {
      const TransferSnapshot& t = state.transfers[k];
      const std::vector<ImVec2>& pts = v->stage().transfer_paths()[k];
      ++paths;
      for (size_t j = 1; j < pts.size(); ++j) {
        for (int q = 0; q <= 10; ++q) {
          const ImVec2 p(pts[j - 1].x + (pts[j].x - pts[j - 1].x) * q / 10.0f,
                         pts[j - 1].y + (pts[j].y - pts[j - 1].y) * q / 10.0f);
          for (const StageView::Box& b : v->stage().boxes()) {
            if (b.device == t.src || b.device == t.dst) continue;
            const bool in =
                std::fabs(p.x - b.center.x) < b.half.x - 2 && std::fabs(p.y - b.center.y) < b.half.y - 2;
            EXPECT_FALSE(in) << "a transfer " << m.devices()[static_cast<size_t>(t.src)].name << " -> "
                             << m.devices()[static_cast<size_t>(t.dst)].name << " crosses "
                             << m.devices()[static_cast<size_t>(b.device)].name;
          }
        }
      }
    }
  }
  EXPECT_GT(paths, 50u);
}

// A tree run is drawn as the tree its all-reduce climbs (tree 0 of the double binary tree, a heap
// over the ranks): every rank's card below its parent's ((r - 1) / 2), the two children of a
// parent on either side of it, the host in a column of its own on the left.
TEST_F(ViewerTest, ATreeRunIsDrawnAsItsTree) {
  const auto path = dir_ / "tree8.jsonl";
  const auto r = dpscope::testing::run_command(
      fmt::format("{} train --mode ddp --devices 8 --model 64-128-4 --batch 16 --steps 1 --algo tree "
                  "--dataset blobs:256:64:4 --trace {} >/dev/null 2>&1",
                  DPSCOPE_CLI, path.string()));
  ASSERT_EQ(r.exit_code, 0);
  auto v = make(true);
  v->open(path, {});
  const ReplayModel& m = *v->active_document()->model();
  frame(*v);
  std::map<int, StageView::Box> by_rank;
  const StageView::Box* host = nullptr;
  for (const StageView::Box& b : v->stage().boxes()) {
    const ModelDevice& d = m.devices()[static_cast<size_t>(b.device)];
    if (d.is_host) host = &b;
    if (!d.is_host && !d.is_switch) by_rank[d.rank] = b;
  }
  ASSERT_EQ(by_rank.size(), 8u);
  ASSERT_NE(host, nullptr);
  for (int rank = 1; rank < 8; ++rank) {
    const StageView::Box& child = by_rank[rank];
    const StageView::Box& parent = by_rank[(rank - 1) / 2];
    EXPECT_GT(child.center.y - child.half.y, parent.center.y + parent.half.y) << "rank " << rank;
    if (rank % 2 == 1) {
      EXPECT_LT(child.center.x, parent.center.x) << "rank " << rank << " is a left child";
    } else {
      EXPECT_GT(child.center.x, parent.center.x) << "rank " << rank << " is a right child";
    }
  }
  for (const auto& [rank, card] : by_rank)
    EXPECT_LT(host->center.x + host->half.x, card.center.x - card.half.x) << "rank " << rank;
}

TEST_F(ViewerTest, KeysDriveThePlayer) {
  const auto path = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(path, 2, 3);
  auto v = make(false);
  v->open(path, {});
  const ReplayModel& m = *v->active_document()->model();
  Playback& p = *v->active_playback();
  frame(*v);
  EXPECT_EQ(p.cursor(), m.start());
  press(*v, kKeyRight);
  EXPECT_EQ(p.cursor(), m.after_event(0));
  press(*v, kKeyRight);
  EXPECT_EQ(p.cursor(), m.after_event(1));
  press(*v, kKeyLeft);
  EXPECT_EQ(p.cursor(), m.after_event(0));
  const Cursor before_phase = p.cursor();
  press(*v, kKeyRight, /*shift=*/true);
  EXPECT_EQ(p.cursor(), m.next_phase(before_phase));
  press(*v, kKeyRight, false, /*ctrl=*/true);
  EXPECT_EQ(p.cursor(), *m.step_start(1));
  press(*v, kKeyPageDown);
  EXPECT_EQ(p.cursor(), *m.step_start(2));
  press(*v, kKeyEnd);
  EXPECT_EQ(p.cursor(), m.end());
  press(*v, kKeyHome);
  EXPECT_EQ(p.cursor(), m.start());
  press(*v, kKeySpace);
  EXPECT_TRUE(p.playing());
  press(*v, kKeySpace);
  EXPECT_FALSE(p.playing());
  frame(*v, -1, false, false, '?');
  EXPECT_TRUE(v->help_open());
  frame(*v, -1, false, false, '+');
  EXPECT_DOUBLE_EQ(p.speed(), 1.5);
}

TEST_F(ViewerTest, HeadlessViewersIgnoreTheKeyboard) {
  const auto path = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(path, 2, 1);
  auto v = make(true);
  v->open(path, {});
  frame(*v);
  press(*v, kKeyRight);
  EXPECT_EQ(v->active_playback()->cursor(), v->active_document()->model()->start());
}

TEST_F(ViewerTest, BadTracesAndNoTraceStillDraw) {
  auto v = make(false);
  frame(*v);  // the welcome screen
  testing::write_text(dir_ / "empty.jsonl", "");
  v->open(dir_ / "empty.jsonl", {});
  frame(*v);
  testing::write_text(dir_ / "junk.jsonl", "{\"type\":\"header\"}\nnot json\n");
  v->open(dir_ / "junk.jsonl", {});
  frame(*v);
  EXPECT_FALSE(v->active_document()->error().empty());
  v->open(dir_ / "live.jsonl", {.follow = true});  // does not exist yet: waits
  frame(*v);
  EXPECT_EQ(v->document_count(), 3u);
}

TEST_F(ViewerTest, LiveDocumentsStayAtTheLiveEdge) {
  const auto path = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(path, 2, 2);
  const std::string text = testing::read_text(path);
  const auto live = dir_ / "live.jsonl";
  const size_t half = text.find('\n', text.size() / 2) + 1;
  testing::write_text(live, text.substr(0, half));
  auto v = make(false);
  v->open(live, {.follow = true});
  frame(*v);
  const size_t first = v->active_document()->model()->event_count();
  EXPECT_TRUE(v->active_playback()->at_live_edge());
  testing::write_text(live, text);
  v->update(std::chrono::steady_clock::now() + std::chrono::seconds(1), 0.0);
  frame(*v);
  const ReplayModel& m = *v->active_document()->model();
  EXPECT_GT(m.event_count(), first);
  EXPECT_EQ(v->active_playback()->cursor(), m.live_edge());
}

// The review found a mixed state at the live edge (ranks write at different moments): the edge is
// the latest time every GPU has written, never past a GPU that is behind.
TEST_F(ViewerTest, TheLiveEdgeWaitsForTheGpuThatIsBehind) {
  const auto path = dir_ / "ddp.jsonl";
  testing::write_ddp_trace(path, 2, 3);
  const trace::TraceData full = trace::read_trace(path, {.strict = true});
  // A file where rank 1 has written only its first half: every line of rank 0, half of rank 1's.
  const std::string text = testing::read_text(path);
  std::string partial;
  int64_t rank1_last_ts = INT64_MIN;
  size_t rank1_lines = 0;
  size_t rank1_total = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    if (text.find("\"rank\":1,", at) < nl) ++rank1_total;
    at = nl + 1;
  }
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    const std::string line = text.substr(at, nl + 1 - at);
    at = nl + 1;
    if (line.find("\"rank\":1,") != std::string::npos) {
      if (++rank1_lines > rank1_total / 2) continue;
    }
    partial += line;
  }
  testing::write_text(dir_ / "live.jsonl", partial);
  const trace::TraceData data = trace::read_trace(dir_ / "live.jsonl", {.strict = true});
  const ReplayModel m(data);
  for (const trace::Event& e : data.events)
    if (e.rank == 1 && e.dev >= 0 && m.devices()[m.device_index(e.dev)].kind != "host")
      rank1_last_ts = std::max(rank1_last_ts, e.ts_ns);
  ASSERT_LT(rank1_last_ts, m.end_ns());
  EXPECT_EQ(m.live_edge(), m.at_time(rank1_last_ts));
  auto v = make(false);
  v->open(dir_ / "live.jsonl", {.follow = true});
  frame(*v);
  EXPECT_EQ(v->active_playback()->cursor(), v->active_document()->model()->live_edge());
  EXPECT_LT(v->active_playback()->cursor().seq, v->active_document()->model()->event_count());
  EXPECT_EQ(full.events.size() > data.events.size(), true);
}

// A directory of process ranks' files watched live: drawn as one run, the playhead at the latest
// time every rank has written; when the rank that is behind writes on, the playhead follows.
TEST_F(ViewerTest, ALiveDirectoryOfRankFilesStaysWhereEveryRankHasWritten) {
  const auto run = dir_ / "run";
  testing::write_rank_directory(run, 3, 2);
  const std::string rank2 = testing::read_text(run / "rank-2.jsonl");
  size_t first_step_end = 0;  // the header and rank 2's first step (9 lines)
  for (int line = 0; line < 10; ++line) first_step_end = rank2.find('\n', first_step_end) + 1;
  testing::write_text(run / "rank-2.jsonl", rank2.substr(0, first_step_end));
  auto v = make(false);
  v->open(run, {.follow = true});
  frame(*v);
  const ReplayModel* m = v->active_document()->model();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->devices().size(), 3u);
  EXPECT_TRUE(v->active_playback()->at_live_edge());
  EXPECT_EQ(v->active_playback()->cursor(), m->at_time(7600)) << "rank 2's last event: its first loss";
  EXPECT_LT(v->active_playback()->cursor().seq, m->event_count()) << "ranks 0 and 1's second step waits";
  testing::write_text(run / "rank-2.jsonl", rank2);
  v->update(std::chrono::steady_clock::now() + std::chrono::seconds(1), 0.0);
  frame(*v);
  m = v->active_document()->model();
  EXPECT_EQ(v->active_playback()->cursor(), m->at_time(17600));
  EXPECT_EQ(v->active_playback()->cursor().seq, m->event_count()) << "every rank has written everything";
}

// A failed run (lesson 13's mismatched collective, on a model with two buckets so that ranks 1-3
// stop after rank 0): no banner before the first rank stops; then a banner names rank 0, its step,
// the ranks still running and the reason; once every rank has stopped it says "Run failed"; no
// card loses a row for it, in the normal layout and in presentation mode at 1280x720.
TEST_F(ViewerTest, AFailedRunShowsItsErrorInABannerFromTheMomentTheFirstRankStops) {
  const auto path = dir_ / "mismatch.jsonl";
  testing::write_failed_ddp_trace(path, 4, "256-512-512-4", 16);
  for (const bool present : {false, true}) {
    ImGui::GetIO().DisplaySize = present ? ImVec2(1280, 720) : ImVec2(1600, 900);
    auto v = make(true, present);
    v->open(path, {});
    const ReplayModel& m = *v->active_document()->model();
    ASSERT_FALSE(m.run_errors().empty());
    const int64_t stop_ns = m.run_errors().marks.front().ts_ns;
    v->seek(m.at_time(stop_ns - 1));
    for (int i = 0; i < 4; ++i) frame(*v);
    EXPECT_EQ(v->stage().error_banner().z, 0.0f) << "no banner before the error";
    EXPECT_EQ(v->stage().error_banner_text(), "");
    v->seek(m.at_time((stop_ns + m.run_errors().marks.back().ts_ns) / 2));
    for (int i = 0; i < 4; ++i) frame(*v);
    EXPECT_TRUE(
        v->stage().error_banner_text().starts_with("Rank 0 stopped at step 2 (ranks 1-3 still running): "
                                                   "Detected mismatch between collectives on ranks."))
        << v->stage().error_banner_text();
    v->seek(m.end());
    for (int i = 0; i < 8; ++i) frame(*v);
    const ImVec4 banner = v->stage().error_banner();
    EXPECT_GT(banner.z - banner.x, 200.0f) << "present " << present;
    EXPECT_GT(banner.w - banner.y, 20.0f) << "present " << present;
    EXPECT_TRUE(
        v->stage().error_banner_text().starts_with("Run failed: rank 0 stopped at step 2 (4 ranks stopped): "
                                                   "Detected mismatch between collectives on ranks."))
        << v->stage().error_banner_text();
    EXPECT_EQ(v->stage().clipped_cards(), 0) << "present " << present;
    // Above the cards or in the band between their rows (over the host), never across a card.
    for (const StageView::Box& b : v->stage().boxes()) {
      const ModelDevice& d = m.devices()[static_cast<size_t>(b.device)];
      if (d.is_host || d.is_switch) continue;
      const bool overlap = banner.x < b.center.x + b.half.x && b.center.x - b.half.x < banner.z &&
                           banner.y < b.center.y + b.half.y && b.center.y - b.half.y < banner.w;
      EXPECT_FALSE(overlap && present)
          << "the banner over " << m.devices()[static_cast<size_t>(b.device)].name;
    }
  }
}

// The stage parses the header's "run" object once per trace, not every frame, and the parsed values
// follow a new trace: a lesson's re-run replaces the active document (replace_active_later), and a
// second trace opened beside the first becomes the active one.
TEST_F(ViewerTest, TheStageParsesTheRunConfigurationOncePerTrace) {
  const auto ddp = dir_ / "run-info-ddp.jsonl";
  const auto dp = dir_ / "run-info-dp.jsonl";
  testing::write_ddp_trace(ddp, 4, 2);
  testing::write_dp_trace(dp, 2, 2);
  auto v = make(true);
  v->open(ddp, {});
  for (int i = 0; i < 5; ++i) frame(*v);
  EXPECT_EQ(v->stage().run_info_parses(), 1);
  EXPECT_EQ(v->stage().run_info().mode, "ddp");
  ASSERT_FALSE(v->stage().header_lines().empty());
  EXPECT_TRUE(v->stage().header_lines().front().starts_with("DistributedDataParallel (DDP) · 4 GPUs"))
      << v->stage().header_lines().front();
  // A re-run's trace in the active document's place.
  v->replace_active_later(dp);
  for (int i = 0; i < 5; ++i) frame(*v);
  EXPECT_EQ(v->stage().run_info_parses(), 2);
  EXPECT_EQ(v->stage().run_info().mode, "dp");
  EXPECT_TRUE(v->stage().header_lines().front().starts_with("DataParallel (DP) · 2 GPUs"))
      << v->stage().header_lines().front();
  // Another trace opened beside it is shown, and parsed, once.
  v->open(ddp, {});
  for (int i = 0; i < 5; ++i) frame(*v);
  EXPECT_EQ(v->stage().run_info_parses(), 3);
  EXPECT_EQ(v->stage().run_info().mode, "ddp");
  EXPECT_TRUE(v->stage().header_lines().front().starts_with("DistributedDataParallel (DDP) · 4 GPUs"))
      << v->stage().header_lines().front();
}

// Lesson 13's moment after rank 0 stopped: the header says step 2 (rank 0's), and the cards of the
// ranks already in step 3 say so beside their phase, so their bucket chips are read as step 3's.
TEST_F(ViewerTest, ACardInAnotherStepThanTheHeaderNamesItsStep) {
  const auto path = dir_ / "mismatch-steps.jsonl";
  testing::write_failed_ddp_trace(path, 4, "256-512-512-4", 16);
  auto v = make(true);
  v->open(path, {});
  const ReplayModel& m = *v->active_document()->model();
  ASSERT_FALSE(m.run_errors().empty());
  v->seek(m.at_time((m.run_errors().marks.front().ts_ns + m.run_errors().marks.back().ts_ns) / 2));
  for (int i = 0; i < 4; ++i) frame(*v);
  int others = 0;
  for (size_t d = 0; d < m.devices().size(); ++d) {
    const ModelDevice& dev = m.devices()[d];
    if (dev.is_host || dev.is_switch || dev.rank < 0) continue;
    const std::string pill = v->stage().card_pill(static_cast<int>(d));
    if (dev.rank == 0) {
      EXPECT_FALSE(pill.starts_with("step")) << pill;  // the header's step
    } else {
      EXPECT_TRUE(pill.starts_with("step 3")) << "rank " << dev.rank << ": '" << pill << "'";
      ++others;
    }
  }
  EXPECT_EQ(others, 3);
  // 8 narrow cards in presentation mode at 1280x720: the step still, in the phase's colour.
  const auto eight = dir_ / "mismatch-steps-8.jsonl";
  testing::write_failed_ddp_trace(eight, 8, "256-512-512-4", 16);
  ImGui::GetIO().DisplaySize = ImVec2(1280, 720);
  auto p = make(true, true);
  p->open(eight, {});
  const ReplayModel& pm = *p->active_document()->model();
  p->seek(pm.at_time((pm.run_errors().marks.front().ts_ns + pm.run_errors().marks.back().ts_ns) / 2));
  for (int i = 0; i < 8; ++i) frame(*p);
  int stepped = 0;
  for (size_t d = 0; d < pm.devices().size(); ++d)
    if (pm.devices()[d].rank > 0) {
      EXPECT_TRUE(p->stage().card_pill(static_cast<int>(d)).starts_with("step 3"))
          << "rank " << pm.devices()[d].rank << ": '" << p->stage().card_pill(static_cast<int>(d)) << "'";
      ++stepped;
    }
  EXPECT_EQ(stepped, 7);
  EXPECT_EQ(p->stage().clipped_cards(), 0);
  // In a run whose ranks keep step, no card repeats the header's step.
  const auto ddp = dir_ / "same-steps.jsonl";
  testing::write_ddp_trace(ddp, 4, 2);
  auto w = make(true);
  w->open(ddp, {});
  const ReplayModel& n = *w->active_document()->model();
  w->seek(n.at_fraction(0.5));
  for (int i = 0; i < 3; ++i) frame(*w);
  const ReplayState s = n.state_at(w->active_playback()->cursor());
  for (size_t d = 0; d < n.devices().size(); ++d) {
    if (s.devices[d].step != s.step) continue;
    EXPECT_FALSE(w->stage().card_pill(static_cast<int>(d)).starts_with("step"))
        << w->stage().card_pill(static_cast<int>(d));
  }
}

}  // namespace
}  // namespace dpscope::viz
