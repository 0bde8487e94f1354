// Palettes: the normal one (dark, muted) and the classroom one (high contrast, for projectors).
#include "ui/palette.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

namespace dpscope::viz {

namespace {

constexpr ImU32 rgb(int r, int g, int b) { return IM_COL32(r, g, b, 255); }

// The category colours of both palettes: Okabe and Ito's eight colours for colour-blind viewers
// ("Color Universal Design", 2002; https://jfly.uni-koeln.de/color/), black replaced by a grey that
// reads on the dark canvas. tests/visualizer/palette_test.cpp checks every pair that carries a
// different meaning under simulated protanopia, deuteranopia and tritanopia.
constexpr ImU32 kOrange = rgb(230, 159, 0);           // #E69F00
constexpr ImU32 kSkyBlue = rgb(86, 180, 233);         // #56B4E9
constexpr ImU32 kBluishGreen = rgb(0, 158, 115);      // #009E73
constexpr ImU32 kYellow = rgb(240, 228, 66);          // #F0E442
constexpr ImU32 kBlue = rgb(0, 114, 178);             // #0072B2
constexpr ImU32 kVermillion = rgb(213, 94, 0);        // #D55E00
constexpr ImU32 kReddishPurple = rgb(204, 121, 167);  // #CC79A7
constexpr ImU32 kIdleGrey = rgb(96, 100, 110);
// Rank colours, in rank order, apart from the category colours above (a rank's chunk stripe is
// never mistaken for a memory category or a kind of work on the same card): colours of Paul Tol's
// schemes (https://personal.sron.nl/~pault/, "bright", "vibrant" and "light"), then grey and
// white, chosen so that every pair stays apart under the three simulated deficiencies
// (palette_test.cpp). Ranks 8 and up repeat them; the second cue for a rank is its number, in the
// colour square of its card's title, and its stripe's place in a chunk box (rank order).
constexpr std::array<ImU32, 8> kRankColors = {rgb(119, 170, 221), rgb(238, 102, 119), rgb(170, 170, 0),
                                              rgb(153, 221, 255), rgb(204, 51, 17),   rgb(238, 221, 136),
                                              rgb(187, 187, 187), rgb(255, 255, 255)};

void set_categories(Palette& p) {
  p.playhead = rgb(255, 255, 255);
  p.forward = kSkyBlue;
  p.backward = kReddishPurple;
  p.optimizer = kBluishGreen;
  p.data = kBlue;
  p.comm = kVermillion;
  p.copy = kYellow;
  p.reduce = kOrange;
  p.idle = kIdleGrey;
  p.memory = {p.forward, p.backward, p.optimizer, p.copy, rgb(220, 220, 220)};
  p.bucket = {kIdleGrey, kYellow, kVermillion, kBluishGreen};
}

}  // namespace

ImU32 with_alpha(ImU32 color, float alpha) {
  const ImU32 a = static_cast<ImU32>(std::clamp(alpha, 0.0f, 1.0f) * 255.0f + 0.5f);
  return (color & ~IM_COL32_A_MASK) | (a << IM_COL32_A_SHIFT);
}

ImU32 shade(ImU32 color, float amount) {
  ImVec4 c = ImGui::ColorConvertU32ToFloat4(color);
  const float target = amount > 0 ? 1.0f : 0.0f;
  const float t = std::fabs(amount);
  c.x += (target - c.x) * t;
  c.y += (target - c.y) * t;
  c.z += (target - c.z) * t;
  return ImGui::ColorConvertFloat4ToU32(c);
}

Palette Palette::normal() {
  Palette p;
  p.background = rgb(24, 26, 31);
  p.card = rgb(40, 44, 52);
  p.card_border = rgb(90, 96, 110);
  p.text = rgb(230, 232, 236);
  p.text_dim = rgb(150, 156, 168);
  p.grid = rgb(60, 64, 74);
  p.selection = rgb(255, 220, 90);
  p.link = rgb(80, 86, 100);
  p.other = rgb(120, 140, 160);
  p.merged = rgb(110, 118, 134);
  set_categories(p);
  p.error = rgb(255, 95, 95);
  p.warning = rgb(255, 196, 70);
  return p;
}

Palette Palette::classroom() {
  Palette p;
  p.high_contrast = true;
  p.line_scale = 1.8f;
  p.background = rgb(0, 0, 0);
  p.card = rgb(18, 18, 18);
  p.card_border = rgb(235, 235, 235);
  p.text = rgb(255, 255, 255);
  p.text_dim = rgb(205, 205, 205);
  p.grid = rgb(90, 90, 90);
  p.selection = rgb(255, 255, 0);
  p.link = rgb(140, 140, 140);
  p.other = rgb(170, 190, 210);
  p.merged = rgb(160, 160, 160);
  set_categories(p);
  p.error = rgb(255, 60, 60);
  p.warning = rgb(255, 215, 0);
  return p;
}

ImU32 Palette::phase_color(Phase phase) const {
  switch (phase) {
    case Phase::kForward: return forward;
    case Phase::kBackward: return backward;
    case Phase::kOptimizer: return optimizer;
    case Phase::kData: return data;
    case Phase::kCheckpoint: return other;
    case Phase::kNone: return idle;
  }
  return other;
}

ImU32 Palette::event_color(const trace::TraceData& trace_data, const trace::Event& e) const {
  if (e.type == trace::EventType::kTransfer)
    return trace_data.transfer(e).coll >= 0 || e.stream == StreamKind::kComm ? comm : copy;
  switch (e.category) {
    case SpanCategory::kComm: return comm;
    // A collective that ends in an error (a mismatch) never moves data: it waits, in the warning colour.
    case SpanCategory::kCollective: return trace_data.collective_error(e) ? warning : comm;
    case SpanCategory::kCopy: return copy;
    case SpanCategory::kReduce: return reduce;
    case SpanCategory::kOptimizer: return optimizer;
    case SpanCategory::kPhase: return with_alpha(phase_color(e.phase), 0.35f);
    case SpanCategory::kCompute:
    case SpanCategory::kOther: break;
  }
  return phase_color(e.phase) == idle ? other : phase_color(e.phase);
}

ImU32 Palette::sample_color(int64_t index) const {
  // Golden-ratio hue steps: neighbouring rows get clearly different colours.
  const double h = std::fmod(static_cast<double>(index < 0 ? -index : index) * 0.6180339887, 1.0);
  float r = 0, g = 0, b = 0;
  ImGui::ColorConvertHSVtoRGB(static_cast<float>(h), high_contrast ? 0.85f : 0.6f,
                              high_contrast ? 1.0f : 0.9f, r, g, b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, b, 1.0f));
}

