// Timeline view: layout of lanes, ruler, playhead, flows, and zoom/pan/select/seek input.
#include "ui/timeline_view.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "replay/seek.hpp"
#include "ui/draw_util.hpp"

namespace dpscope::viz {

namespace {

constexpr double kMinRangeNs = 20.0;
constexpr size_t kMaxFlows = 4000;

}  // namespace

void TimelineView::fit() { fitted_ = true; }

void TimelineView::set_range(double t0_ns, double t1_ns) {
  t0_ = t0_ns;
  t1_ = std::max(t1_ns, t0_ns + kMinRangeNs);
  fitted_ = false;
}

void TimelineView::sync_lanes(const ViewContext& ctx) {
  if (lanes_doc_ == ctx.doc && lanes_generation_ == ctx.doc->generation() && model_ == ctx.model) return;
  lanes_ = build_lanes(*ctx.model);
  if (lanes_doc_ != ctx.doc) pending_open_ = true;  // another document: open it as the first one
  lanes_doc_ = ctx.doc;
  lanes_generation_ = ctx.doc->generation();
  model_ = ctx.model;
  hovered_ = kNoEvent;
}

void TimelineView::handle_input(ViewContext& ctx, ImVec2 canvas0, ImVec2 canvas1, float lanes_x0,
                                float ruler_y1) {
  const ImGuiIO& io = ImGui::GetIO();
  const ReplayModel& model = *ctx.model;
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = io.MousePos;
  const float x0 = lanes_x0;
  const float x1 = canvas1.x;
  const float width = std::max(1.0f, x1 - x0);
  auto t_at = [&](float x) { return t0_ + static_cast<double>((x - x0) / width) * (t1_ - t0_); };
  auto seek_to_x = [&](float x) {
    const double t =
        std::clamp(t_at(x), static_cast<double>(model.begin_ns()), static_cast<double>(model.end_ns()));
    ctx.seek(model.at_time(static_cast<int64_t>(std::llround(t))));
  };
  const bool in_ruler = mouse.y < ruler_y1 && mouse.x >= x0;

  if (hovered && io.MouseWheel != 0.0f) {
    if (io.KeyShift) {
      scroll_y_ -= io.MouseWheel * ImGui::GetFontSize() * 4.0f;
    } else {
      const double factor = std::pow(0.8, static_cast<double>(io.MouseWheel));
      const double tm = t_at(std::clamp(mouse.x, x0, x1));
      double a = tm - (tm - t0_) * factor;
      double b = tm + (t1_ - tm) * factor;
      const double span = static_cast<double>(std::max<int64_t>(model.end_ns() - model.begin_ns(), 1));
      if (b - a < kMinRangeNs) {
        a = tm - kMinRangeNs / 2;
        b = tm + kMinRangeNs / 2;
      }
      if (b - a > span * 1.5) {
        fit();
      } else {
        set_range(a, b);
      }
    }
  }
  if (hovered && ImGui::IsMouseClicked(0) && mouse.x >= x0) {
    if (in_ruler) {
      seeking_ = true;
    } else {
      left_down_in_lanes_ = true;
      panning_ = false;
      press_x_ = mouse.x;
      press_t0_ = t0_;
    }
  }
  if (hovered && !in_ruler && mouse.x >= x0 && ImGui::IsMouseDoubleClicked(0)) seek_to_x(mouse.x);
  if (seeking_) {
    if (ImGui::IsMouseDown(0)) seek_to_x(mouse.x);
    if (!ImGui::IsMouseDown(0)) seeking_ = false;
  }
  if (left_down_in_lanes_) {
    const float dx = mouse.x - press_x_;
    if (std::fabs(dx) > 3.0f) panning_ = true;
    if (panning_ && ImGui::IsMouseDown(0)) {
      const double w = t1_ - t0_;
      set_range(press_t0_ - static_cast<double>(dx / width) * w,
                press_t0_ - static_cast<double>(dx / width) * w + w);
    }
    if (ImGui::IsMouseReleased(0)) {
      if (!panning_) ctx.select(hovered_);
      left_down_in_lanes_ = false;
      panning_ = false;
    }
  }
  if (hovered && ImGui::IsMouseClicked(1) && mouse.x >= x0) {
    selecting_ = true;
    has_selection_ = false;
    sel_a_ = sel_b_ = t_at(mouse.x);
  }
  if (selecting_) {
    sel_b_ = t_at(std::clamp(mouse.x, x0, x1));
    if (!ImGui::IsMouseDown(1)) {
      selecting_ = false;
      has_selection_ = std::fabs(sel_b_ - sel_a_) / (t1_ - t0_) * width > 3.0;
    }
  }
  (void)canvas0;
}

void TimelineView::draw_ruler(const ViewContext& ctx, ImDrawList* dl, float x0, float x1, float y0,
                              float y1) {
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), pal.card);
  const double ns_per_px = (t1_ - t0_) / std::max(1.0f, x1 - x0);
  const double raw = ns_per_px * 110.0;
  const double p10 = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-3))));
  double step = p10;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (p10 * m >= raw) {
      step = p10 * m;
      break;
    }
  step = std::max(step, 1.0);
  const double origin = static_cast<double>(model.begin_ns());
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const ImVec4 clip(x0, y0, x1, y1);
  for (double t = origin + std::ceil((t0_ - origin) / step) * step; t <= t1_; t += step) {
    const float x = x0 + static_cast<float>((t - t0_) / (t1_ - t0_)) * (x1 - x0);
    dl->AddLine(ImVec2(x, y1 - (y1 - y0) * 0.35f), ImVec2(x, y1), pal.text_dim);
    draw_text(dl, small, font_px(small), ImVec2(x + 3, y0 + 1), pal.text_dim,
              format_time(static_cast<int64_t>(std::llround(t - origin))), &clip);
  }
}

