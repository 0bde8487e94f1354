// Player view: transport buttons, speed, scrubber, live indicator.
#include "ui/player_view.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "replay/seek.hpp"
#include "ui/draw_util.hpp"

namespace dpscope::viz {

void apply_player_action(PlayerAction action, const ReplayModel& model, Playback& playback, bool live) {
  const Cursor c = playback.cursor();
  switch (action) {
    case PlayerAction::kNone: return;
    case PlayerAction::kStart: playback.seek(model, model.start()); break;
    case PlayerAction::kPrevStep: playback.seek(model, model.prev_step(c)); break;
    case PlayerAction::kPrevPhase: playback.seek(model, model.prev_phase(c)); break;
    case PlayerAction::kPrevEvent: playback.seek(model, model.prev_event(c)); break;
    case PlayerAction::kTogglePlay: playback.toggle_playing(model); return;
    case PlayerAction::kNextEvent: playback.seek(model, model.next_event(c)); break;
    case PlayerAction::kNextPhase: playback.seek(model, model.next_phase(c)); break;
    case PlayerAction::kNextStep: playback.seek(model, model.next_step(c)); break;
    case PlayerAction::kEnd:
      if (live) {
        playback.go_live(model);
      } else {
        playback.seek(model, model.end());
      }
      break;
  }
  // Stepping pauses playback, so the student can look.
  playback.set_playing(false);
}

void PlayerView::draw_scrubber(ViewContext& ctx) {
  const ReplayModel& model = *ctx.model;
  const Palette& pal = *ctx.palette;
  const float fs = ImGui::GetFontSize();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetContentRegionAvail().x;
  const float h = fs * 1.3f;
  ImGui::InvisibleButton("##scrubber", ImVec2(w, h));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const double span = static_cast<double>(std::max<int64_t>(model.end_ns() - model.begin_ns(), 1));
  auto x_of = [&](int64_t t) {
    return p0.x + static_cast<float>(static_cast<double>(t - model.begin_ns()) / span) * w;
  };
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + h), pal.card, 3.0f);
  // The reference rank's phases along the whole trace, merged below a pixel.
  const auto& marks = model.phase_marks();
  float last_x = -1.0f;
  for (size_t i = 0; i < marks.size(); ++i) {
    const float xa = x_of(marks[i].ts_ns);
    const float xb = x_of(i + 1 < marks.size() ? marks[i + 1].ts_ns : model.end_ns());
    if (xb < last_x + 1.0f && i + 1 < marks.size()) continue;
    dl->AddRectFilled(ImVec2(std::max(xa, last_x), p0.y + h * 0.25f),
                      ImVec2(std::max(xb, xa + 1), p0.y + h * 0.75f),
                      with_alpha(pal.phase_color(marks[i].phase), 0.8f));
    last_x = xb;
  }
  float last_tick = -100.0f;
  for (const StepMark& m : model.step_marks()) {
    const float x = x_of(m.ts_ns);
    if (x - last_tick < 4.0f) continue;
    dl->AddLine(ImVec2(x, p0.y), ImVec2(x, p0.y + h), pal.text_dim);
    last_tick = x;
  }
  const float px = x_of(ctx.state->cursor.t_ns);
  dl->AddRectFilled(ImVec2(px - 3, p0.y - 2), ImVec2(px + 3, p0.y + h + 2), pal.playhead, 2.0f);
  if (!ctx.headless) {
    if (ImGui::IsItemActivated()) scrubbing_ = true;
    if (scrubbing_ && ImGui::IsMouseDown(0)) {
      const double f = std::clamp(static_cast<double>((ImGui::GetIO().MousePos.x - p0.x) / w), 0.0, 1.0);
      ctx.seek(model.at_fraction(f));
    }
    if (!ImGui::IsMouseDown(0)) scrubbing_ = false;
    if (ImGui::IsItemHovered() && !scrubbing_)
      ImGui::SetTooltip("drag to move the playhead; ticks mark training steps");
  }
}

void PlayerView::draw(ViewContext& ctx) {
  if (ctx.model == nullptr || ctx.playback == nullptr) return;
  const ReplayModel& model = *ctx.model;
  Playback& playback = *ctx.playback;
  const bool live = ctx.doc != nullptr && ctx.doc->following();
  PlayerAction action = PlayerAction::kNone;
  auto button = [&](const char* label, PlayerAction a, const char* tip) {
    if (ImGui::Button(label)) action = a;
    if (!ctx.headless && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
    ImGui::SameLine();
  };
  button("|<", PlayerAction::kStart, "start (Home)");
  button("< step", PlayerAction::kPrevStep, "previous training step (Ctrl+Left or Page Up)");
  button("< phase", PlayerAction::kPrevPhase, "previous phase (Shift+Left)");
  button("< event", PlayerAction::kPrevEvent, "previous event (Left)");
  button(playback.playing() ? "  Pause  " : "  Play  ", PlayerAction::kTogglePlay, "play / pause (Space)");
  button("event >", PlayerAction::kNextEvent, "next event (Right)");
  button("phase >", PlayerAction::kNextPhase, "next phase (Shift+Right)");
  button("step >", PlayerAction::kNextStep, "next training step (Ctrl+Right or Page Down)");
  button(">|", PlayerAction::kEnd, live ? "back to the live edge (End)" : "end (End)");
  apply_player_action(action, model, playback, live);

  float speed = static_cast<float>(playback.speed());
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 9);
  if (ImGui::SliderFloat("##speed", &speed, static_cast<float>(Playback::kMinSpeed),
                         static_cast<float>(Playback::kMaxSpeed), "speed %.2fx",
                         ImGuiSliderFlags_Logarithmic))
    playback.set_speed(speed);
  if (!ctx.headless && ImGui::IsItemHovered())
    ImGui::SetTooltip("at 1x a training step plays in %.0f s (+ / - change it)", Playback::kStepSeconds);
  ImGui::SameLine();
  if (live) {
    const bool at_edge = playback.at_live_edge();
    ImGui::PushStyleColor(ImGuiCol_Button,
                          ImGui::ColorConvertU32ToFloat4(at_edge ? ctx.palette->comm : ctx.palette->idle));
    if (ImGui::Button(at_edge ? "LIVE" : "go live")) playback.go_live(model);
    ImGui::PopStyleColor();
    ImGui::SameLine();
  }
  if (ImGui::Button("Save PNG")) save_png_clicked = true;
  if (!ctx.headless && ImGui::IsItemHovered()) ImGui::SetTooltip("save this frame as a PNG (F12)");
  ImGui::SameLine();
  if (ImGui::Button("?")) help_clicked = true;
  if (!ctx.headless && ImGui::IsItemHovered()) ImGui::SetTooltip("keys and colours (? or F1)");
  ImGui::SameLine();
  const Cursor c = playback.cursor();
  const std::string where =
      ctx.state != nullptr ? step_position_label(ctx.state->step, model.first_step(), model.last_step()) : "";
  ImGui::TextUnformatted(where.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("t = %s / %s · event %u of %zu", format_time(c.t_ns - model.begin_ns()).c_str(),
                      format_time(model.end_ns() - model.begin_ns()).c_str(), c.seq, model.event_count());
  draw_scrubber(ctx);
}

}  // namespace dpscope::viz
