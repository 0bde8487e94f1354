// Timeline lanes: phase bands and device × stream span lanes with level of detail.
#include "ui/timeline_lanes.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ui/draw_util.hpp"

namespace dpscope::viz {

namespace {

// [t0, t1) as integer nanoseconds covering the visible range.
std::pair<int64_t, int64_t> visible_ns(const TimelineFrame& f) {
  return {static_cast<int64_t>(std::floor(f.t0_ns)), static_cast<int64_t>(std::ceil(f.t1_ns)) + 1};
}

int64_t min_box_ns(const TimelineFrame& f) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::llround(3.0 * f.ns_per_px())));
}

bool hovering(const TimelineFrame& f, ImVec2 a, ImVec2 b) {
  return f.interactive && ImGui::IsMouseHoveringRect(a, b, false);
}

}  // namespace

// ---- PhaseLane ----

PhaseLane::PhaseLane(const ReplayModel& model) {
  const auto& marks = model.phase_marks();
  for (size_t i = 0; i < marks.size(); ++i) {
    const int64_t end = i + 1 < marks.size() ? marks[i + 1].ts_ns : model.end_ns();
    bands_.push_back({marks[i].ts_ns, std::max(end, marks[i].ts_ns)});
  }
}

void PhaseLane::draw(TimelineFrame& f, float y) {
  const auto [t0, t1] = visible_ns(f);
  f.scratch.clear();
  merge_for_display(IntervalLevel(bands_), t0, t1, min_box_ns(f), f.scratch);
  const auto& marks = f.model->phase_marks();
  for (const LodBox& box : f.scratch) {
    const float xa = std::max(f.x_of(static_cast<double>(box.start_ns)), f.x0);
    const float xb = std::max(std::min(f.x_of(static_cast<double>(box.end_ns)), f.x1), xa + 1.0f);
    const ImVec2 a(xa, y + 1);
    const ImVec2 b(xb, y + f.row_h - 1);
    if (box.count == 1) {
      const PhaseMark& m = marks[box.first];
      const ImU32 fill = f.palette->phase_color(m.phase);
      f.dl->AddRectFilled(a, b, fill);
      const std::string label = step_phase_label(m.step, m.phase);
      if (xb - xa > f.font_size * 2) {
        const ImVec4 clip(a.x + 2, a.y, b.x - 2, b.y);
        draw_text(f.dl, f.font, f.font_size, ImVec2(a.x + 3, y + (f.row_h - f.font_size) * 0.5f),
                  f.palette->text_on(fill), label, &clip);
      }
      if (hovering(f, a, b)) ImGui::SetTooltip("%s", label.c_str());
    } else {
      f.dl->AddRectFilled(a, b, f.palette->merged);
      if (hovering(f, a, b)) ImGui::SetTooltip("%u phases (zoom in to see them)", box.count);
    }
  }
}

// ---- SpanLane ----

SpanLane::SpanLane(const ReplayModel& model, int lane_index) : model_(model), lane_(lane_index) {
  const ModelLane& lane = model.lanes()[lane_index];
  const ModelDevice& dev = model.devices()[lane.device];
  label_ = fmt::format("{} · {}", device_label(dev), to_string(lane.stream));
  // The first lane of a device shows its instants (grad_ready, bucket launched/done, ...).
  show_instants_ = true;
  for (int s = 0; s < static_cast<int>(lane.stream); ++s)
    if (model.lane_index(lane.device, static_cast<StreamKind>(s)) >= 0) show_instants_ = false;
}

int SpanLane::rows() const {
  return std::clamp(static_cast<int>(model_.lanes()[lane_].levels.size()), 1, kMaxRows);
}

int SpanLane::device() const { return model_.lanes()[lane_].device; }
StreamKind SpanLane::stream() const { return model_.lanes()[lane_].stream; }

