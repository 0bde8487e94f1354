// Viewer: documents, layout, menu, banners, keys, help overlay.
//
//   Sections: documents · frame (update, draw) · layout · menu and overlays · keys.
#include "ui/viewer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "ui/draw_util.hpp"
#include "ui/markdown.hpp"

namespace dpscope::viz {

namespace {

constexpr ImGuiWindowFlags kTiledWindow = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                                          ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings |
                                          ImGuiWindowFlags_NoBringToFrontOnFocus;
}  // namespace

float present_text_scale(ImVec2 window) {
  return std::clamp(std::min(window.x / 1280.0f, window.y / 720.0f), 0.75f, 3.0f);
}

Viewer::Viewer(ViewerOptions options)
    : options_(options),
      present_(options.present),
      palette_(options.present ? Palette::classroom() : Palette::normal()),
      stage_(std::make_unique<StageView>()),
      compare_(std::make_unique<CompareView>()),
      timeline_(std::make_unique<TimelineView>()),
      inspector_(std::make_unique<InspectorView>()),
      plots_(std::make_unique<PlotsView>()),
      diagnosis_(std::make_unique<DiagnosisView>()),
      player_(std::make_unique<PlayerView>()),
      trace_info_(std::make_unique<TraceInfoView>()) {
  trace_info_->visible = false;
  compare_->visible = options.compare;
  slots_ = {{stage_.get(), Slot::Area::kStage},       {compare_.get(), Slot::Area::kStage},
            {timeline_.get(), Slot::Area::kTimeline}, {inspector_.get(), Slot::Area::kRight},
            {plots_.get(), Slot::Area::kRight},       {diagnosis_.get(), Slot::Area::kRight},
            {player_.get(), Slot::Area::kPlayer},     {trace_info_.get(), Slot::Area::kFloating}};
}

// ---- documents ----

void Viewer::open(const std::filesystem::path& path, OpenOptions options) {
  add_document(Document::open(path, options));
}

void Viewer::add_document(std::unique_ptr<Document> doc) {
  tabs_.push_back(Tab{std::move(doc), Playback{}, kNoEvent, 0});
  active_ = tabs_.size() - 1;
  attach_if_rebuilt(tabs_.back());
}

Viewer::Tab* Viewer::active_tab() { return active_ < tabs_.size() ? &tabs_[active_] : nullptr; }
Document* Viewer::active_document() { return active_tab() != nullptr ? active_tab()->doc.get() : nullptr; }
Playback* Viewer::active_playback() { return active_tab() != nullptr ? &active_tab()->playback : nullptr; }

void Viewer::seek(Cursor cursor) {
  Tab* tab = active_tab();
  if (tab != nullptr && tab->doc->model() != nullptr) tab->playback.seek(*tab->doc->model(), cursor);
}

void Viewer::replace_active_later(const std::filesystem::path& path) { pending_replace_ = path; }

void Viewer::attach_if_rebuilt(Tab& tab) {
  const ReplayModel* model = tab.doc->model();
  if (model == nullptr || tab.attached_generation == tab.doc->generation()) return;
  tab.playback.attach(*model, tab.doc->following());
  tab.attached_generation = tab.doc->generation();
  if (tab.selected != kNoEvent && tab.selected >= model->data().events.size()) tab.selected = kNoEvent;
}

std::vector<View*> Viewer::views() const {
  std::vector<View*> out;
  for (const Slot& s : slots_) out.push_back(s.view);
  return out;
}

void Viewer::add_view(std::unique_ptr<View> view) {
  // At the top of the right column: a lesson's narration is what the student reads first.
  const auto first_right =
      std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.area == Slot::Area::kRight; });
  slots_.insert(first_right, {view.get(), Slot::Area::kRight});
  extra_views_.push_back(std::move(view));
  // Beside a lesson's narration a fourth panel would leave each too little room: the Diagnosis
  // starts hidden there (the View menu brings it back).
  diagnosis_->visible = false;
}

// ---- frame ----