ImU32 Palette::rank_color(int rank) const {
  return kRankColors[static_cast<size_t>(rank < 0 ? 0 : rank) % kRankColors.size()];
}

ImU32 Palette::text_on(ImU32 fill) const {
  const ImVec4 c = ImGui::ColorConvertU32ToFloat4(fill);
  const float luma = 0.299f * c.x + 0.587f * c.y + 0.114f * c.z;
  return luma > 0.55f ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
}

void Palette::apply_to_imgui(float scale) const {
  ImGuiStyle style;
  if (high_contrast) {
    ImGui::StyleColorsDark(&style);
    style.Colors[ImGuiCol_WindowBg] = ImVec4(0, 0, 0, 1);
    style.Colors[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 1);
    style.Colors[ImGuiCol_Text] = ImVec4(1, 1, 1, 1);
    style.Colors[ImGuiCol_Border] = ImVec4(0.9f, 0.9f, 0.9f, 1);
    style.Colors[ImGuiCol_TitleBg] = ImVec4(0.1f, 0.1f, 0.1f, 1);
    style.Colors[ImGuiCol_TitleBgActive] = ImVec4(0.15f, 0.15f, 0.15f, 1);
    style.Colors[ImGuiCol_Button] = ImVec4(0.15f, 0.35f, 0.75f, 1);
    style.Colors[ImGuiCol_FrameBg] = ImVec4(0.12f, 0.12f, 0.12f, 1);
    style.WindowBorderSize = 2.0f;
    style.FrameBorderSize = 1.0f;
  } else {
    ImGui::StyleColorsDark(&style);
    style.Colors[ImGuiCol_WindowBg] = ImVec4(0.11f, 0.12f, 0.14f, 1);
    style.Colors[ImGuiCol_ChildBg] = ImVec4(0.09f, 0.10f, 0.12f, 1);
  }
  style.WindowRounding = 3.0f;
  style.FrameRounding = 3.0f;
  style.WindowPadding = ImVec2(8, 6);
  style.ScaleAllSizes(scale);
  ImGui::GetStyle() = style;
}

}  // namespace dpscope::viz