void SpanLane::draw(TimelineFrame& f, float y) {
  const ModelLane& lane = model_.lanes()[lane_];
  const trace::TraceData& data = model_.data();
  const auto [t0, t1] = visible_ns(f);
  const int64_t min_ns = min_box_ns(f);
  const int max_row = rows() - 1;
  for (size_t level = 0; level < lane.levels.size(); ++level) {
    const EventLevel items = model_.level(lane, level);
    const float ry = y + static_cast<float>(std::min<int>(static_cast<int>(level), max_row)) * f.row_h;
    f.scratch.clear();
    merge_for_display(items, t0, t1, min_ns, f.scratch);
    for (const LodBox& box : f.scratch) {
      const float xa = std::max(f.x_of(static_cast<double>(box.start_ns)), f.x0 - 2);
      float xb = std::min(f.x_of(static_cast<double>(box.end_ns)), f.x1 + 2);
      if (box.count > 1) xb = std::max(xb, xa + 3.0f);
      xb = std::max(xb, xa + 1.0f);
      const ImVec2 a(xa, ry + 1);
      ImVec2 b(xb, ry + f.row_h - 1);
      ++f.boxes_drawn;
      if (box.count == 1) {
        // Spans a few nanoseconds apart (two kernels 80 ns apart) keep a gap between their boxes.
        b.x = span_fill_end_px(xa, xb);
        const uint32_t ev = items.event(box.first);
        const trace::Event& e = data.events[ev];
        const ImU32 fill = f.palette->event_color(data, e);
        f.dl->AddRectFilled(a, b, fill);
        if (ev == f.selected)
          f.dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), f.palette->selection, 0, 0, 2.0f);
        if (xb - xa > f.font_size * 1.5f) {
          const ImVec4 clip(std::max(a.x, f.x0) + 2, a.y, std::min(b.x, f.x1) - 2, b.y);
          draw_text(f.dl, f.font, f.font_size,
                    ImVec2(std::max(a.x, f.x0) + 3, ry + (f.row_h - f.font_size) * 0.5f),
                    f.palette->text_on(fill), data.str(e.name), &clip);
        }
        if (e.type == trace::EventType::kTransfer)
          f.flows.push_back({ev, f.x_of(static_cast<double>(e.ts_ns)),
                             f.x_of(static_cast<double>(e.end_ns())), ry + f.row_h * 0.5f});
        if (hovering(f, a, b)) f.hovered = ev;
      } else {
        ++f.merged_boxes;
        const uint32_t first_event = items.event(box.first);
        const ImU32 fill = shade(f.palette->event_color(data, data.events[first_event]), -0.35f);
        f.dl->AddRectFilled(a, b, fill);
        // Hatch marks say "many events here".
        for (float hx = a.x + 2; hx < b.x - 1; hx += 6)
          f.dl->AddLine(ImVec2(hx, b.y - 1), ImVec2(std::min(hx + 4, b.x), a.y + 1),
                        with_alpha(f.palette->merged, 0.6f));
        const std::string count = fmt::format("{}", box.count);
        if (xb - xa > text_size(f.font, f.font_size, count).x + 6) {
          const ImVec4 clip(a.x, a.y, b.x, b.y);
          draw_text(f.dl, f.font, f.font_size, ImVec2(a.x + 3, ry + (f.row_h - f.font_size) * 0.5f),
                    f.palette->text, count, &clip);
        }
        if (hovering(f, a, b)) ImGui::SetTooltip("%u events merged (zoom in to see them)", box.count);
      }
    }
  }
  if (show_instants_) draw_instants(f, y);
}

void SpanLane::draw_instants(TimelineFrame& f, float y) {
  const int device = model_.lanes()[lane_].device;
  const std::vector<uint32_t>& positions = model_.instants(device);
  const trace::TraceData& data = model_.data();
  // The first instant from index `from` at or after time t (integer times: ts >= t is ts >= ceil(t)).
  auto first_at_or_after = [&](size_t from, double t_ns) {
    return model_.first_instant_at_or_after(device, from, static_cast<int64_t>(std::ceil(t_ns)));
  };
  const float size = f.row_h * 0.32f;
  size_t k = first_at_or_after(0, f.t0_ns);
  while (k < positions.size() && static_cast<double>(model_.ts_at(positions[k])) <= f.t1_ns) {
    const uint32_t ev = model_.event_at(positions[k]);
    const trace::Event& e = data.events[ev];
    const float x = f.x_of(static_cast<double>(e.ts_ns));
    ImU32 color = f.palette->text_dim;
    if (e.known == EventName::kGradReady) color = shade(f.palette->backward, 0.45f);
    if (e.known == EventName::kBucketLaunched) color = f.palette->comm;
    if (e.known == EventName::kBucketDone) color = f.palette->optimizer;
    f.dl->AddTriangleFilled(ImVec2(x - size * 0.6f, y), ImVec2(x + size * 0.6f, y), ImVec2(x, y + size),
                            color);
    if (hovering(f, ImVec2(x - size, y), ImVec2(x + size, y + size * 1.5f))) f.hovered = ev;
    // At most one marker per two pixels: skip the ones that would land on this one.
    k = first_at_or_after(k + 1, static_cast<double>(e.ts_ns) + 2.0 * f.ns_per_px());
  }
}

std::vector<std::unique_ptr<TimelineLane>> build_lanes(const ReplayModel& model) {
  std::vector<std::unique_ptr<TimelineLane>> lanes;
  if (!model.phase_marks().empty()) lanes.push_back(std::make_unique<PhaseLane>(model));
  for (size_t i = 0; i < model.lanes().size(); ++i)
    lanes.push_back(std::make_unique<SpanLane>(model, static_cast<int>(i)));
  return lanes;
}

}  // namespace dpscope::viz
