// Timeline: one lane per device × stream (plus the step/phase band), a time ruler, the playhead,
// flow arrows for transfers. Wheel zooms around the mouse, left-drag pans, right-drag selects a
// range (its length is shown; "Zoom to selection" fits it), click selects an event for the
// Inspector, a click or drag on the ruler and a double click move the playhead. Level of detail:
// each lane finds its visible items by binary search and merges runs narrower than ~3 px.
#pragma once

#include <memory>
#include <vector>

#include "replay/seek.hpp"
#include "ui/timeline_lanes.hpp"
#include "ui/view.hpp"

namespace dpscope::viz {

class TimelineView final : public View {
 public:
  const char* title() const override { return "Timeline"; }
  void draw(ViewContext& ctx) override;

  // Shows the whole trace (and keeps doing so as a live trace grows) until the user zooms.
  void fit();
  // How the timeline opens each document it is shown (default: the step under the playhead).
  void set_open_zoom(ZoomSpec zoom) {
    open_zoom_ = zoom;
    pending_open_ = true;
  }
  void set_range(double t0_ns, double t1_ns);
  double range_begin() const { return t0_; }
  double range_end() const { return t1_; }
  bool fitted() const { return fitted_; }
  // Boxes drawn in the last frame, and how many of them stood for several events.
  size_t boxes_drawn() const { return boxes_drawn_; }
  size_t merged_boxes() const { return merged_boxes_; }

  bool follow_playhead = true;  // keep the playhead in view while playing or stepping

 private:
  void sync_lanes(const ViewContext& ctx);
  void handle_input(ViewContext& ctx, ImVec2 canvas0, ImVec2 canvas1, float lanes_x0, float ruler_y1);
  void draw_ruler(const ViewContext& ctx, ImDrawList* dl, float x0, float x1, float y0, float y1);
  // The parts of draw().
  void follow_range(const ReplayModel& model, Cursor cursor, int64_t cursor_step);
  void draw_toolbar(const ViewContext& ctx);
  std::vector<float> layout_lanes(TimelineFrame& f, float lanes_y0, float end_y);
  void draw_flows(const TimelineFrame& f, const std::vector<float>& top) const;
  void draw_overlays(const ViewContext& ctx, const TimelineFrame& f, ImVec2 origin, ImVec2 end,
                     float lanes_y0, float ruler_y1);

  std::vector<std::unique_ptr<TimelineLane>> lanes_;
  const Document* lanes_doc_ = nullptr;
  uint64_t lanes_generation_ = 0;
  const ReplayModel* model_ = nullptr;
  double t0_ = 0.0;
  double t1_ = 1.0;
  bool fitted_ = false;
  ZoomSpec open_zoom_;        // applied when a document is first shown
  bool pending_open_ = true;  // the next frame applies open_zoom_
  float scroll_y_ = 0.0f;
  Cursor last_cursor_{};
  // interaction
  bool left_down_in_lanes_ = false;
  bool panning_ = false;
  bool seeking_ = false;
  float press_x_ = 0.0f;
  double press_t0_ = 0.0;
  bool selecting_ = false;
  bool has_selection_ = false;
  double sel_a_ = 0.0;
  double sel_b_ = 0.0;
  size_t boxes_drawn_ = 0;
  size_t merged_boxes_ = 0;
  uint32_t hovered_ = kNoEvent;
};

}  // namespace dpscope::viz
