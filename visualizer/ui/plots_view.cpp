// Plots view: loss curve and HTA time breakdown bars.
#include "ui/plots_view.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "replay/seek.hpp"
#include "ui/draw_util.hpp"

namespace dpscope::viz {

void PlotsView::draw_loss(const ViewContext& ctx, ImVec2 size) {
  const ReplayModel& model = *ctx.model;
  const Palette& pal = *ctx.palette;
  // One line: each step's loss as `dpscope train` reports it (the mean over ranks in ddp).
  const std::vector<StepLoss>& losses = model.step_losses();
  int ranks = 0;
  for (const StepLoss& l : losses) ranks = std::max(ranks, l.ranks);
  ImGui::TextUnformatted(ranks > 1 ? "Loss per training step (mean over ranks)" : "Loss per training step");
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::Dummy(size);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p1(p0.x + size.x, p0.y + size.y);
  dl->AddRectFilled(p0, p1, pal.background, 3.0f);
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const float fs = font_px(small);
  if (losses.empty()) {
    draw_text_centered(dl, small, fs, ImVec2((p0.x + p1.x) * 0.5f, (p0.y + p1.y) * 0.5f), pal.text_dim,
                       "no loss values in this trace");
    return;
  }
  double lo = losses.front().loss;
  double hi = lo;
  for (const StepLoss& l : losses) {
    lo = std::min(lo, l.loss);
    hi = std::max(hi, l.loss);
  }
  const int64_t s_lo = losses.front().step;
  const int64_t s_hi = losses.back().step;
  if (hi - lo < 1e-9) {
    hi += 0.5;
    lo -= 0.5;
  }
  const float left = p0.x + fs * 3.5f;
  const float right = p1.x - fs * 0.8f;
  const float top = p0.y + fs * 0.6f;
  const float bottom = p1.y - fs * 1.5f;
  auto x_of = [&](int64_t step) {
    return s_hi == s_lo ? (left + right) * 0.5f
                        : left + static_cast<float>(static_cast<double>(step - s_lo) /
                                                    static_cast<double>(s_hi - s_lo)) *
                                     (right - left);
  };
  auto y_of = [&](double v) { return bottom - static_cast<float>((v - lo) / (hi - lo)) * (bottom - top); };
  dl->AddLine(ImVec2(left, top), ImVec2(left, bottom), pal.grid);
  dl->AddLine(ImVec2(left, bottom), ImVec2(right, bottom), pal.grid);
  draw_text(dl, small, fs, ImVec2(p0.x + 3, top - fs * 0.5f), pal.text_dim, fmt::format("{:.3g}", hi));
  draw_text(dl, small, fs, ImVec2(p0.x + 3, bottom - fs * 0.5f), pal.text_dim, fmt::format("{:.3g}", lo));
  draw_text(dl, small, fs, ImVec2(left, bottom + 2), pal.text_dim, fmt::format("step {}", shown_count(s_lo)));
  const std::string last = fmt::format("step {}", shown_count(s_hi));
  draw_text(dl, small, fs, ImVec2(right - text_size(small, fs, last).x, bottom + 2), pal.text_dim, last);

  // At most one point per pixel column; a step's loss has happened once its last rank logged it.
  const size_t so_far = ctx.state->losses_so_far;
  const StepLoss* current = nullptr;
  ImVec2 prev(-1, -1);
  float last_x = -1e9f;
  for (const StepLoss& l : losses) {
    const bool happened = l.last < so_far;
    if (happened) current = &l;
    const ImVec2 p(x_of(l.step), y_of(l.loss));
    if (p.x - last_x < 1.0f && &l != &losses.back()) continue;
    last_x = p.x;
    const ImU32 c = happened ? pal.forward : with_alpha(pal.forward, 0.25f);
    if (prev.x >= 0) dl->AddLine(prev, p, c, 2.0f * pal.line_scale);
    if (losses.size() <= 64) dl->AddCircleFilled(p, 3.0f * pal.line_scale, c);
    prev = p;
  }
  if (current != nullptr) {
    const ImVec2 p(x_of(current->step), y_of(current->loss));
    dl->AddCircle(p, 6.0f * pal.line_scale, pal.playhead, 0, 2.0f);
    const std::string label = fmt::format("step {}: {:.4f}", shown_count(current->step), current->loss);
    const ImVec2 ts = text_size(small, fs, label);
    draw_text(dl, small, fs, ImVec2(std::min(p.x + 8, right - ts.x), std::max(p.y - fs * 1.3f, top)),
              pal.text, label);
  }
}

void PlotsView::draw_breakdown(const ViewContext& ctx) {
  const ReplayModel& model = *ctx.model;
  const Palette& pal = *ctx.palette;
  const ReplayState& state = *ctx.state;
  ImGui::TextUnformatted("Time per GPU");
  ImGui::SameLine();
  int w = static_cast<int>(window);
  ImGui::RadioButton("whole trace", &w, 0);
  ImGui::SameLine();
  ImGui::RadioButton("this step", &w, 1);
  ImGui::SameLine();
  ImGui::RadioButton("up to playhead", &w, 2);
  window = static_cast<Window>(w);
  int64_t t0 = model.begin_ns();
  int64_t t1 = model.end_ns();
  if (window == Window::kCurrentStep && state.step >= 0) std::tie(t0, t1) = model.step_window(state.step);
  if (window == Window::kUpToPlayhead) t1 = std::max(t0, state.cursor.t_ns);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const float fs = ImGui::GetFontSize();
  const float label_w = fs * 4.0f;
  const float pct_w = fs * 7.5f;
  const float bar_w = std::max(ImGui::GetContentRegionAvail().x - label_w - pct_w, fs * 4);
  const float bar_h = fs * 0.95f;
  for (size_t d = 0; d < model.devices().size(); ++d) {
    const ModelDevice& dev = model.devices()[d];
    if (dev.is_host) continue;
    bool has_lane = false;
    for (int s = 0; s < kStreamCount; ++s)
      has_lane = has_lane || model.lane_index(static_cast<int>(d), static_cast<StreamKind>(s)) >= 0;
    if (!has_lane) continue;
    const TimeBreakdown b = model.breakdown(static_cast<int>(d), t0, t1);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(label_w + bar_w + pct_w, bar_h + 1));
    draw_text(dl, ImGui::GetFont(), fs, ImVec2(p.x, p.y), pal.text, device_label(dev));
    if (b.window_ns <= 0) continue;
    float x = p.x + label_w;
    auto seg = [&](int64_t ns, ImU32 color) {
      const float sw = static_cast<float>(static_cast<double>(ns) / static_cast<double>(b.window_ns)) * bar_w;
      if (sw > 0) dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + sw, p.y + bar_h), color);
      x += sw;
    };
    seg(b.compute_ns, pal.forward);
    seg(b.exposed_comm_ns, pal.comm);
    seg(b.idle_ns, pal.idle);
    dl->AddRect(ImVec2(p.x + label_w, p.y), ImVec2(p.x + label_w + bar_w, p.y + bar_h), pal.grid);
    const std::string pct = b.comm_ns > 0 ? fmt::format("overlap {:.0f}%", b.overlap_pct()) : "no comm";
    draw_text(dl, small, font_px(small),
              ImVec2(p.x + label_w + bar_w + fs * 0.4f, p.y + (bar_h - font_px(small)) * 0.5f), pal.text_dim,
              pct);
    if (!ctx.headless && ImGui::IsMouseHoveringRect(p, ImVec2(p.x + label_w + bar_w + pct_w, p.y + bar_h)))
      ImGui::SetTooltip(
          "%s over %s\ncompute %s (%.1f%%)\ncommunication %s, of which exposed %s (%.1f%%)\nidle %s "
          "(%.1f%%)\n"
          "overlap %% = compute while communicating / communication = %.1f%%",
          dev.name.c_str(), format_time(b.window_ns).c_str(), format_time(b.compute_ns).c_str(),
          100.0 * static_cast<double>(b.compute_ns) / static_cast<double>(b.window_ns),
          format_time(b.comm_ns).c_str(), format_time(b.exposed_comm_ns).c_str(),
          100.0 * static_cast<double>(b.exposed_comm_ns) / static_cast<double>(b.window_ns),
          format_time(b.idle_ns).c_str(),
          100.0 * static_cast<double>(b.idle_ns) / static_cast<double>(b.window_ns), b.overlap_pct());
  }
  legend_entry(pal.forward, "compute");
  ImGui::SameLine();
  legend_entry(pal.comm, "exposed comm/copy");  // copies count as communication (the tooltip, docs)
  ImGui::SameLine();
  legend_entry(pal.idle, "idle");
}

void PlotsView::draw(ViewContext& ctx) {
  if (ctx.model == nullptr || ctx.state == nullptr) return;
  const float avail = ImGui::GetContentRegionAvail().y;
  const float fs = ImGui::GetFontSize();
  int gpus = 0;
  for (const ModelDevice& d : ctx.model->devices()) gpus += d.is_host ? 0 : 1;
  const float breakdown_h = ImGui::GetFrameHeightWithSpacing() * 2 +
                            (fs * 0.95f + 1 + ImGui::GetStyle().ItemSpacing.y) * static_cast<float>(gpus);
  const float loss_h = std::max(avail - breakdown_h - ImGui::GetTextLineHeightWithSpacing() * 2, fs * 4.0f);
  draw_loss(ctx, ImVec2(ImGui::GetContentRegionAvail().x, loss_h));
  ImGui::Spacing();
  draw_breakdown(ctx);
}

}  // namespace dpscope::viz
