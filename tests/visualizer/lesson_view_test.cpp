// The lesson panel (ui/lesson_view.hpp) in a window-less ImGui context, on a DDP trace the runtime
// wrote: playing stops at every chapter's moment, the chapter buttons seek and pause, answers are
// checked within their tolerance, and a re-run replaces the trace and the script (or keeps both
// and says why it failed).
#include <gtest/gtest.h>

#include <imgui.h>
#include <imgui_internal.h>

#include <cmath>

#include <fmt/format.h>

#include "dpscope/trace_tools/reader.hpp"
#include "imgui_test_context.hpp"
#include "trace_fixtures.hpp"
#include "ui/lesson_view.hpp"
#include "ui/viewer.hpp"

namespace dpscope::viz {
namespace {

class LessonViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fonts_ = testing::create_imgui_test_context();
    dir_ = testing::scratch_dir();
    trace_ = dir_ / "ddp.jsonl";
    testing::write_ddp_trace(trace_, 4, 2);
    viewer_ = std::make_unique<Viewer>(ViewerOptions{});
    viewer_->set_fonts(fonts_, fonts_);
    viewer_->open(trace_, {});
    const ReplayModel& m = model();
    const int64_t span = m.end_ns() - m.begin_ns();
    for (int i = 0; i < 3; ++i) at_.push_back(m.begin_ns() + span * (2 * i + 1) / 7);
  }
  void TearDown() override {
    viewer_.reset();
    ImGui::DestroyContext();
  }
  const ReplayModel& model() { return *viewer_->active_document()->model(); }

  LessonScript script(const std::string& title) const {
    LessonScript s;
    s.title = title;
    s.snippet = "import torch\nmodel = DDP(model)\nloss.backward()\n";
    for (size_t i = 0; i < at_.size(); ++i)
      s.chapters.push_back({.title = "chapter " + std::to_string(i + 1),
                            .narration = "what happens",
                            .at_ns = at_[i],
                            .snippet_line = static_cast<int>(i) + 1});
    s.questions.push_back({.chapter = 2, .prompt = "how many?", .answer = 6.0, .answer_text = "6"});
    s.knobs.push_back(
        {.flag = "--devices", .label = "GPUs", .numeric = true, .min = 2, .max = 8, .value = "4"});
    return s;
  }
  // Adds a lesson panel and returns it (the viewer owns it).
  LessonView* add(LessonRerun rerun = {}) {
    auto view = std::make_unique<LessonView>(
        script("first"), std::move(rerun),
        [this](const std::filesystem::path& p) { viewer_->replace_active_later(p); });
    LessonView* raw = view.get();
    viewer_->add_view(std::move(view));
    return raw;
  }
  void frame(double dt_s = 0.0) {
    viewer_->update(std::chrono::steady_clock::now(), dt_s);
    ImGui::NewFrame();
    viewer_->draw();
    ImGui::Render();
  }
  ViewContext context() {
    ViewContext ctx;
    ctx.doc = viewer_->active_document();
    ctx.model = &model();
    ctx.playback = viewer_->active_playback();
    return ctx;
  }

  Fonts fonts_;
  std::filesystem::path dir_;
  std::filesystem::path trace_;
  std::unique_ptr<Viewer> viewer_;
  std::vector<int64_t> at_;
};

TEST(LessonAnswers, AreRightWithinTheirRelativeTolerance) {
  EXPECT_TRUE(answer_is_right(100.0, 100.0, 0.01));
  EXPECT_TRUE(answer_is_right(100.9, 100.0, 0.01));
  EXPECT_FALSE(answer_is_right(101.1, 100.0, 0.01));
  EXPECT_TRUE(answer_is_right(0.005, 0.0, 0.01));  // absolute for an answer of 0
  EXPECT_FALSE(answer_is_right(0.02, 0.0, 0.01));
  EXPECT_FALSE(answer_is_right(std::nan(""), 1.0, 0.01));
}

TEST_F(LessonViewTest, PlayingStopsAtEveryChapterUntilTheLast) {
  LessonView* lesson = add();
  viewer_->seek(model().start());
  frame();
  EXPECT_EQ(lesson->chapter(), -1);
  for (int c = 0; c < 3; ++c) {
    viewer_->active_playback()->set_playing(true);
    for (int i = 0; i < 2000 && viewer_->active_playback()->playing(); ++i) frame(0.05);
    EXPECT_FALSE(viewer_->active_playback()->playing()) << "chapter " << c + 1;
    EXPECT_EQ(lesson->chapter(), c);
    EXPECT_EQ(viewer_->active_playback()->cursor().t_ns, at_[static_cast<size_t>(c)]);
  }
}

