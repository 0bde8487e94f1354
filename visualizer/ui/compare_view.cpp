// The comparison of runs (compare_view.hpp), drawn with ImDrawList on one shared time axis.
#include "ui/compare_view.hpp"

#include <algorithm>
#include <cmath>
#include <map>

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

constexpr size_t kMaxChipsPerBatch = 16;

// A row of data-set indices as chips in their sample colours, `w` wide at most; returns its width.
float draw_chips(ImDrawList* dl, ImFont* small, const Palette& pal, ImVec2 at, float w, float chip,
                 const std::vector<int64_t>& rows) {
  const float gap = std::max(1.0f, chip * 0.12f);
  const float step = std::min(chip + gap, rows.empty() ? chip : w / static_cast<float>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const ImVec2 a(at.x + step * static_cast<float>(i), at.y);
    const ImVec2 b(a.x + step - gap, a.y + chip);
    const ImU32 fill = pal.sample_color(rows[i]);
    dl->AddRectFilled(a, b, fill, 2.0f);
    const std::string n = fmt::format("{}", rows[i]);
    const float px = std::min(font_px(small), chip * 0.8f);
    if (text_size(small, px, n).x <= b.x - a.x)
      draw_text_centered(dl, small, px, ImVec2((a.x + b.x) * 0.5f, (a.y + b.y) * 0.5f), pal.text_on(fill), n);
  }
  return step * static_cast<float>(rows.size()) - gap;
}

}  // namespace

void CompareView::show_lesson_runs(std::vector<LessonRun> runs) {
  if (runs == lesson_runs_) return;
  lesson_runs_ = std::move(runs);
  columns_.clear();
  for (const LessonRun& r : lesson_runs_) {
    LessonColumn c;
    if (r.model != nullptr) {
      c.summary = summarize_run(*r.model);
      const int64_t at = r.at_ns.value_or(r.model->end_ns());
      c.moment = run_moment(*r.model, at);
      c.samples = sample_rows(*r.model, at);
    }
    columns_.push_back(std::move(c));
  }
}

const CompareView::LessonRun* CompareView::followed_run(const ReplayModel* own) const {
  const LessonRun* first = nullptr;
  for (const LessonRun& r : lesson_runs_) {
    if (r.model == nullptr) continue;
    if (r.model == own) return &r;
    if (first == nullptr) first = &r;
  }
  return first;
}

