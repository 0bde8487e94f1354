// The comparison of runs (compare_view.hpp), drawn with ImDrawList on one shared time axis.
#include "ui/compare_view.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "replay/seek.hpp"
#include "ui/draw_util.hpp"

namespace dpscope::viz {

namespace {

std::string throughput(double samples_per_s) {
  if (samples_per_s <= 0) return "";
  if (samples_per_s >= 1e6) return fmt::format("{:.3g}M samples/s", samples_per_s / 1e6);
  if (samples_per_s >= 1e3) return fmt::format("{:.3g}k samples/s", samples_per_s / 1e3);
  return fmt::format("{:.3g} samples/s", samples_per_s);
}

}  // namespace

void CompareView::draw(ViewContext& ctx) {
  // Summaries are rebuilt only when the set of models changes (a live trace rebuilds its model).
  std::vector<const ReplayModel*> models;
  for (const Document* d : ctx.documents)
    if (d->model() != nullptr) models.push_back(d->model());
  if (models != summarized_) {
    runs_.clear();
    for (const ReplayModel* m : models) runs_.push_back(summarize_run(*m));
    summarized_ = models;
    baseline_ = 0;
    for (size_t i = 1; i < runs_.size(); ++i)
      if (runs_[i].gpus < runs_[baseline_].gpus) baseline_ = i;
  }
  if (runs_.size() < 2) {
    ImGui::TextWrapped(
        "Open two or three traces of the same model (single device, DataParallel, DDP) to "
        "compare them: dpscope-viz --compare single.jsonl dp.jsonl ddp.jsonl");
    return;
  }
  const Palette& pal = *ctx.palette;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 size = ImGui::GetContentRegionAvail();
  const float fs = ImGui::GetFontSize();
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  dl->AddRectFilled(origin, ImVec2(origin.x + size.x, origin.y + size.y), pal.background, 4.0f);

  int64_t longest = 1;
  for (const RunSummary& r : runs_) longest = std::max(longest, r.duration_ns);
  const float label_w = std::round(size.x * 0.34f);
  const float lane_x0 = origin.x + label_w;
  const float lane_w = size.x - label_w - fs;
  auto x_of = [&](int64_t t) {
    return lane_x0 + static_cast<float>(static_cast<double>(t) / static_cast<double>(longest)) * lane_w;
  };

  float y = origin.y + fs * 0.4f;
  draw_text(dl, bold, font_px(bold), ImVec2(origin.x + fs * 0.5f, y), pal.text,
            "The same training, one time axis (each run from its first event)");
  y += font_px(bold) * 1.4f;
  // The phases' colours, and what the white ticks mean.
  float lx = origin.x + fs * 0.5f;
  for (const Phase p : {Phase::kData, Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    dl->AddRectFilled(ImVec2(lx, y + fs * 0.2f), ImVec2(lx + fs * 0.8f, y + fs), pal.phase_color(p), 2.0f);
    lx += fs * 1.1f;
    const std::string name = to_string(p);
    draw_text(dl, small, font_px(small), ImVec2(lx, y + (fs - font_px(small)) * 0.5f), pal.text_dim, name);
    lx += text_size(small, font_px(small), name).x + fs * 0.8f;
  }
  draw_text(dl, small, font_px(small), ImVec2(lx, y + (fs - font_px(small)) * 0.5f), pal.text_dim,
            "| a step starts");
  y += fs * 1.5f;
  // Axis: a handful of round times.
  const double step_ns = std::pow(10.0, std::floor(std::log10(static_cast<double>(longest) / 5.0)));
  const double tick = step_ns * (static_cast<double>(longest) / step_ns > 25
                                     ? 5
                                     : (static_cast<double>(longest) / step_ns > 10 ? 2 : 1));
  for (double t = 0; t <= static_cast<double>(longest); t += tick) {
    const float x = x_of(static_cast<int64_t>(t));
    dl->AddLine(ImVec2(x, y + fs), ImVec2(x, origin.y + size.y - fs * 0.5f), pal.grid);
    draw_text(dl, small, font_px(small), ImVec2(x + 2, y), pal.text_dim,
              format_time(static_cast<int64_t>(t)));
  }
  y += fs * 1.4f;

  const float row_h =
      std::clamp((origin.y + size.y - y - fs) / static_cast<float>(runs_.size()), fs * 2.6f, fs * 6.0f);
  const RunSummary& base = runs_[baseline_];
  for (size_t i = 0; i < runs_.size(); ++i) {
    const RunSummary& r = runs_[i];
    const bool active = i < ctx.documents.size() && ctx.documents[i] == ctx.doc;
    const ImVec4 clip(origin.x, y, lane_x0 - fs * 0.5f, y + row_h);
    draw_text(dl, bold, font_px(bold), ImVec2(origin.x + fs * 0.5f, y + fs * 0.2f),
              active ? pal.text : pal.text_dim, r.title, &clip);
    const double up = speedup(r, base);
    std::string stats = r.step_ns > 0 ? fmt::format("step {}", format_time(r.step_ns)) : "no steps";
    if (const std::string tp = throughput(r.samples_per_s()); !tp.empty()) stats += " · " + tp;
    if (up > 0)
      stats += i == baseline_
                   ? " · the baseline"
                   : fmt::format(" · {:.2f}x of {}", up, base.gpus == 1 ? "one GPU" : "the baseline");
    draw_text(dl, ImGui::GetFont(), fs, ImVec2(origin.x + fs * 0.5f, y + fs * 0.2f + font_px(bold) * 1.25f),
              pal.text, stats, &clip);
    // The lane: phases in their colours, a tick at every step's start.
    const float ly0 = y + row_h * 0.15f;
    const float ly1 = y + row_h * 0.85f;
    dl->AddRectFilled(ImVec2(lane_x0, ly0), ImVec2(lane_x0 + lane_w, ly1), with_alpha(pal.idle, 0.35f), 3.0f);
    int64_t last_step = -2;
    for (const RunSummary::Segment& s : r.phases) {
      if (s.phase != Phase::kNone)
        dl->AddRectFilled(ImVec2(x_of(s.t0_ns), ly0),
                          ImVec2(std::max(x_of(s.t1_ns), x_of(s.t0_ns) + 1.0f), ly1),
                          pal.phase_color(s.phase));
      if (s.step != last_step && s.step >= 0) {
        dl->AddLine(ImVec2(x_of(s.t0_ns), ly0 - 3), ImVec2(x_of(s.t0_ns), ly1 + 3), pal.text, 1.5f);
        last_step = s.step;
      }
    }
    dl->AddRect(ImVec2(lane_x0, ly0), ImVec2(lane_x0 + lane_w, ly1), active ? pal.text : pal.grid, 3.0f);
    // The active trace's playhead, on its own lane.
    if (active && ctx.state != nullptr && ctx.model != nullptr) {
      const float x = x_of(ctx.state->cursor.t_ns - ctx.model->begin_ns());
      dl->AddLine(ImVec2(x, ly0 - fs * 0.3f), ImVec2(x, ly1 + fs * 0.3f), pal.playhead, 2.0f);
    }
    y += row_h;
  }
  ImGui::Dummy(size);
}

}  // namespace dpscope::viz