void Viewer::update(std::chrono::steady_clock::time_point now, double dt_s) {
  now_ = now;
  if (pending_replace_) {
    std::unique_ptr<Document> doc = Document::open(*pending_replace_, OpenOptions{});
    pending_replace_.reset();
    if (Tab* tab = active_tab()) {
      *tab = Tab{std::move(doc), Playback{}, kNoEvent, 0};
      attach_if_rebuilt(*tab);
    } else {
      add_document(std::move(doc));
    }
  }
  for (Tab& tab : tabs_) {
    if (tab.doc->following() && tab.doc->poll(now)) attach_if_rebuilt(tab);
  }
  if (Tab* tab = active_tab(); tab != nullptr && tab->doc->model() != nullptr)
    tab->playback.tick(*tab->doc->model(), dt_s);
}

void Viewer::set_fonts(const Fonts& normal, const Fonts& present) {
  fonts_normal_ = normal;
  fonts_present_ = present;
  style_dirty_ = true;
}

void Viewer::set_present(bool present) {
  if (present == present_) return;
  present_ = present;
  palette_ = present ? Palette::classroom() : Palette::normal();
  present_changed_ = true;
  style_dirty_ = true;
}

bool Viewer::take_present_changed() {
  const bool changed = present_changed_;
  present_changed_ = false;
  return changed;
}

std::optional<std::filesystem::path> Viewer::take_png_request() {
  if (!png_requested_) return std::nullopt;
  png_requested_ = false;
  const Document* doc = active_document();
  const std::string stem = doc != nullptr ? doc->path().stem().string() : "dpscope";
  return std::filesystem::path(fmt::format("dpscope-{}-{:03}.png", stem, ++png_counter_));
}

void Viewer::report(std::string message) {
  toast_ = std::move(message);
  toast_until_ = now_ + std::chrono::seconds(4);
}

bool Viewer::take_fullscreen_toggle() {
  const bool t = fullscreen_toggle_;
  fullscreen_toggle_ = false;
  return t;
}

void Viewer::draw() {
  const Fonts& fonts = present_ ? fonts_present_ : fonts_normal_;
  // Presentation text follows the window's size; the working view keeps its fixed sizes.
  ImGui::GetIO().FontGlobalScale =
      present_ ? present_text_scale(ImGui::GetIO().DisplaySize) / std::max(fonts.raster, 0.1f) : 1.0f;
  // The style follows the palette and the fonts' scale (re-applied when presentation mode changes).
  if (style_dirty_) {
    palette_.apply_to_imgui(fonts.scale);
    style_dirty_ = false;
  }
  if (fonts.body != nullptr) ImGui::PushFont(fonts.body);
  Tab* tab = active_tab();
  handle_keys(tab);
  if (!options_.stage_only) draw_menu();
  std::optional<ReplayState> state;
  if (tab != nullptr && tab->doc->model() != nullptr)
    state = tab->doc->model()->state_at(tab->playback.cursor());
  draw_views(tab, state ? &*state : nullptr);
  if (help_open_) draw_help();
  draw_open_popup();
  draw_toast();
  if (fonts.body != nullptr) ImGui::PopFont();
}

// ---- layout ----

