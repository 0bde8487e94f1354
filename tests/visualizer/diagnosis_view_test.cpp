// The Diagnosis panel (ui/diagnosis_view.hpp) in the whole Viewer, window-less: it shows the
// findings of trace::diagnose_ddp for a DDP trace with a straggler and a row per step with the
// playhead's step highlighted; a click on a row moves the playhead to that step; a trace without
// DDP's events gets no panel; a live trace is diagnosed again as steps complete; presentation mode
// puts a named straggler in its caption without cutting it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include <imgui.h>
#include <imgui_internal.h>

#include "dpscope/trace_tools/ddp_diagnosis.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "imgui_test_context.hpp"
#include "trace_fixtures.hpp"
#include "ui/viewer.hpp"

namespace dpscope::viz {
namespace {

constexpr int64_t kUs = 1000;

class DiagnosisViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fonts_ = testing::create_imgui_test_context();
    dir_ = testing::scratch_dir();
  }
  void TearDown() override { ImGui::DestroyContext(); }

  std::unique_ptr<Viewer> make(bool headless, bool present = false) {
    auto v = std::make_unique<Viewer>(ViewerOptions{.present = present, .headless = headless});
    v->set_fonts(fonts_, fonts_);
    return v;
  }
  void frame(Viewer& v, std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
    v.update(now, 0.0);
    ImGui::NewFrame();
    v.draw();
    ImGui::Render();
  }
  // Whether a window of this title was drawn in the last frame.
  static bool drawn(const char* title) {
    const ImGuiWindow* w = ImGui::FindWindowByName(title);
    return w != nullptr && w->Active;
  }
  std::filesystem::path straggler_run(int steps = 4) {
    const auto run = dir_ / "straggler";
    testing::write_straggler_directory(run, steps, 1, 300 * kUs);
    return run;
  }

  Fonts fonts_;
  std::filesystem::path dir_;
};