// The lesson's runs in columns, each at its own moment (compare_view.hpp).
void CompareView::draw_lesson_runs(ViewContext& ctx) {
  const Palette& pal = *ctx.palette;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 size = ImGui::GetContentRegionAvail();
  const float fs = ImGui::GetFontSize();
  ImFont* body = ImGui::GetFont();
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : body;
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : body;
  dl->AddRectFilled(origin, ImVec2(origin.x + size.x, origin.y + size.y), pal.background, 4.0f);

  int64_t longest = 1;  // one time scale for every column: the longest window fills its bar
  for (const LessonColumn& c : columns_) longest = std::max(longest, c.moment.t1_ns - c.moment.t0_ns);
  const float pad = std::round(fs * 0.5f);
  float y = origin.y + pad;
  const ImVec4 clip_all(origin.x, origin.y, origin.x + size.x - pad, origin.y + size.y);
  draw_text(dl, bold, font_px(bold), ImVec2(origin.x + pad, y), pal.text,
            "Side by side: each run at this chapter's moment", &clip_all);
  y += font_px(bold) * 1.3f;
  draw_text(dl, small, font_px(small), ImVec2(origin.x + pad, y), pal.text_dim,
            fmt::format("bars: the step that holds the moment, from its start; one scale, full width {} | "
                        "the moment",
                        format_time(longest)),
            &clip_all);
  y += font_px(small) * 1.5f;
  // The colours: the reference GPU's phases, and its collectives (a strip under a training step's
  // bar, the bar itself for a bench run).
  float lx = origin.x + pad;
  const float sw = font_px(small);
  bool phases = false;  // a bench run has none: its bar is its collective alone
  for (const LessonColumn& c : columns_) phases = phases || !c.moment.phases.empty();
  for (const auto& [color, name] : {std::pair<ImU32, const char*>{pal.phase_color(Phase::kData), "data"},
                                    {pal.phase_color(Phase::kForward), "forward"},
                                    {pal.phase_color(Phase::kBackward), "backward"},
                                    {pal.phase_color(Phase::kOptimizer), "optimizer"},
                                    {pal.comm, "all-reduce (GPU 0)"}}) {
    if (!phases && color != pal.comm) continue;
    dl->AddRectFilled(ImVec2(lx, y + sw * 0.1f), ImVec2(lx + sw * 0.9f, y + sw), color, 2.0f);
    lx += sw * 1.2f;
    draw_text(dl, small, sw, ImVec2(lx, y), pal.text_dim, name, &clip_all);
    lx += text_size(small, sw, name).x + sw * 0.9f;
  }
  y += sw * 1.6f;

  const size_t n = lesson_runs_.size();
  const LessonRun* followed = followed_run(ctx.model);
  const float col_w = std::floor((size.x - pad * static_cast<float>(n + 1)) / static_cast<float>(n));
  const float top = y;
  for (size_t i = 0; i < n; ++i) {
    const LessonRun& run = lesson_runs_[i];
    const LessonColumn& col = columns_[i];
    const float x0 = origin.x + pad + static_cast<float>(i) * (col_w + pad);
    const float x1 = x0 + col_w;
    const float inner_x0 = x0 + pad;
    const float inner_w = col_w - pad * 2;
    const ImVec4 clip(x0, top, x1 - pad * 0.5f, origin.y + size.y);
    dl->AddRectFilled(ImVec2(x0, top), ImVec2(x1, origin.y + size.y - pad), pal.card, 4.0f);
    dl->AddRect(ImVec2(x0, top), ImVec2(x1, origin.y + size.y - pad), pal.card_border, 4.0f, 0, 1.5f);
    float cy = top + pad * 0.6f;
    draw_text(dl, bold, font_px(bold), ImVec2(inner_x0, cy), pal.text, run.label, &clip);
    if (&run == followed) {
      const float label_w = text_size(bold, font_px(bold), run.label).x;
      draw_text(dl, small, font_px(small),
                ImVec2(inner_x0 + label_w + fs * 0.5f, cy + (font_px(bold) - font_px(small)) * 0.7f),
                pal.text_dim, "in the timeline and inspector", &clip);
    }
    cy += font_px(bold) * 1.25f;
    if (run.model == nullptr) {
      // Wrapped by hand: the draw list has no wrapping of its own.
      ImGui::SetCursorScreenPos(ImVec2(inner_x0, cy));
      ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + inner_w);
      ImGui::PushStyleColor(ImGuiCol_Text, pal.warning);
      ImGui::TextWrapped("cannot be shown: %s", run.error.c_str());
      ImGui::PopStyleColor();
      ImGui::PopTextWrapPos();
      continue;
    }
    const RunMoment& m = col.moment;
    const bool bench = m.phases.empty() && !m.collectives.empty();
    draw_text(dl, small, font_px(small), ImVec2(inner_x0, cy), pal.text_dim,
              bench ? m.collective : col.summary.title, &clip);
    cy += font_px(small) * 1.25f;
    // What a step holds: like is compared with like only on the same global batch.
    if (!bench && col.summary.samples_per_step > 0) {
      draw_text(dl, small, font_px(small), ImVec2(inner_x0, cy), pal.text_dim,
                fmt::format("{} samples a step", col.summary.samples_per_step), &clip);
      cy += font_px(small) * 1.25f;
    }
    cy += font_px(small) * 0.2f;
    // The number the narration quotes, large: the collective's time, or the step's.
    std::string big;
    if (!run.at_ns)
      big = "its moment never came";
    else if (bench)
      big = format_time(m.collective_ns);
    else if (m.step >= 0)
      big = fmt::format("step {}: {}", m.step + 1, format_time(m.t1_ns - m.t0_ns));
    draw_text(dl, bold, font_px(bold) * 1.3f, ImVec2(inner_x0, cy), pal.text, big, &clip);
    cy += font_px(bold) * 1.3f * 1.3f;
    // The bar: the step on the common scale, its work in colour, the moment as a line.
    const float bar_h = std::round(fs * 1.3f);
    const auto x_of = [&](int64_t t) {
      return inner_x0 +
             static_cast<float>(static_cast<double>(t - m.t0_ns) / static_cast<double>(longest)) * inner_w;
    };
    dl->AddRectFilled(ImVec2(inner_x0, cy), ImVec2(x_of(m.t1_ns), cy + bar_h), with_alpha(pal.idle, 0.5f),
                      2.0f);
    const auto span_box = [&](const RunMoment::Span& s, float y0, float y1, ImU32 color) {
      dl->AddRectFilled(ImVec2(x_of(s.t0_ns), y0), ImVec2(std::max(x_of(s.t1_ns), x_of(s.t0_ns) + 1.0f), y1),
                        color);
    };
    for (const RunMoment::Span& s : bench ? m.collectives : m.phases)
      span_box(s, cy, cy + bar_h, bench ? pal.comm : pal.phase_color(s.phase));
    // A training step's collectives (DDP's all-reduces, during backward) in a strip under its bar.
    const float strip_h = bench || m.collectives.empty() ? 0.0f : std::round(bar_h * 0.45f);
    for (const RunMoment::Span& s : bench ? std::vector<RunMoment::Span>{} : m.collectives)
      span_box(s, cy + bar_h + 2.0f, cy + bar_h + 2.0f + strip_h, pal.comm);
    const float bar_bottom = cy + bar_h + (strip_h > 0 ? strip_h + 2.0f : 0.0f);
    if (run.at_ns) {
      const float px = x_of(m.t_ns);
      dl->AddLine(ImVec2(px, cy - fs * 0.3f), ImVec2(px, bar_bottom + fs * 0.3f), pal.playhead,
                  2.0f * pal.line_scale);
    }
    cy = bar_bottom + fs * 0.6f;
    if (bench && m.messages > 0) {
      draw_text(dl, small, font_px(small), ImVec2(inner_x0, cy), pal.text,
                fmt::format("GPU 0 sends {} message{}", m.messages, m.messages == 1 ? "" : "s"), &clip);
      cy += font_px(small) * 1.3f;
      if (run.at_ns && m.collective_ns > 0)
        draw_text(dl, small, font_px(small), ImVec2(inner_x0, cy), pal.text_dim,
                  fmt::format("{} per message", format_time(m.collective_ns / m.messages)), &clip);
      cy += font_px(small) * 1.3f;
    }
    // Where the step's time goes: each phase's total, and the time GPU 0 spends in collectives.
    if (!bench && !m.phases.empty()) {
      std::map<Phase, int64_t> phase_ns;
      for (const RunMoment::Span& p : m.phases) phase_ns[p.phase] += p.t1_ns - p.t0_ns;
      int64_t collective_ns = 0;
      for (const RunMoment::Span& c : m.collectives) collective_ns += c.t1_ns - c.t0_ns;
      const float row_px = font_px(small);
      auto line = [&](ImU32 color, const std::string& what, int64_t ns) {
        dl->AddRectFilled(ImVec2(inner_x0, cy + row_px * 0.1f), ImVec2(inner_x0 + row_px * 0.9f, cy + row_px),
                          color, 2.0f);
        draw_text(dl, small, row_px, ImVec2(inner_x0 + row_px * 1.3f, cy), pal.text, what, &clip);
        const std::string t = format_time(ns);
        draw_text(dl, small, row_px, ImVec2(inner_x0 + inner_w - text_size(small, row_px, t).x, cy), pal.text,
                  t, &clip);
        cy += row_px * 1.3f;
      };
      for (const Phase p : {Phase::kData, Phase::kForward, Phase::kBackward, Phase::kOptimizer})
        if (const auto it = phase_ns.find(p); it != phase_ns.end())
          line(pal.phase_color(p), to_string(p), it->second);
      if (collective_ns > 0) line(pal.comm, "all-reduce (GPU 0)", collective_ns);
      cy += fs * 0.4f;
    }
    // The rows each rank read, epoch by epoch (a run with a sampler).
    const SampleRows& rows = col.samples;
    size_t per_batch = 1;
    for (const SampleRows::Rank& r : rows.ranks)
      for (const SampleRows::Batch& b : r.batches) per_batch = std::max(per_batch, b.rows.size());
    // Only batches small enough to read chip by chip (lesson 8's); thousands of rows would be noise.
    if (rows.ranks.empty() || per_batch > kMaxChipsPerBatch) continue;
    const float label_w = text_size(small, font_px(small), "rank 0").x + pad;
    const float epoch_w = (inner_w - label_w) / static_cast<float>(std::max<int64_t>(rows.epochs, 1));
    for (int64_t e = 0; e < rows.epochs; ++e)
      draw_text(dl, small, font_px(small), ImVec2(inner_x0 + label_w + epoch_w * static_cast<float>(e), cy),
                pal.text_dim, fmt::format("epoch {}", e + 1), &clip);
    cy += font_px(small) * 1.3f;
    const float chip = std::clamp((epoch_w - pad) / static_cast<float>(per_batch) * 0.88f, 4.0f, fs * 1.5f);
    const float thick = 2.0f * pal.line_scale;
    for (const SampleRows::Rank& r : rows.ranks) {
      draw_text(dl, small, font_px(small), ImVec2(inner_x0, cy + (chip - font_px(small)) * 0.5f), pal.text,
                fmt::format("rank {}", r.rank), &clip);
      std::map<int64_t, int> row_in_epoch;
      float rank_h = chip;
      for (const SampleRows::Batch& b : r.batches) {
        const int k = row_in_epoch[b.epoch]++;
        const ImVec2 at(inner_x0 + label_w + epoch_w * static_cast<float>(b.epoch),
                        cy + static_cast<float>(k) * (chip + thick * 2 + 2));
        const float w = draw_chips(dl, small, pal, at, epoch_w - pad, chip, b.rows);
        if (b.repeats)  // the same rows as the previous epoch's batch here: outlined in the warning colour
          dl->AddRect(ImVec2(at.x - thick, at.y - thick), ImVec2(at.x + w + thick, at.y + chip + thick),
                      pal.warning, 2.0f, 0, thick);
        rank_h = std::max(rank_h, at.y + chip - cy);
      }
      cy += rank_h + fs * 0.5f;
    }
    if (rows.epochs >= 2) {
      const std::string verdict =
          rows.repeated > 0
              ? fmt::format("{} batch{} repeat{} the previous epoch's (outlined)", rows.repeated,
                            rows.repeated == 1 ? "" : "es", rows.repeated == 1 ? "s" : "")
              : "no batch repeats the previous epoch's";
      draw_text(dl, small, font_px(small), ImVec2(inner_x0, cy),
                rows.repeated > 0 ? pal.warning : pal.text_dim, verdict, &clip);
    }
  }
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(size);
}

void CompareView::draw(ViewContext& ctx) {
  if (showing_lesson_runs()) {
    draw_lesson_runs(ctx);
    return;
  }
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
  const bool one_model = std::all_of(runs_.begin(), runs_.end(),
                                     [&](const RunSummary& r) { return r.model == runs_.front().model; });
  draw_text(dl, bold, font_px(bold), ImVec2(origin.x + fs * 0.5f, y), pal.text,
            one_model ? "The same training, one time axis (each run from its first event)"
                      : "Runs of different models, one time axis (each from its first event): no speedup");
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
    else if (i != baseline_ && r.model != base.model)
      stats += " · another model than the baseline's: no speedup";
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
