// Timeline lanes. Every lane derives from TimelineLane (a label, a height, draw its contents for
// the visible time range), like Tracy's timeline items; the Timeline view stacks them:
//   PhaseLane – the reference rank's steps and phases as coloured bands ("step 2 · backward");
//   SpanLane  – one device × stream: nested spans and transfers, merged by level of detail when
//               narrower than ~3 px (one box with a count), instants as ticks on the compute lane.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <imgui.h>

#include "replay/replay_model.hpp"
#include "ui/palette.hpp"

namespace dpscope::viz {

// Where the fill of a span drawn from x `xa` to `xb` ends: one pixel short of its end when it is
// 3 pixels wide or more, so that two spans that nearly touch (the next starts less than a pixel
// later) stay two boxes at every zoom; narrower spans keep their width.
inline float span_fill_end_px(float xa, float xb) { return xb - xa >= 3.0f ? xb - 1.0f : xb; }

// What all lanes share in one frame.
struct TimelineFrame {
  const ReplayModel* model = nullptr;
  const Palette* palette = nullptr;
  ImDrawList* dl = nullptr;
  ImFont* font = nullptr;
  float font_size = 13.0f;
  double t0_ns = 0;  // visible range
  double t1_ns = 0;
  float x0 = 0;  // screen x of t0 and t1
  float x1 = 0;
  float row_h = 16;
  bool interactive = true;  // hover and click (off in headless)
  uint32_t selected = kNoEvent;
  // Outputs of drawing, read by the view after all lanes.
  uint32_t hovered = kNoEvent;
  size_t boxes_drawn = 0;
  size_t merged_boxes = 0;
  struct FlowEnd {
    uint32_t event;
    float x_start;
    float x_end;
    float y;  // centre of the source lane row
  };
  std::vector<FlowEnd> flows;  // transfers drawn as single boxes (arrows start here)
  std::vector<LodBox> scratch;

  float x_of(double t_ns) const {
    return x0 + static_cast<float>((t_ns - t0_ns) / (t1_ns - t0_ns)) * (x1 - x0);
  }
  double ns_per_px() const { return (t1_ns - t0_ns) / std::max(1.0f, x1 - x0); }
};

class TimelineLane {
 public:
  virtual ~TimelineLane() = default;
  virtual std::string label() const = 0;
  virtual ImU32 label_color(const Palette& palette) const { return palette.text; }
  // Rows this lane needs (each row_h high).
  virtual int rows() const = 0;
  // Draws the lane's contents in [frame.x0, frame.x1] × [y, y + rows() * row_h).
  virtual void draw(TimelineFrame& frame, float y) = 0;
  // The device (index) whose lanes a flow arrow should end on, or -1.
  virtual int device() const { return -1; }
  virtual StreamKind stream() const { return StreamKind::kCompute; }
};

class PhaseLane final : public TimelineLane {
 public:
  explicit PhaseLane(const ReplayModel& model);
  std::string label() const override { return "step · phase"; }
  int rows() const override { return 1; }
  void draw(TimelineFrame& frame, float y) override;

 private:
  std::vector<TimeInterval> bands_;  // one per phase mark, parallel to ReplayModel::phase_marks()
};

class SpanLane final : public TimelineLane {
 public:
  static constexpr int kMaxRows = 6;  // deeper nesting is drawn on the last row
  SpanLane(const ReplayModel& model, int lane_index);
  std::string label() const override { return label_; }
  int rows() const override;
  void draw(TimelineFrame& frame, float y) override;
  int device() const override;
  StreamKind stream() const override;

 private:
  void draw_instants(TimelineFrame& frame, float y);

  const ReplayModel& model_;
  int lane_;
  std::string label_;
  bool show_instants_ = false;  // the device's first lane carries its instants
};

// The lanes for `model`: the phase lane, then one SpanLane per (device, stream) in device order.
std::vector<std::unique_ptr<TimelineLane>> build_lanes(const ReplayModel& model);

}  // namespace dpscope::viz
