// Playback: cursor movement over time, speed, live edge.
#include "replay/playback.hpp"

#include <algorithm>
#include <cmath>

namespace dpscope::viz {

double Playback::base_rate_ns_per_s(const ReplayModel& model) {
  const double span = static_cast<double>(std::max<int64_t>(model.end_ns() - model.begin_ns(), 1));
  const size_t steps = model.step_marks().size();
  const double rate =
      steps > 0 ? span / static_cast<double>(steps) / kStepSeconds : span / kWholeTraceSeconds;
  return std::max(rate, 1.0);
}

void Playback::attach(const ReplayModel& model, bool live) {
  live_ = live;
  if (live_ && (live_edge_ || !attached_)) {
    live_edge_ = true;
    cursor_ = model.live_edge();
  } else if (!attached_) {
    cursor_ = model.start();
  } else {
    cursor_ = model.at_time(std::clamp(cursor_.t_ns, model.begin_ns(), model.end_ns()));
  }
  attached_ = true;
  play_t_ns_ = static_cast<double>(cursor_.t_ns);
}

void Playback::seek(const ReplayModel& model, Cursor cursor) {
  cursor_ = cursor;
  play_t_ns_ = static_cast<double>(cursor.t_ns);
  if (live_) live_edge_ = cursor.seq >= model.live_edge().seq && cursor.t_ns >= model.live_edge().t_ns;
}

void Playback::go_live(const ReplayModel& model) {
  live_edge_ = live_;
  seek(model, live_ ? model.live_edge() : model.end());
  if (live_) live_edge_ = true;
}

void Playback::toggle_playing(const ReplayModel& model) {
  playing_ = !playing_;
  // Play at the end starts over.
  if (playing_ && cursor_.seq >= model.event_count() && cursor_.t_ns >= model.end_ns() && !live_)
    seek(model, model.start());
}

void Playback::set_speed(double speed) { speed_ = std::clamp(speed, kMinSpeed, kMaxSpeed); }

void Playback::tick(const ReplayModel& model, double dt_s) {
  if (live_edge_) {
    cursor_ = model.live_edge();
    play_t_ns_ = static_cast<double>(cursor_.t_ns);
    return;
  }
  if (!playing_ || dt_s <= 0.0) return;
  play_t_ns_ += dt_s * speed_ * base_rate_ns_per_s(model);
  if (live_ && play_t_ns_ >= static_cast<double>(model.live_edge().t_ns)) {
    cursor_ = model.live_edge();  // caught up with a live file
    play_t_ns_ = static_cast<double>(cursor_.t_ns);
    live_edge_ = true;
    return;
  }
  if (play_t_ns_ >= static_cast<double>(model.end_ns())) {
    cursor_ = model.end();
    play_t_ns_ = static_cast<double>(cursor_.t_ns);
    if (live_) {
      live_edge_ = true;
    } else {
      playing_ = false;
    }
    return;
  }
  cursor_ = model.at_time(static_cast<int64_t>(std::floor(play_t_ns_)));
}

}  // namespace dpscope::viz