void Viewer::draw_views(Tab* tab, const ReplayState* state) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImVec2 pos = vp->WorkPos;
  ImVec2 size = vp->WorkSize;
  const float fs = ImGui::GetFontSize();
  Document* doc = tab != nullptr ? tab->doc.get() : nullptr;
  if (doc == nullptr) {
    draw_message_screen("dpscope-viz", "Drop a trace file (.jsonl) on this window, or use File > Open trace.",
                        "Make one with: dpscope train --mode ddp --devices 4 --trace run.jsonl", false);
    return;
  }
  if (!doc->error().empty()) {
    draw_message_screen("This trace cannot be shown", doc->error(),
                        "dpscope-viz reads dpscope traces: JSON Lines whose first line is the header "
                        "(docs/trace-format.md).",
                        true);
    return;
  }
  if (doc->model() != nullptr && doc->model()->event_count() == 0 && !doc->warnings().empty() &&
      !doc->following()) {
    draw_message_screen(
        "This trace has no event that could be read", doc->warnings().front(),
        fmt::format("{} problem(s) in all; the first is shown. dpscope-viz reads dpscope traces "
                    "(docs/trace-format.md).",
                    doc->warnings().size()),
        true);
    return;
  }
  if (doc->model() == nullptr || state == nullptr) {
    draw_message_screen("Waiting for the trace", doc->live_status(),
                        "dpscope-viz --follow shows events as they are written (a directory: as every "
                        "process rank has written them).",
                        false);
    return;
  }
  if (!doc->warnings().empty() && !present_) {
    const float banner_h = ImGui::GetFrameHeightWithSpacing() + ImGui::GetStyle().WindowPadding.y;
    draw_banner(pos.y, size.x);
    pos.y += banner_h;
    size.y -= banner_h;
  }

  // The diagnosis costs a pass over the trace: only for the trace on screen, only while its panel
  // is on, and for a live trace only when the throttle says so (replay/diagnosis.hpp). Here, not
  // in update(), so a trace shown for the first time (a tab switch) is diagnosed before the layout
  // decides whether the panel takes room.
  if (diagnosis_->visible) doc->refresh_diagnosis(now_);
  const Fonts& fonts = present_ ? fonts_present_ : fonts_normal_;
  ViewContext ctx;
  ctx.doc = doc;
  for (const Tab& t : tabs_) ctx.documents.push_back(t.doc.get());
  ctx.model = doc->model();
  ctx.state = state;
  ctx.playback = &tab->playback;
  ctx.selected_event = &tab->selected;
  ctx.palette = &palette_;
  ctx.fonts = fonts;
  ctx.present = present_;
  ctx.headless = options_.headless;

  for (const Slot& s : slots_) s.view->before_draw(ctx);
  // Compare takes the stage's place while it is on and there is something to compare: open traces,
  // or the runs a lesson's compare chapter handed it (ui/lesson_view.hpp).
  const bool comparing = compare_->visible && (tabs_.size() >= 2 || compare_->showing_lesson_runs());
  // A compare chapter: the timeline and the inspector show a run that is on screen — the lesson's
  // own when it is a column, else the first column's run, from that run's moment — never one the
  // student cannot see; the panels' titles name the run each shows (panel_title).
  ViewContext followed_ctx = ctx;
  std::optional<ReplayState> followed_state;
  const CompareView::LessonRun* followed =
      comparing && compare_->showing_lesson_runs() ? compare_->followed_run(ctx.model) : nullptr;
  followed_.compare_chapter = comparing && compare_->showing_lesson_runs();
  followed_.label = followed != nullptr ? followed->label : "";
  followed_.lesson_own = followed != nullptr && followed->model == ctx.model;
  if (followed == nullptr || followed_.lesson_own) {
    followed_.model = nullptr;
  } else {
    if (followed_.model != followed->model || followed_.at_ns != followed->at_ns) {
      followed_.model = followed->model;
      followed_.at_ns = followed->at_ns;
      followed_.playback = Playback{};
      followed_.playback.attach(*followed->model, false);
      followed_.playback.seek(*followed->model, followed->at_ns ? followed->model->at_time(*followed->at_ns)
                                                                : followed->model->end());
      followed_.selected = kNoEvent;
    }
    followed_state = followed->model->state_at(followed_.playback.cursor());
    followed_ctx.model = followed->model;
    followed_ctx.state = &*followed_state;
    followed_ctx.playback = &followed_.playback;
    followed_ctx.selected_event = &followed_.selected;
  }
  // Asked again for each panel: a re-run asked for by the lesson panel, drawn earlier in this frame,
  // takes the compared runs (and their models) away at once.
  auto context_of = [&](const View* v) -> ViewContext& {
    if (followed_.model == nullptr || (v != timeline_.get() && v != inspector_.get())) return ctx;
    const CompareView::LessonRun* still = compare_->followed_run(ctx.model);
    return still != nullptr && still->model == followed_.model ? followed_ctx : ctx;
  };
  timeline_model_ = context_of(timeline_.get()).model;
  View* top = comparing ? static_cast<View*>(compare_.get()) : stage_.get();
  const ImGuiWindowFlags canvas = ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse;
  if (options_.stage_only) {
    // Slides: the stage (or the comparison) alone, edge to edge.
    ImGui::SetNextWindowPos(pos);
    ImGui::SetNextWindowSize(size);
    if (ImGui::Begin(top->title(), nullptr, kTiledWindow | canvas | ImGuiWindowFlags_NoTitleBar))
      top->draw(ctx);
    ImGui::End();
    return;
  }
  if (present_) {
    draw_present(ctx, state, top, pos, size);
    return;
  }

  auto shown = [&](const View* v) {
    return v->visible && !(present_ && v->developer_panel()) && v->applies_to(*doc);
  };
  const ImGuiStyle& style = ImGui::GetStyle();
  const float player_h = shown(player_.get())
                             ? ImGui::GetFrameHeight() + ImGui::GetFrameHeightWithSpacing() + fs * 1.3f +
                                   style.ItemSpacing.y * 2 + style.WindowPadding.y * 2 + 4
                             : 0.0f;
  const float timeline_h = shown(timeline_.get()) ? std::round(size.y * (present_ ? 0.24f : 0.31f)) : 0.0f;
  std::vector<View*> right;
  for (const Slot& s : slots_)
    if (s.area == Slot::Area::kRight && shown(s.view)) right.push_back(s.view);
  const bool stage_shown = shown(top);
  const float right_w = right.empty() ? 0.0f : (stage_shown ? std::round(size.x * 0.34f) : size.x);
  const float top_h = size.y - player_h - timeline_h;

  auto place = [&](View* v, ImVec2 p, ImVec2 s, ImGuiWindowFlags extra) {
    if (v == compare_.get() && !shown(v)) return;
    if (s.x < 10 || s.y < 10) return;
    ImGui::SetNextWindowPos(p);
    ImGui::SetNextWindowSize(s);
    bool open = true;
    const std::string title = panel_title(v);
    if (ImGui::Begin(title.c_str(), &open, kTiledWindow | extra)) v->draw(context_of(v));
    ImGui::End();
    if (!open) v->visible = false;
  };
  if (stage_shown) place(top, pos, ImVec2(size.x - right_w, top_h), canvas);
  if (!right.empty()) {
    float y = pos.y;
    float weights = 0.0f;
    for (const View* v : right) weights += v->layout_weight();
    for (size_t i = 0; i < right.size(); ++i) {
      float h = std::round(top_h * right[i]->layout_weight() / weights);
      if (i + 1 == right.size()) h = pos.y + top_h - y;
      place(right[i], ImVec2(pos.x + size.x - right_w, y), ImVec2(right_w, h),
            right[i] == plots_.get() ? canvas : 0);
      y += h;
    }
  }
  if (shown(timeline_.get()))
    place(timeline_.get(), ImVec2(pos.x, pos.y + top_h), ImVec2(size.x, timeline_h), canvas);
  if (shown(player_.get()))
    place(player_.get(), ImVec2(pos.x, pos.y + top_h + timeline_h), ImVec2(size.x, player_h), canvas);
  for (const Slot& s : slots_) {
    if (s.area != Slot::Area::kFloating || !shown(s.view)) continue;
    ImGui::SetNextWindowPos(ImVec2(pos.x + size.x * 0.55f, pos.y + fs * 3), ImGuiCond_FirstUseEver);
    ImGui::SetNextWindowSize(ImVec2(size.x * 0.4f, size.y * 0.4f), ImGuiCond_FirstUseEver);
    bool open = true;
    if (ImGui::Begin(s.view->title(), &open, ImGuiWindowFlags_NoSavedSettings)) s.view->draw(ctx);
    ImGui::End();
    if (!open) s.view->visible = false;
  }
  if (player_->save_png_clicked) request_png();
  if (player_->help_clicked) toggle_help();
  player_->save_png_clicked = false;
  player_->help_clicked = false;
}

