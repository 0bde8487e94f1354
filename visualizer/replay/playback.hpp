// Playback: the Player's logic without any drawing — the cursor, play/pause, speed, and in live
// mode whether the playhead sticks to the live edge. The Player view and the keyboard call it;
// tests drive it with fixed time steps. No GL, no ImGui.
#pragma once

#include "replay/replay_model.hpp"

namespace dpscope::viz {

class Playback {
 public:
  // At speed 1 a training step plays in this many seconds (the whole trace when it has no steps
  // plays in kWholeTraceSeconds).
  static constexpr double kStepSeconds = 5.0;
  static constexpr double kWholeTraceSeconds = 20.0;
  static constexpr double kMinSpeed = 0.05;
  static constexpr double kMaxSpeed = 200.0;

  Cursor cursor() const { return cursor_; }
  bool playing() const { return playing_; }
  double speed() const { return speed_; }
  bool at_live_edge() const { return live_edge_; }

  // A (re)built model: keeps the cursor's time (or the live edge) in the new model.
  void attach(const ReplayModel& model, bool live);
  // A seek the user asked for: in live mode this leaves the live edge unless it lands on the end.
  void seek(const ReplayModel& model, Cursor cursor);
  // Back to the live edge (the End key in live mode).
  void go_live(const ReplayModel& model);
  void set_playing(bool playing) { playing_ = playing; }
  void toggle_playing(const ReplayModel& model);
  void set_speed(double speed);
  // Advances the cursor by `dt_s` wall seconds of playback; stops at the end (or stays live).
  void tick(const ReplayModel& model, double dt_s);
  // Trace nanoseconds per wall second at speed 1.
  static double base_rate_ns_per_s(const ReplayModel& model);

 private:
  Cursor cursor_{};
  double play_t_ns_ = 0.0;  // sub-nanosecond remainder of playback
  bool playing_ = false;
  double speed_ = 1.0;
  bool live_ = false;
  bool live_edge_ = false;
  bool attached_ = false;  // a model was attached before (keep the position)
};

}  // namespace dpscope::viz