void TimelineView::draw(ViewContext& ctx) {
  if (ctx.model == nullptr || ctx.state == nullptr || ctx.doc == nullptr) return;
  sync_lanes(ctx);
  const ReplayModel& model = *ctx.model;
  const Palette& pal = *ctx.palette;
  const float fs = ImGui::GetFontSize();
  const Cursor cursor = ctx.state->cursor;
  follow_range(model, cursor, ctx.state->step);
  draw_toolbar(ctx);

  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 size = ImGui::GetContentRegionAvail();
  if (size.x < 100 || size.y < 40) return;
  ImGui::InvisibleButton("##timeline_canvas", size,
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  const ImVec2 end(origin.x + size.x, origin.y + size.y);
  const float label_w = fs * 8.5f;
  const float x0 = origin.x + label_w;
  const float x1 = end.x - fs * 0.4f;
  const float ruler_y1 = origin.y + fs * 1.5f;
  if (!ctx.headless) handle_input(ctx, origin, ImVec2(x1, end.y), x0, ruler_y1);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(origin, end, pal.background);

  TimelineFrame f;
  f.model = &model;
  f.palette = &pal;
  f.dl = dl;
  f.font = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  f.font_size = font_px(f.font);
  f.t0_ns = t0_;
  f.t1_ns = t1_;
  f.x0 = x0;
  f.x1 = x1;
  f.row_h = std::round(fs * 1.35f);
  f.interactive = !ctx.headless && ImGui::IsItemHovered();
  f.selected = ctx.selected();

  const float lanes_y0 = ruler_y1 + 2.0f;
  const std::vector<float> top = layout_lanes(f, lanes_y0, end.y);

  // Step boundaries across all lanes.
  for (const StepMark& m : model.step_marks()) {
    const float x = f.x_of(static_cast<double>(m.ts_ns));
    if (x >= x0 && x <= x1) dl->AddLine(ImVec2(x, lanes_y0), ImVec2(x, end.y), pal.grid, 1.0f);
  }

  dl->PushClipRect(ImVec2(x0, lanes_y0), ImVec2(x1, end.y), true);
  for (size_t i = 0; i < lanes_.size(); ++i) {
    const float h = static_cast<float>(lanes_[i]->rows()) * f.row_h;
    if (top[i] + h < lanes_y0 || top[i] > end.y) continue;
    dl->AddRectFilled(ImVec2(x0, top[i]), ImVec2(x1, top[i] + h), with_alpha(pal.card, 0.55f));
    lanes_[i]->draw(f, top[i]);
  }
  draw_flows(f, top);
  dl->PopClipRect();

  // Lane labels.
  dl->PushClipRect(ImVec2(origin.x, lanes_y0), ImVec2(x0, end.y), true);
  for (size_t i = 0; i < lanes_.size(); ++i) {
    if (top[i] > end.y) break;
    draw_text(dl, f.font, f.font_size, ImVec2(origin.x + 4, top[i] + (f.row_h - f.font_size) * 0.5f),
              lanes_[i]->label_color(pal), lanes_[i]->label());
  }
  dl->PopClipRect();
  dl->AddLine(ImVec2(x0 - 1, origin.y), ImVec2(x0 - 1, end.y), pal.grid);

  draw_overlays(ctx, f, origin, end, lanes_y0, ruler_y1);

  hovered_ = f.hovered;
  boxes_drawn_ = f.boxes_drawn;
  merged_boxes_ = f.merged_boxes;
  if (hovered_ != kNoEvent && f.interactive) ImGui::SetTooltip("%s", describe_event(model, hovered_).c_str());
}

// ---- draw() in parts ----

// Keeps the visible range fitted, or following the playhead when it leaves the range.
void TimelineView::follow_range(const ReplayModel& model, Cursor cursor, int64_t cursor_step) {
  if (pending_open_) {
    pending_open_ = false;
    if (open_zoom_.kind == ZoomSpec::Kind::kFit) {
      fitted_ = true;
    } else {
      const auto [a, b] = zoom_range(model, open_zoom_, cursor, cursor_step);
      set_range(a, b);
    }
  }
  if (fitted_) {
    const double span = static_cast<double>(std::max<int64_t>(model.end_ns() - model.begin_ns(), 1));
    t0_ = static_cast<double>(model.begin_ns()) - span * 0.005;
    t1_ = static_cast<double>(model.end_ns()) + span * 0.005;
  } else if (follow_playhead && !(cursor == last_cursor_)) {
    const double t = static_cast<double>(cursor.t_ns);
    if (t < t0_ || t > t1_) {
      const double w = t1_ - t0_;
      t0_ = t - w * 0.3;
      t1_ = t0_ + w;
    }
  }
  last_cursor_ = cursor;
}

// Fit, zoom to selection, follow, the visible span and (normal mode) the controls.
void TimelineView::draw_toolbar(const ViewContext& ctx) {
  if (ImGui::Button("Fit")) fit();
  ImGui::SameLine();
  if (has_selection_) {
    if (ImGui::Button("Zoom to selection")) {
      set_range(std::min(sel_a_, sel_b_), std::max(sel_a_, sel_b_));
      has_selection_ = false;
    }
    ImGui::SameLine();
  }
  ImGui::Checkbox("follow playhead", &follow_playhead);
  ImGui::SameLine();
  ImGui::TextDisabled("showing %s", format_time(static_cast<int64_t>(t1_ - t0_)).c_str());
  if (!ctx.present) {
    ImGui::SameLine();
    ImGui::TextDisabled(
        "· %zu boxes (%zu merged) · wheel: zoom, drag: pan, right-drag: measure, click: inspect, "
        "double-click/ruler: move playhead",
        boxes_drawn_, merged_boxes_);
  }
}

// Each lane's top y (scrolled); rows shrink (down to the small font) so more lanes fit.
std::vector<float> TimelineView::layout_lanes(TimelineFrame& f, float lanes_y0, float end_y) {
  const float gap = 3.0f;
  {
    float rows = 0.0f;
    float gaps = 0.0f;
    for (size_t i = 0; i < lanes_.size(); ++i) {
      rows += static_cast<float>(lanes_[i]->rows());
      gaps +=
          gap + ((i + 1 < lanes_.size() && lanes_[i + 1]->device() != lanes_[i]->device()) ? gap * 2 : 0.0f);
    }
    const float fit = std::floor((end_y - lanes_y0 - gaps) / std::max(rows, 1.0f));
    f.row_h = std::clamp(fit, std::round(f.font_size + 3.0f), f.row_h);
  }
  std::vector<float> top(lanes_.size());
  float content_h = 0.0f;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    top[i] = content_h;
    content_h += static_cast<float>(lanes_[i]->rows()) * f.row_h + gap;
    if (i + 1 < lanes_.size() && lanes_[i + 1]->device() != lanes_[i]->device()) content_h += gap * 2;
  }
  scroll_y_ = std::clamp(scroll_y_, 0.0f, std::max(0.0f, content_h - (end_y - lanes_y0)));
  for (float& t : top) t += lanes_y0 - scroll_y_;

  return top;
}

