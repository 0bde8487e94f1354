// Viewer: the whole dpscope-viz UI for one ImGui frame, with no GL and no window in it (the app
// layer owns those). It holds the open traces (Documents, each with its Playback and selection),
// the views, and decides from one place which views show and where (no docking: a fixed tiling
// that gives the Stage the most room); it draws the menu bar, the error and problem banners, the
// help overlay, and maps the keyboard to Player actions. Headless runs and benchmarks drive the
// same Viewer as the interactive app.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "replay/document.hpp"
#include "replay/playback.hpp"
#include "ui/compare_view.hpp"
#include "ui/diagnosis_view.hpp"
#include "ui/inspector_view.hpp"
#include "ui/player_view.hpp"
#include "ui/plots_view.hpp"
#include "ui/stage_view.hpp"
#include "ui/timeline_view.hpp"
#include "ui/trace_info_view.hpp"

namespace dpscope::viz {

// Presentation mode's text size relative to a 1280x720 window: it grows with the window (1.5 at
// 1920x1080, so text reads from the back of a room) and shrinks a little below 1280x720.
float present_text_scale(ImVec2 window);

struct ViewerOptions {
  bool present = false;   // --present: classroom mode from the start
  bool headless = false;  // --screenshot / --bench-frames: no hover, no toasts, no wall clock
  // `--lesson ID`: its panel (ui/lesson_view.hpp) arrives through Viewer::add_view().
  bool compare = false;  // --compare: the traces side by side in the stage's place
  // --stage-only: the stage alone fills the window (no menu, panels or caption), for slides.
  bool stage_only = false;
};

class Viewer {
 public:
  explicit Viewer(ViewerOptions options);

  // ---- documents ----
  void open(const std::filesystem::path& path, OpenOptions options);
  void add_document(std::unique_ptr<Document> doc);
  size_t document_count() const { return tabs_.size(); }
  const Document* document(size_t index) const { return tabs_[index].doc.get(); }
  Document* active_document();
  Playback* active_playback();
  void seek(Cursor cursor);
  // Opens `path` in place of the active document at the next update() (a lesson's re-run: asked
  // for while a view draws, which must not lose the document it is drawing).
  void replace_active_later(const std::filesystem::path& path);

  // ---- frame ----
  // Polls live traces and advances playback by `dt_s` seconds (call once per frame, before draw()).
  void update(std::chrono::steady_clock::time_point now, double dt_s);
  // All ImGui calls of one frame: call between ImGui::NewFrame() and ImGui::Render().
  void draw();

  // ---- hooks for the platform layer ----
  void set_fonts(const Fonts& normal, const Fonts& present);
  bool present() const { return present_; }
  void set_present(bool present);  // re-styles ImGui; the app follows with full screen
  bool take_present_changed();
  void toggle_help() { help_open_ = !help_open_; }
  bool help_open() const { return help_open_; }
  uint32_t selected_event() { return active_tab() != nullptr ? active_tab()->selected : kNoEvent; }
  void select_event(uint32_t event) {
    if (active_tab() != nullptr) active_tab()->selected = event;
  }
  // Every view (for the View menu and for tests), in menu order.
  std::vector<View*> views() const;
  void request_png() { png_requested_ = true; }
  // The file the app should write this frame to, once per request.
  std::optional<std::filesystem::path> take_png_request();
  void report(std::string message);  // shown for a few seconds ("saved frame.png")
  bool take_fullscreen_toggle();
  void toggle_fullscreen() { fullscreen_toggle_ = true; }
  bool quit_requested() const { return quit_; }

  TimelineView& timeline() { return *timeline_; }
  StageView& stage() { return *stage_; }
  CompareView& compare() { return *compare_; }
  DiagnosisView& diagnosis() { return *diagnosis_; }
  // A panel from another module (the lesson panel), shown at the top of the right column.
  void add_view(std::unique_ptr<View> view);
  // During a lesson's compare chapter the timeline and the inspector show one of the runs on
  // screen (CompareView::followed_run) and every panel's title names the run it shows. For tests:
  // the compare column the last frame's timeline and inspector showed ("" outside a compare
  // chapter), the model they were given, and the title each panel had.
  const std::string& followed_run_label() const { return followed_.label; }
  const ReplayModel* timeline_model() const { return timeline_model_; }
  std::string panel_title(const View* view) const;

 private:
  struct Tab {
    std::unique_ptr<Document> doc;
    Playback playback;
    uint32_t selected = kNoEvent;
    uint64_t attached_generation = 0;
  };
  struct Slot {
    View* view;
    enum class Area { kStage, kTimeline, kRight, kPlayer, kFloating } area;
  };

  Tab* active_tab();
  void attach_if_rebuilt(Tab& tab);
  void handle_keys(Tab* tab);
  void draw_menu();
  void draw_banner(float y, float width);
  void draw_views(Tab* tab, const ReplayState* state);
  void draw_present(ViewContext& ctx, const ReplayState* state, View* top, ImVec2 pos, ImVec2 size);
  void draw_message_screen(const char* title, const std::string& text, const std::string& hint, bool error);
  void draw_help();
  void draw_toast();
  void draw_open_popup();

  ViewerOptions options_;
  bool present_ = false;
  bool present_changed_ = false;
  bool style_dirty_ = true;
  Palette palette_;
  Fonts fonts_normal_;
  Fonts fonts_present_;
  std::vector<Tab> tabs_;
  size_t active_ = 0;
  std::unique_ptr<StageView> stage_;
  std::unique_ptr<CompareView> compare_;
  std::unique_ptr<TimelineView> timeline_;
  std::unique_ptr<InspectorView> inspector_;
  std::unique_ptr<PlotsView> plots_;
  std::unique_ptr<DiagnosisView> diagnosis_;
  std::unique_ptr<PlayerView> player_;
  std::unique_ptr<TraceInfoView> trace_info_;
  std::vector<std::unique_ptr<View>> extra_views_;
  std::vector<Slot> slots_;  // every view, in menu order
  // A compare chapter's run shown in the timeline and inspector when it is not the active
  // document's: its own playhead, set to the chapter's moment in that run, and its own selection.
  struct Followed {
    const ReplayModel* model = nullptr;
    std::optional<int64_t> at_ns;
    Playback playback;
    uint32_t selected = kNoEvent;
    std::string label;             // its compare column's name; "" outside a compare chapter
    bool lesson_own = false;       // it is the lesson's own run (the active document)
    bool compare_chapter = false;  // the lesson's runs are on screen in the stage's place
  };
  Followed followed_;
  const ReplayModel* timeline_model_ = nullptr;
  bool help_open_ = false;
  bool png_requested_ = false;
  int png_counter_ = 0;
  bool fullscreen_toggle_ = false;
  bool quit_ = false;
  bool open_popup_ = false;
  std::string open_path_;
  bool open_follow_ = false;
  std::optional<std::filesystem::path> pending_replace_;
  std::string toast_;
  std::chrono::steady_clock::time_point toast_until_{};
  std::chrono::steady_clock::time_point now_{};
};

}  // namespace dpscope::viz
