// Player: play/pause, speed, step to the previous/next event, phase or training step, a scrubber
// over the whole trace (with the phases drawn on it and a tick per step), the live indicator in
// --follow mode, and "Save PNG". The same actions are on the keyboard (Viewer::handle_keys).
#pragma once

#include "ui/view.hpp"

namespace dpscope::viz {

// What the Player and the keyboard can ask for.
enum class PlayerAction {
  kNone,
  kStart,
  kPrevStep,
  kPrevPhase,
  kPrevEvent,
  kTogglePlay,
  kNextEvent,
  kNextPhase,
  kNextStep,
  kEnd
};
// Applies `action` to the playback of `model`.
void apply_player_action(PlayerAction action, const ReplayModel& model, Playback& playback, bool live);

class PlayerView final : public View {
 public:
  const char* title() const override { return "Player"; }
  void draw(ViewContext& ctx) override;

  bool save_png_clicked = false;  // read and reset by the Viewer
  bool help_clicked = false;

 private:
  void draw_scrubber(ViewContext& ctx);
  bool scrubbing_ = false;
};

}  // namespace dpscope::viz