// Flow arrows: from the sender's lane at the start to the receiver's lane at arrival.
void TimelineView::draw_flows(const TimelineFrame& f, const std::vector<float>& top) const {
  const ReplayModel& model = *f.model;
  const Palette& pal = *f.palette;
  ImDrawList* dl = f.dl;
  const float fs = ImGui::GetFontSize();
  size_t flows = 0;
  for (const TimelineFrame::FlowEnd& fl : f.flows) {
    if (++flows > kMaxFlows) break;
    const trace::Event& e = model.event(fl.event);
    const int dst = model.device_index(model.data().transfer(e).dst);
    int target = -1;
    for (size_t i = 0; i < lanes_.size() && dst >= 0; ++i) {
      if (lanes_[i]->device() != dst) continue;
      if (target < 0 || lanes_[i]->stream() == e.stream) target = static_cast<int>(i);
      if (lanes_[i]->stream() == e.stream) break;
    }
    if (target < 0) continue;
    const float ty = top[static_cast<size_t>(target)] + f.row_h * 0.5f;
    if (std::fabs(ty - fl.y) < 1.0f) continue;
    draw_arrow(dl, ImVec2(fl.x_start, fl.y), ImVec2(fl.x_end, ty),
               with_alpha(pal.event_color(model.data(), e), 0.8f), 1.2f * pal.line_scale, fs * 0.45f);
  }
}