std::string Viewer::panel_title(const View* view) const {
  const bool named = view == timeline_.get() || view == inspector_.get() || view == plots_.get() ||
                     view == diagnosis_.get() || view == player_.get();
  if (!followed_.compare_chapter || !named) return view->title();
  // "###" keeps the window's identity whatever the visible title says.
  const bool follows = view == timeline_.get() || view == inspector_.get();
  std::string run = "this lesson's own run (not among the columns above)";
  if (followed_.lesson_own) {
    run = "this run (a column above)";
  } else if (follows && followed_.model != nullptr) {
    run = fmt::format("run '{}' (a column above)", followed_.label);
  }
  return fmt::format("{}: {}###{}", view->title(), run, view->title());
}

// Presentation mode: the stage (or the comparison) and, under it, one caption — the lesson's chapter,
// narration and question, or the step and phase — with the keys that drive the player (nothing else
// competes for the room). Text grows with the window (present_text_scale).
void Viewer::draw_present(ViewContext& ctx, const ReplayState* state, View* top, ImVec2 pos, ImVec2 size) {
  const ImGuiStyle& style = ImGui::GetStyle();
  View* captioner = nullptr;
  for (const Slot& s : slots_)
    if (captioner == nullptr && s.view->present_caption(ctx, size.x, true) >= 0.0f) captioner = s.view;
  // A lesson's caption (chapter, narration, question) is a column beside the stage on a wide
  // screen: below it, it would leave the cards a strip too thin for their rows at a readable size.
  const bool beside = captioner != nullptr && size.x >= size.y * 1.5f;
  const float column_w = beside ? std::round(size.x * 0.34f) : size.x;
  const float wrap = column_w - style.WindowPadding.x * 2 - style.ScrollbarSize;
  std::string caption;
  if (captioner == nullptr) {
    for (const Slot& s : slots_)
      if (caption.empty()) caption = s.view->caption();
    if (caption.empty() && state != nullptr) {
      caption = fmt::format("{} · t = {}", step_phase_label(state->step, state->phase),
                            format_time(state->cursor.t_ns - ctx.model->begin_ns()));
    }
  }
  const std::string keys =
      captioner != nullptr ? "Space: play/pause   PgDn: next step   \u2192: next event   R: reveal   P: "
                             "leave presentation"
                           : "Space: play/pause   \u2192: next event   Shift+\u2192: next phase   PgDn: next "
                             "step   P: leave presentation";
  const float text_h = captioner != nullptr ? captioner->present_caption(ctx, wrap, true)
                                            : measure_markdown(ctx, caption, wrap);
  const float caption_h =
      beside ? size.y
             : std::min(std::round(size.y * 0.4f), text_h + ImGui::GetTextLineHeightWithSpacing() +
                                                       style.WindowPadding.y * 2 + style.ItemSpacing.y);
  const ImVec2 stage_size = beside ? ImVec2(size.x - column_w, size.y) : ImVec2(size.x, size.y - caption_h);
  const ImVec2 caption_pos =
      beside ? ImVec2(pos.x + size.x - column_w, pos.y) : ImVec2(pos.x, pos.y + size.y - caption_h);
  const ImGuiWindowFlags canvas = ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse;
  ImGui::SetNextWindowPos(pos);
  ImGui::SetNextWindowSize(stage_size);
  if (ImGui::Begin(top->title(), nullptr, kTiledWindow | canvas | ImGuiWindowFlags_NoTitleBar))
    top->draw(ctx);
  ImGui::End();
  ImGui::SetNextWindowPos(caption_pos);
  ImGui::SetNextWindowSize(ImVec2(column_w, caption_h));
  if (ImGui::Begin("Caption", nullptr, kTiledWindow | ImGuiWindowFlags_NoTitleBar)) {
    if (captioner != nullptr) {
      captioner->present_caption(ctx, wrap, false);
    } else {
      draw_markdown(ctx, caption, wrap);
    }
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("%s", keys.c_str());
    ImGui::PopTextWrapPos();
  }
  ImGui::End();
}