TEST_F(LessonViewTest, ChapterButtonsSeekAndPauseAndASeekFollowsTheChapter) {
  LessonView* lesson = add();
  frame();
  viewer_->active_playback()->set_playing(true);
  const ViewContext ctx = context();
  lesson->go_to_chapter(ctx, 2);
  EXPECT_EQ(lesson->chapter(), 2);
  EXPECT_FALSE(viewer_->active_playback()->playing());
  EXPECT_EQ(viewer_->active_playback()->cursor().t_ns, at_[2]);
  lesson->go_to_chapter(ctx, 7);  // clamped to the last
  EXPECT_EQ(lesson->chapter(), 2);
  // A seek back to between chapters 1 and 2 shows chapter 1.
  viewer_->seek(model().at_time((at_[0] + at_[1]) / 2));
  frame();
  EXPECT_EQ(lesson->chapter(), 0);
  viewer_->seek(model().start());
  frame();
  EXPECT_EQ(lesson->chapter(), -1);
}

TEST_F(LessonViewTest, ARerunReplacesTheTraceAndTheScript) {
  const auto second = dir_ / "second.jsonl";
  testing::write_ddp_trace(second, 2, 2);
  std::map<std::string, std::string> asked;
  LessonView* lesson = add([&](const std::map<std::string, std::string>& knobs) {
    asked = knobs;
    LessonRun run;
    run.trace = second;
    run.script = script("second");
    run.script.command = "dpscope train --devices 2";
    run.seconds = 0.25;
    return run;
  });
  frame();
  lesson->knob_values()["--devices"] = "2";
  lesson->rerun();
  frame();  // the viewer opens the new trace at its next update
  EXPECT_EQ(asked.at("--devices"), "2");
  EXPECT_EQ(viewer_->active_document()->path(), second);
  EXPECT_EQ(viewer_->document_count(), 1u);
  EXPECT_EQ(lesson->script().title, "second");
  EXPECT_EQ(lesson->status(), "re-ran in 0.25 s: dpscope train --devices 2");
}

TEST_F(LessonViewTest, AFailedRerunKeepsTheRunAndSaysWhy) {
  LessonView* lesson = add([](const std::map<std::string, std::string>&) {
    return LessonRun{.error = "the run failed (exit 2): --devices must be from 2 to 8"};
  });
  frame();
  lesson->rerun();
  frame();
  EXPECT_EQ(viewer_->active_document()->path(), trace_);
  EXPECT_EQ(lesson->script().title, "first");
  EXPECT_EQ(lesson->status(), "the run failed (exit 2): --devices must be from 2 to 8");
}

}  // namespace
}  // namespace dpscope::viz