// The range selection, the ruler and the playhead, over the lanes.
void TimelineView::draw_overlays(const ViewContext& ctx, const TimelineFrame& f, ImVec2 origin, ImVec2 end,
                                 float lanes_y0, float ruler_y1) {
  const Palette& pal = *ctx.palette;
  ImDrawList* dl = f.dl;
  const float fs = ImGui::GetFontSize();
  const float x0 = f.x0;
  const float x1 = f.x1;
  const Cursor cursor = ctx.state->cursor;
  // Range selection.
  if (selecting_ || has_selection_) {
    const float a = std::clamp(f.x_of(std::min(sel_a_, sel_b_)), x0, x1);
    const float b = std::clamp(f.x_of(std::max(sel_a_, sel_b_)), x0, x1);
    dl->AddRectFilled(ImVec2(a, lanes_y0), ImVec2(b, end.y), with_alpha(pal.selection, 0.12f));
    dl->AddRect(ImVec2(a, lanes_y0), ImVec2(b, end.y), with_alpha(pal.selection, 0.7f));
    const std::string len = format_time(static_cast<int64_t>(std::llround(std::fabs(sel_b_ - sel_a_))));
    draw_text(dl, ImGui::GetFont(), fs, ImVec2(a + 4, lanes_y0 + 2), pal.selection, len);
  }

  draw_ruler(ctx, dl, x0, x1, origin.y, ruler_y1);
  // The playhead.
  const float px = f.x_of(static_cast<double>(cursor.t_ns));
  if (px >= x0 - 1 && px <= x1 + 1) {
    dl->AddLine(ImVec2(px, origin.y), ImVec2(px, end.y), pal.playhead, 2.0f * pal.line_scale);
    const float s = fs * 0.45f;
    dl->AddTriangleFilled(ImVec2(px - s, origin.y), ImVec2(px + s, origin.y), ImVec2(px, origin.y + s * 1.3f),
                          pal.playhead);
  }
}

}  // namespace dpscope::viz
