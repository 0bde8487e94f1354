// Diagnosis view: the DDP diagnosis's sentences and a row per step of whose last gradient came last.
#include "ui/diagnosis_view.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "replay/seek.hpp"
#include "ui/draw_util.hpp"

namespace dpscope::viz {

namespace {

// How many step rows show before the list scrolls (it follows the playhead's step), so the
// sentences under it stay in view in the right column of a 1920x1080 window.
constexpr size_t kVisibleStepRows = 4;

// A finding as a sentence: capitalised, ending in a full stop.
std::string as_sentence(const std::string& s) {
  std::string out = s;
  if (!out.empty() && out.front() >= 'a' && out.front() <= 'z')
    out.front() = static_cast<char>(out.front() - 32);
  if (!out.empty() && out.back() != '.') out += '.';
  return out;
}

std::string lateness_line(const trace::Lateness& l, int64_t noise_ns) {
  if (l.latest_rank < 0) return "no two ranks' gradients";
  if (l.next_rank < 0) return fmt::format("rank {} (no other rank to compare)", l.latest_rank);
  return fmt::format("rank {} last, {} after rank {} (noise {}){}", l.latest_rank, format_duration(l.lead_ns),
                     l.next_rank, format_time(noise_ns), l.above_noise ? ": late" : ": within noise");
}

}  // namespace

void DiagnosisView::before_draw(const ViewContext& ctx) {
  caption_.clear();
  // Room in the right column goes to a diagnosis that names something to act on.
  const trace::DdpDiagnosis* d = ctx.doc != nullptr ? &ctx.doc->diagnosis().diagnosis() : nullptr;
  weight_ = d != nullptr && (d->straggler.rank >= 0 || !d->epochs.repeated.empty()) ? 1.5f : 0.8f;
  // Presentation mode draws no panels: a named straggler joins the step-and-phase caption.
  if (!ctx.present || !visible || ctx.doc == nullptr || ctx.model == nullptr || ctx.state == nullptr) return;
  const trace::StragglerFinding& s = ctx.doc->diagnosis().diagnosis().straggler;
  if (s.rank < 0) return;
  caption_ =
      fmt::format("{} · t = {}\n\n**Straggler:** {}", step_phase_label(ctx.state->step, ctx.state->phase),
                  format_time(ctx.state->cursor.t_ns - ctx.model->begin_ns()), as_sentence(s.sentence));
}

void DiagnosisView::heading(const ViewContext& ctx, const char* label) {
  ImGui::Spacing();
  if (ctx.fonts.bold != nullptr) ImGui::PushFont(ctx.fonts.bold);
  ImGui::TextUnformatted(label);
  if (ctx.fonts.bold != nullptr) ImGui::PopFont();
}

void DiagnosisView::text(const ViewContext& ctx, const char* label, const std::string& sentence) {
  if (sentence.empty()) return;
  if (label != nullptr) heading(ctx, label);
  const std::string s = as_sentence(sentence);
  ImGui::TextWrapped("%s", s.c_str());
  texts_.push_back(s);
}

void DiagnosisView::draw(ViewContext& ctx) {
  texts_.clear();
  rows_.clear();
  if (ctx.doc == nullptr || ctx.model == nullptr) return;
  const DiagnosisCache& cache = ctx.doc->diagnosis();
  ImGui::PushTextWrapPos(0.0f);
  if (!cache.error().empty()) {
    const std::string line = "The diagnosis failed: " + cache.error();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.palette->error), "%s", line.c_str());
    texts_.push_back(line);
  } else if (!cache.has_findings()) {
    ImGui::TextDisabled(
        "No DDP events in this trace (buckets, gradient-ready instants): nothing to diagnose.");
  } else {
    const trace::DdpDiagnosis& d = cache.diagnosis();
    if (ctx.doc->following())
      ImGui::TextDisabled("Live: up to step %lld, diagnosed again as steps complete.",
                          static_cast<long long>(shown_count(cache.diagnosed_step())));
    // The rows first, under their heading: what a student reads at a glance stays in view in a
    // short panel; the sentence follows.
    if (!d.straggler.sentence.empty()) {
      heading(ctx, "Straggler");
      if (!d.straggler.steps.empty()) draw_steps(ctx);
      text(ctx, nullptr, d.straggler.sentence);
    }
    text(ctx, "Exposed communication", d.exposed.sentence);
    if (!d.buckets.sentences.empty()) {
      text(ctx, "Buckets", d.buckets.sentences.front());
      for (size_t i = 1; i < d.buckets.sentences.size(); ++i) {
        const std::string s = as_sentence(d.buckets.sentences[i]);
        ImGui::Bullet();
        ImGui::TextWrapped("%s", s.c_str());
        texts_.push_back(s);
      }
    }
    text(ctx, "Sampler", d.epochs.sentence);
  }
  ImGui::PopTextWrapPos();
}