namespace dpscope::viz {
namespace {

// Presentation mode shows the chapter's question large under the stage, and R reveals its answer
// (the review found questions and reveal missing in --present).
TEST_F(LessonViewTest, PresentationShowsTheQuestionAndRRevealsItsAnswer) {
  viewer_ = std::make_unique<Viewer>(ViewerOptions{.present = true});
  viewer_->set_fonts(fonts_, fonts_);
  viewer_->open(trace_, {});
  LessonView* lesson = add();
  ViewContext ctx = context();
  const Palette palette = Palette::classroom();
  ctx.palette = &palette;
  lesson->go_to_chapter(ctx, 1);  // chapter 2 has the question
  frame();
  ASSERT_EQ(lesson->chapter_questions(), std::vector<size_t>{0});
  EXPECT_FALSE(lesson->revealed(0));
  EXPECT_TRUE(ImGui::FindWindowByName("Caption") != nullptr) << "presentation mode's caption";
  const float hidden_h = lesson->present_caption(ctx, 1000.0f, true);
  // R typed in presentation mode reveals it; the caption grows by the answer.
  ImGui::GetIO().AddInputCharacter('r');
  frame();
  EXPECT_TRUE(lesson->revealed(0));
  EXPECT_GT(lesson->present_caption(ctx, 1000.0f, true), hidden_h);
  // A chapter without a question ignores R.
  lesson->go_to_chapter(ctx, 0);
  EXPECT_TRUE(lesson->chapter_questions().empty());
  EXPECT_FALSE(lesson->handle_char('r'));
}

// Two questions in one chapter come one at a time: R reveals the first, then the second; the
// caption shows the next question large only once the one before is answered.
TEST_F(LessonViewTest, PresentationRevealsAChaptersQuestionsOneAtATime) {
  LessonScript s = script("two");
  s.questions.push_back(
      {.chapter = 2, .prompt = "how long?", .unit = "us", .answer = 2.0, .answer_text = "2"});
  auto view = std::make_unique<LessonView>(s, LessonRerun{}, LessonReload{});
  LessonView* lesson = view.get();
  viewer_->add_view(std::move(view));
  ViewContext ctx = context();
  const Palette palette = Palette::classroom();
  ctx.palette = &palette;
  lesson->go_to_chapter(ctx, 1);
  frame();
  ASSERT_EQ(lesson->chapter_questions().size(), 2u);
  const float one_shown = lesson->present_caption(ctx, 1000.0f, true);
  EXPECT_TRUE(lesson->handle_char('R'));
  EXPECT_TRUE(lesson->revealed(0));
  EXPECT_FALSE(lesson->revealed(1));
  EXPECT_GT(lesson->present_caption(ctx, 1000.0f, true), one_shown) << "the answer, then the next question";
  EXPECT_TRUE(lesson->handle_char('r'));
  EXPECT_TRUE(lesson->revealed(1));
  EXPECT_FALSE(lesson->handle_char('r')) << "nothing left to reveal";
  EXPECT_FALSE(lesson->handle_char('x'));
}

// A compare chapter puts runs in the stage's place: the timeline and the inspector show one of them
// — the lesson's own when it is a column, else the first column's run, from that run's moment —
// and every panel's title names the run it shows, so nothing below shows a run that is not on
// screen without saying so. Leaving the chapter brings the lesson's run and the plain titles back.
TEST_F(LessonViewTest, ACompareChaptersTimelineAndInspectorShowARunOnScreen) {
  const auto other_path = dir_ / "other.jsonl";
  testing::write_dp_trace(other_path, 2, 2);
  LessonScript s = script("compare");
  LessonScript::Run other{.name = "dp"};
  other.data = std::make_shared<const trace::TraceData>(trace::read_trace(other_path));
  other.model = std::make_shared<const ReplayModel>(*other.data);
  const ReplayModel* other_model = other.model.get();
  const int64_t other_at = (other_model->begin_ns() + other_model->end_ns()) / 2;
  s.runs.push_back(other);
  s.chapters[0].compare = {{.run = "dp", .at_ns = other_at}, {.run = "dp", .at_ns = other_at}};
  s.chapters[1].compare = {{.run = "dp", .at_ns = other_at}, {.run = "main", .at_ns = at_[1]}};
  auto view = std::make_unique<LessonView>(s, LessonRerun{}, [](const std::filesystem::path&) {});
  LessonView* lesson = view.get();
  lesson->set_compare(&viewer_->compare());
  viewer_->add_view(std::move(view));
  frame();

  // Chapter 1 compares two columns of the other run: the lower panels show it, from its moment.
  lesson->go_to_chapter(context(), 0);
  frame();
  frame();
  ASSERT_TRUE(viewer_->compare().showing_lesson_runs());
  EXPECT_EQ(viewer_->timeline_model(), other_model);
  EXPECT_EQ(viewer_->followed_run_label(), "dp");
  EXPECT_EQ(viewer_->panel_title(&viewer_->timeline()), "Timeline: run 'dp' (a column above)###Timeline");
  for (const View* v : viewer_->views()) {
    const std::string title = viewer_->panel_title(v);
    if (std::string(v->title()) == "Inspector") {
      EXPECT_EQ(title, "Inspector: run 'dp' (a column above)###Inspector");
    } else if (std::string(v->title()) == "Player" || std::string(v->title()) == "Plots") {
      // They still drive and plot the lesson's own run, and say that it is not on screen.
      EXPECT_EQ(title, fmt::format("{}: this lesson's own run (not among the columns above)###{}", v->title(),
                                   v->title()));
    }
  }
  const ImGuiWindow* timeline = ImGui::FindWindowByName("Timeline: run 'dp' (a column above)###Timeline");
  ASSERT_NE(timeline, nullptr);
  EXPECT_TRUE(timeline->WasActive);
  // The lesson's own playhead stays at the chapter's moment in its run.
  EXPECT_EQ(viewer_->active_playback()->cursor().t_ns, at_[0]);

  // Chapter 2 has the lesson's own run among its columns: the lower panels show it.
  lesson->go_to_chapter(context(), 1);
  frame();
  frame();
  EXPECT_EQ(viewer_->timeline_model(), &model());
  EXPECT_EQ(viewer_->panel_title(&viewer_->timeline()), "Timeline: this run (a column above)###Timeline");

  // Chapter 3 compares nothing: the stage, the lesson's run and the plain titles are back.
  lesson->go_to_chapter(context(), 2);
  frame();
  frame();
  EXPECT_FALSE(viewer_->compare().showing_lesson_runs());
  EXPECT_EQ(viewer_->timeline_model(), &model());
  EXPECT_EQ(viewer_->followed_run_label(), "");
  EXPECT_EQ(viewer_->panel_title(&viewer_->timeline()), "Timeline");
}

}  // namespace
}  // namespace dpscope::viz