void Viewer::draw_banner(float y, float width) {
  const Document* doc = active_document();
  ImGui::SetNextWindowPos(ImVec2(ImGui::GetMainViewport()->WorkPos.x, y));
  ImGui::SetNextWindowSize(
      ImVec2(width, ImGui::GetFrameHeightWithSpacing() + ImGui::GetStyle().WindowPadding.y));
  ImGui::Begin("##problems", nullptr,
               kTiledWindow | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoScrollbar);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette_.warning),
                     "%zu problem(s) reading this trace; first: %s", doc->warnings().size(),
                     doc->warnings().front().c_str());
  ImGui::SameLine();
  if (ImGui::SmallButton("details")) trace_info_->visible = true;
  ImGui::End();
}

void Viewer::draw_message_screen(const char* title, const std::string& text, const std::string& hint,
                                 bool error) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::Begin("##message", nullptr, kTiledWindow | ImGuiWindowFlags_NoTitleBar);
  const float fs = ImGui::GetFontSize();
  ImGui::SetCursorPos(ImVec2(fs * 2, vp->WorkSize.y * 0.3f));
  const Fonts& fonts = present_ ? fonts_present_ : fonts_normal_;
  if (fonts.bold != nullptr) ImGui::PushFont(fonts.bold);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(error ? palette_.error : palette_.text), "%s", title);
  if (fonts.bold != nullptr) ImGui::PopFont();
  ImGui::SetCursorPosX(fs * 2);
  ImGui::PushTextWrapPos(vp->WorkSize.x - fs * 2);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(error ? palette_.error : palette_.text), "%s",
                     text.c_str());
  ImGui::Spacing();
  ImGui::SetCursorPosX(fs * 2);
  ImGui::TextDisabled("%s", hint.c_str());
  ImGui::PopTextWrapPos();
  ImGui::End();
}