// One row per step: "step N", the latest rank's colour and number, its lead as a bar (a tick marks
// the step's noise: a bar past it is a late step, drawn in the rank's colour; one short of it is
// grey), and the lead in numbers.
void DiagnosisView::draw_steps(ViewContext& ctx) {
  const std::vector<trace::StepLateness>& steps = ctx.doc->diagnosis().diagnosis().straggler.steps;
  const Palette& pal = *ctx.palette;
  ImFont* font = ImGui::GetFont();
  const float fs = font_px(font);
  // The bars' full width: a little over the 90th percentile of the leads and noises, so one outlier
  // (a first step that waited for the data loader) does not squash every other bar to a sliver;
  // a longer lead fills the bar and ends in an arrow head.
  std::vector<int64_t> lengths;
  for (const trace::StepLateness& s : steps) lengths.push_back(std::max(s.backward.lead_ns, s.noise_ns));
  std::sort(lengths.begin(), lengths.end());
  const int64_t p90 = lengths[(lengths.size() - 1) * 9 / 10];
  const int64_t scale_ns = std::max<int64_t>(1, p90 + p90 / 10);
  const float row_h = std::round(fs * 1.45f);
  const float list_h = row_h * static_cast<float>(std::min(steps.size(), kVisibleStepRows)) + 2.0f;
  const int64_t current_step = ctx.state != nullptr ? ctx.state->step : -1;
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(ImGui::GetStyle().ItemSpacing.x, 0.0f));
  if (ImGui::BeginChild("steps", ImVec2(0.0f, list_h), false)) {
    const float width = ImGui::GetContentRegionAvail().x;
    const std::string widest_step = fmt::format("step {}", shown_count(steps.back().step));
    const float label_w = text_size(font, fs, widest_step).x + fs * 0.7f;
    const float rank_w = text_size(font, fs, "rank 00").x + fs * 1.6f;
    const float value_w = text_size(font, fs, "+000.0 ms").x + fs * 0.8f;
    const float bar_w = std::max(width - label_w - rank_w - value_w, fs * 2.0f);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    // Keep the playhead's step in view when it changes (not every frame: the list stays scrollable).
    if (current_step != followed_step_) {
      followed_step_ = current_step;
      const auto it = std::find_if(steps.begin(), steps.end(),
                                   [&](const trace::StepLateness& s) { return s.step == current_step; });
      if (it != steps.end()) {
        const float y = row_h * static_cast<float>(it - steps.begin());
        if (y < ImGui::GetScrollY() || y + row_h > ImGui::GetScrollY() + list_h)
          ImGui::SetScrollY(std::max(0.0f, y - row_h * 2.0f));
      }
    }
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(steps.size()), row_h);
    while (clipper.Step()) {
      for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
        const trace::StepLateness& s = steps[static_cast<size_t>(i)];
        const trace::Lateness& l = s.backward;
        const ImVec2 p0 = ImGui::GetCursorScreenPos();
        ImGui::PushID(i);
        const bool clicked = ImGui::InvisibleButton("##step", ImVec2(std::max(width, 1.0f), row_h));
        ImGui::PopID();
        const bool hovered = !ctx.headless && ImGui::IsItemHovered();
        const ImVec2 p1(p0.x + width, p0.y + row_h);
        const bool current = s.step == current_step;
        if (current) dl->AddRectFilled(p0, p1, with_alpha(pal.playhead, 0.22f), 3.0f);
        if (hovered) dl->AddRect(p0, p1, pal.selection, 3.0f);
        const float text_y = p0.y + (row_h - fs) * 0.5f;
        draw_text(dl, font, fs, ImVec2(p0.x + fs * 0.3f, text_y), current ? pal.text : pal.text_dim,
                  fmt::format("step {}", shown_count(s.step)));
        float x = p0.x + label_w;
        if (l.latest_rank >= 0 && l.lead_ns == 0) {
          // Every rank's last gradient at the same time (simulated ranks): no rank came last.
          draw_text(dl, font, fs, ImVec2(x, text_y), pal.text_dim, "even");
        } else if (l.latest_rank >= 0) {
          const float chip = fs * 0.8f;
          const float chip_y = p0.y + (row_h - chip) * 0.5f;
          dl->AddRectFilled(ImVec2(x, chip_y), ImVec2(x + chip, chip_y + chip), pal.rank_color(l.latest_rank),
                            2.0f);
          draw_text(dl, font, fs, ImVec2(x + chip + fs * 0.35f, text_y), pal.text,
                    fmt::format("rank {}", l.latest_rank));
        }
        x = p0.x + label_w + rank_w;
        const float bar_h = row_h * 0.5f;
        const float bar_y = p0.y + (row_h - bar_h) * 0.5f;
        auto x_of = [&](int64_t ns) {
          return x + bar_w * std::min(1.0f, static_cast<float>(static_cast<double>(ns) /
                                                               static_cast<double>(scale_ns)));
        };
        dl->AddRectFilled(ImVec2(x, bar_y), ImVec2(x + bar_w, bar_y + bar_h), pal.background, 2.0f);
        const ImU32 bar = l.above_noise ? pal.rank_color(l.latest_rank) : with_alpha(pal.text_dim, 0.45f);
        if (l.lead_ns > 0)
          dl->AddRectFilled(ImVec2(x, bar_y), ImVec2(std::max(x_of(l.lead_ns), x + 1.0f), bar_y + bar_h), bar,
                            2.0f);
        if (l.lead_ns > scale_ns) {
          const float tip_x = x + bar_w + fs * 0.35f;
          dl->AddTriangleFilled(ImVec2(x + bar_w, bar_y - bar_h * 0.3f), ImVec2(tip_x, bar_y + bar_h * 0.5f),
                                ImVec2(x + bar_w, bar_y + bar_h * 1.3f), bar);
        }
        const float tick = x_of(s.noise_ns);
        dl->AddLine(ImVec2(tick, bar_y - bar_h * 0.35f), ImVec2(tick, bar_y + bar_h * 1.35f), pal.text,
                    1.5f * pal.line_scale);
        draw_text(dl, font, fs, ImVec2(x + bar_w + fs * 0.5f, text_y),
                  l.above_noise ? pal.text : pal.text_dim,
                  l.latest_rank >= 0 ? format_duration(l.lead_ns) : "-");
        rows_.push_back({s.step, p0, p1, current, l.lead_ns == 0 ? -1 : l.latest_rank});
        if (hovered) {
          std::string tip = fmt::format("step {}: {}", shown_count(s.step), lateness_line(l, s.noise_ns));
          if (s.start_lead_ns != 0)
            tip += fmt::format("\nit began the step {} after the next latest rank",
                               format_duration(s.start_lead_ns));
          for (const trace::BucketLateness& b : s.buckets)
            tip += fmt::format("\nbucket {}: {}", b.bucket, lateness_line(b.lateness, s.noise_ns));
          tip += "\nclick: move the playhead to this step";
          ImGui::SetTooltip("%s", tip.c_str());
        }
        if (clicked) {
          if (const std::optional<Cursor> c = ctx.model->step_start(s.step)) ctx.seek(*c);
        }
      }
    }
  }
  ImGui::EndChild();
  ImGui::PopStyleVar();
  ImGui::TextDisabled("Whose last gradient came last, by how much; tick: noise. Click: go to the step.");
}

}  // namespace dpscope::viz