TEST_F(DiagnosisViewTest, ShowsTheStragglerSentenceAndARowPerStep) {
  const auto run = straggler_run();
  auto v = make(false);
  v->open(run, {});
  frame(*v);
  ASSERT_TRUE(drawn("Diagnosis"));
  const DiagnosisView& panel = v->diagnosis();
  const trace::DdpDiagnosis expected = trace::diagnose_ddp(trace::read_trace(run, {.strict = true}));
  ASSERT_FALSE(panel.texts().empty());
  // The diagnosis's own sentence, capitalised and ended with a full stop.
  const std::string& first = panel.texts().front();
  EXPECT_EQ(first.substr(0, 40), "Rank 1 is the straggler in 4 of 4 steps:");
  EXPECT_EQ(first.substr(1, first.size() - 2), expected.straggler.sentence.substr(1));
  EXPECT_EQ(first.back(), '.');
  // Every finding the trace has: straggler, exposed communication, the buckets' heading and one
  // line per bucket (no sampler finding: the samples carry no epoch).
  EXPECT_EQ(panel.texts().size(), 2 + expected.buckets.sentences.size());
  ASSERT_EQ(panel.rows().size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(panel.rows()[i].step, static_cast<int64_t>(i));
  // The playhead starts before step 1 (index 0): no row is current; after a seek, that row is.
  EXPECT_TRUE(
      std::none_of(panel.rows().begin(), panel.rows().end(), [](const auto& r) { return r.current; }));
  v->seek(*v->active_document()->model()->step_start(2));
  frame(*v);
  for (const DiagnosisView::StepRow& r : panel.rows()) EXPECT_EQ(r.current, r.step == 2) << r.step;
}

TEST_F(DiagnosisViewTest, ClickingAStepMovesThePlayheadToIt) {
  auto v = make(false);
  v->open(straggler_run(), {});
  frame(*v);
  frame(*v);  // ImGui's windows settle their layout in their first frame
  const ReplayModel& m = *v->active_document()->model();
  ASSERT_EQ(v->diagnosis().rows().size(), 4u);
  const DiagnosisView::StepRow row = v->diagnosis().rows()[3];
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos = ImVec2((row.min.x + row.max.x) * 0.5f, (row.min.y + row.max.y) * 0.5f);
  frame(*v);  // hover
  io.MouseDown[0] = true;
  frame(*v);
  io.MouseDown[0] = false;
  frame(*v);  // released over the row: a click
  EXPECT_EQ(v->active_playback()->cursor(), *m.step_start(3))
      << "at step " << m.state_at(v->active_playback()->cursor()).step;
  frame(*v);
  EXPECT_TRUE(v->diagnosis().rows()[3].current);
}

TEST_F(DiagnosisViewTest, ATraceWithoutDdpEventsGetsNoPanel) {
  testing::write_dp_trace(dir_ / "dp.jsonl", 2, 2);
  testing::write_single_trace(dir_ / "single.jsonl", 2);
  for (const char* name : {"dp.jsonl", "single.jsonl"}) {
    auto v = make(false);
    v->open(dir_ / name, {});
    frame(*v);
    EXPECT_TRUE(v->diagnosis().visible) << "it would show for a DDP trace";
    EXPECT_FALSE(drawn("Diagnosis")) << name;
    EXPECT_TRUE(drawn("Plots")) << name;
    EXPECT_TRUE(v->diagnosis().texts().empty()) << name;
    EXPECT_TRUE(v->diagnosis().rows().empty()) << name;
  }
}

TEST_F(DiagnosisViewTest, HidingThePanelSkipsTheDiagnosis) {
  auto v = make(false);
  v->open(straggler_run(), {});
  v->diagnosis().visible = false;
  frame(*v);
  EXPECT_FALSE(drawn("Diagnosis"));
  EXPECT_FALSE(v->active_document()->diagnosis().computed());
}

// A live directory that grows from 2 steps to 4: the panel has 2 rows, then 4 once the new steps
// were read; frames in between compute nothing.
TEST_F(DiagnosisViewTest, ALiveTraceIsDiagnosedAgainAsStepsComplete) {
  const auto run = straggler_run(2);
  auto v = make(false);
  v->open(run, {.follow = true});
  const auto t0 = std::chrono::steady_clock::now();
  frame(*v, t0);
  ASSERT_TRUE(drawn("Diagnosis"));
  EXPECT_EQ(v->diagnosis().rows().size(), 2u);
  const DiagnosisCache& cache = v->active_document()->diagnosis();
  EXPECT_EQ(cache.computations(), 1u);
  for (int i = 1; i <= 5; ++i) frame(*v, t0 + std::chrono::milliseconds(i));
  EXPECT_EQ(cache.computations(), 1u) << "nothing new: no diagnosis";
  testing::write_straggler_directory(run, 4, 1, 300 * kUs);
  frame(*v, t0 + std::chrono::seconds(1));
  EXPECT_EQ(cache.computations(), 2u);
  EXPECT_EQ(cache.diagnosed_step(), 3);
  EXPECT_EQ(v->diagnosis().rows().size(), 4u);
  EXPECT_EQ(v->diagnosis().texts().front().substr(0, 40), "Rank 1 is the straggler in 4 of 4 steps:");
}

// Presentation mode draws no panels: the caption under the stage names the straggler, and at
// classroom sizes the caption's window holds all of it (nothing scrolled out of sight).
TEST_F(DiagnosisViewTest, PresentationModeCaptionsANamedStragglerWithoutCuttingIt) {
  const auto run = straggler_run();
  for (const ImVec2 size : {ImVec2(1280, 720), ImVec2(1920, 1080)}) {
    ImGui::GetIO().DisplaySize = size;
    auto v = make(true, /*present=*/true);
    v->open(run, {});
    v->seek(*v->active_document()->model()->step_start(1));
    frame(*v);
    frame(*v);
    EXPECT_FALSE(drawn("Diagnosis"));
    EXPECT_NE(v->diagnosis().caption().find("**Straggler:** Rank 1 is the straggler in 4 of 4 steps"),
              std::string::npos)
        << v->diagnosis().caption();
    const ImGuiWindow* caption = ImGui::FindWindowByName("Caption");
    ASSERT_NE(caption, nullptr);
    EXPECT_EQ(caption->ScrollMax.y, 0.0f) << size.x << "x" << size.y << ": the caption is cut";
  }
  // A DDP run without a straggler keeps the plain caption.
  testing::write_ddp_trace(dir_ / "ddp.jsonl", 2, 2);
  auto v = make(true, true);
  v->open(dir_ / "ddp.jsonl", {});
  frame(*v);
  EXPECT_EQ(v->diagnosis().caption(), "");
}

// A named straggler gets 1.5 shares of the right column; a simulated DDP run (identical ranks: its
// rows read "even") 0.8, so the Inspector and Plots keep their room.
TEST_F(DiagnosisViewTest, ANamedStragglerGetsMoreRoomThanASimulatedRun) {
  auto straggler = make(false);
  straggler->open(straggler_run(), {});
  frame(*straggler);
  const float named_h = ImGui::FindWindowByName("Diagnosis")->Size.y;
  for (const DiagnosisView::StepRow& r : straggler->diagnosis().rows()) EXPECT_EQ(r.latest_rank, 1);
  testing::write_ddp_trace(dir_ / "ddp.jsonl", 2, 3);
  auto sim = make(false);
  sim->open(dir_ / "ddp.jsonl", {});
  frame(*sim);
  ASSERT_TRUE(drawn("Diagnosis"));
  const float sim_h = ImGui::FindWindowByName("Diagnosis")->Size.y;
  EXPECT_FLOAT_EQ(straggler->diagnosis().layout_weight(), 1.5f);
  EXPECT_FLOAT_EQ(sim->diagnosis().layout_weight(), 0.8f);
  EXPECT_GT(named_h, sim_h * 1.4f) << named_h << " vs " << sim_h;
  ASSERT_FALSE(sim->diagnosis().rows().empty());
  for (const DiagnosisView::StepRow& r : sim->diagnosis().rows()) EXPECT_EQ(r.latest_rank, -1) << r.step;
}

}  // namespace
}  // namespace dpscope::viz