// ---- menu and overlays ----

void Viewer::draw_menu() {
  if (!ImGui::BeginMainMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open trace...")) open_popup_ = true;
    if (ImGui::MenuItem("Save PNG", "F12")) request_png();
    ImGui::Separator();
    if (ImGui::MenuItem("Quit")) quit_ = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    const Document* doc = active_document();
    for (const Slot& s : slots_)
      ImGui::MenuItem(
          s.view->title(), nullptr, &s.view->visible,
          !(present_ && s.view->developer_panel()) && (doc == nullptr || s.view->applies_to(*doc)));
    ImGui::Separator();
    if (ImGui::MenuItem("Presentation mode", "P", present_)) set_present(!present_);
    if (ImGui::MenuItem("Full screen", "F11")) fullscreen_toggle_ = true;
    if (ImGui::MenuItem("Fit timeline", "F")) timeline_->fit();
    ImGui::EndMenu();
  }
  if (tabs_.size() > 1 && ImGui::BeginMenu("Traces")) {
    for (size_t i = 0; i < tabs_.size(); ++i)
      if (ImGui::MenuItem(tabs_[i].doc->display_name().c_str(), nullptr, i == active_)) active_ = i;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    if (ImGui::MenuItem("Keys and colours", "? or F1")) toggle_help();
    ImGui::EndMenu();
  }
  if (const Document* doc = active_document()) {
    ImGui::Separator();
    ImGui::TextUnformatted(doc->display_name().c_str());
    if (doc->following()) {
      ImGui::SameLine();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette_.comm), "%s", doc->live_status().c_str());
    }
  }
  ImGui::EndMainMenuBar();
}

void Viewer::draw_help() {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(
      ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.5f), ImGuiCond_Always,
      ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowBgAlpha(0.96f);
  if (!ImGui::Begin("Keys and colours", &help_open_,
                    ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings |
                        ImGuiWindowFlags_NoCollapse)) {
    ImGui::End();
    return;
  }
  static constexpr const char* kKeys[][2] = {
      {"Space", "play / pause"},
      {"Right / Left", "next / previous event"},
      {"Shift + Right / Left", "next / previous phase"},
      {"Ctrl + Right / Left, Page Down / Up", "next / previous training step"},
      {"Home / End", "start / end (End in live mode: back to the live edge)"},
      {"+ / -", "faster / slower"},
      {"F", "fit the timeline to the whole trace"},
      {"P", "presentation mode (large, high contrast)"},
      {"R", "lesson: reveal the answer to the chapter's next question"},
      {"F11", "full screen"},
      {"F12", "save this frame as PNG"},
      {"? or F1", "this help"},
      {"Esc", "close this help / clear the selection"},
      {"Timeline",
       "wheel: zoom · drag: pan · right-drag: measure · click: inspect · double-click or ruler: move "
       "playhead"},
  };
  if (ImGui::BeginTable("keys", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    for (const auto& k : kKeys) {
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextUnformatted(k[0]);
      ImGui::TableSetColumnIndex(1);
      ImGui::TextUnformatted(k[1]);
    }
    ImGui::EndTable();
  }
  ImGui::Separator();
  ImGui::TextUnformatted("Colours");
  legend_entry(palette_.forward, "forward");
  ImGui::SameLine();
  legend_entry(palette_.backward, "backward");
  ImGui::SameLine();
  legend_entry(palette_.optimizer, "optimizer step");
  ImGui::SameLine();
  legend_entry(palette_.data, "data loading");
  legend_entry(palette_.comm, "collectives (all-reduce, ring steps)");
  ImGui::SameLine();
  legend_entry(palette_.copy, "copies (host<->GPU, scatter, gather)");
  ImGui::SameLine();
  legend_entry(palette_.idle, "idle");
  legend_entry(palette_.merged, "many small events merged (zoom in)");
  ImGui::SameLine();
  legend_entry(palette_.playhead, "playhead");
  ImGui::End();
}

void Viewer::draw_toast() {
  if (toast_.empty() || options_.headless || now_ > toast_until_) return;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x - 10, vp->WorkPos.y + 10), ImGuiCond_Always,
                          ImVec2(1, 0));
  ImGui::SetNextWindowBgAlpha(0.9f);
  ImGui::Begin("##toast", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoInputs |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoFocusOnAppearing);
  ImGui::TextUnformatted(toast_.c_str());
  ImGui::End();
}

void Viewer::draw_open_popup() {
  if (!open_popup_) return;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(
      ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.35f),
      ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  if (ImGui::Begin("Open trace", &open_popup_,
                   ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings)) {
    char buffer[1024];
    std::snprintf(buffer, sizeof(buffer), "%s", open_path_.c_str());
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 30);
    if (ImGui::InputText("path", buffer, sizeof(buffer))) open_path_ = buffer;
    ImGui::Checkbox("follow (a live file, or a directory of rank-K.jsonl files)", &open_follow_);
    if (ImGui::Button("Open") && !open_path_.empty()) {
      open(open_path_, OpenOptions{.strict = false, .follow = open_follow_});
      open_popup_ = false;
    }
  }
  ImGui::End();
}

// ---- keys ----

void Viewer::handle_keys(Tab* tab) {
  if (options_.headless) return;
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  for (ImWchar c : io.InputQueueCharacters) {
    bool used = false;
    for (const Slot& s : slots_) used = used || s.view->handle_char(c);
    if (used) continue;
    switch (c) {
      case '?': toggle_help(); break;
      case 'f':
      case 'F': timeline_->fit(); break;
      case 'p':
      case 'P': set_present(!present_); break;
      case '+':
      case '=':
        if (tab != nullptr) tab->playback.set_speed(tab->playback.speed() * 1.5);
        break;
      case '-':
        if (tab != nullptr) tab->playback.set_speed(tab->playback.speed() / 1.5);
        break;
      default: break;
    }
  }
  auto pressed = [](ImGuiKey key) { return ImGui::IsKeyPressed(ImGui::GetKeyIndex(key)); };
  if (pressed(ImGuiKey_Escape)) {
    if (help_open_) {
      help_open_ = false;
    } else if (tab != nullptr) {
      tab->selected = kNoEvent;
    }
  }
  if (tab == nullptr || tab->doc->model() == nullptr) return;
  PlayerAction action = PlayerAction::kNone;
  if (pressed(ImGuiKey_Space)) action = PlayerAction::kTogglePlay;
  if (pressed(ImGuiKey_RightArrow))
    action = io.KeyCtrl ? PlayerAction::kNextStep
                        : (io.KeyShift ? PlayerAction::kNextPhase : PlayerAction::kNextEvent);
  if (pressed(ImGuiKey_LeftArrow))
    action = io.KeyCtrl ? PlayerAction::kPrevStep
                        : (io.KeyShift ? PlayerAction::kPrevPhase : PlayerAction::kPrevEvent);
  if (pressed(ImGuiKey_PageDown)) action = PlayerAction::kNextStep;
  if (pressed(ImGuiKey_PageUp)) action = PlayerAction::kPrevStep;
  if (pressed(ImGuiKey_Home)) action = PlayerAction::kStart;
  if (pressed(ImGuiKey_End)) action = PlayerAction::kEnd;
  apply_player_action(action, *tab->doc->model(), tab->playback, tab->doc->following());
}

}  // namespace dpscope::viz
