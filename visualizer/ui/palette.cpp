// Palettes: the normal one (dark, muted) and the classroom one (high contrast, for projectors).
#include "ui/palette.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace dpscope::viz {

namespace {

constexpr ImU32 rgb(int r, int g, int b) { return IM_COL32(r, g, b, 255); }

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
  p.playhead = rgb(255, 80, 80);
  p.selection = rgb(255, 220, 90);
  p.link = rgb(80, 86, 100);
  p.forward = rgb(66, 135, 245);
  p.backward = rgb(171, 104, 232);
  p.optimizer = rgb(64, 186, 108);
  p.data = rgb(38, 178, 190);
  p.comm = rgb(235, 94, 60);
  p.copy = rgb(232, 180, 45);
  p.reduce = rgb(224, 118, 168);
  p.other = rgb(120, 140, 160);
  p.idle = rgb(72, 76, 86);
  p.merged = rgb(110, 118, 134);
  p.memory = {rgb(66, 135, 245), rgb(171, 104, 232), rgb(64, 186, 108), rgb(232, 180, 45),
              rgb(130, 136, 150)};
  p.bucket = {rgb(92, 98, 112), rgb(232, 180, 45), rgb(235, 94, 60), rgb(64, 186, 108)};
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
  p.playhead = rgb(255, 40, 40);
  p.selection = rgb(255, 255, 0);
  p.link = rgb(140, 140, 140);
  p.forward = rgb(30, 144, 255);
  p.backward = rgb(200, 90, 255);
  p.optimizer = rgb(0, 220, 90);
  p.data = rgb(0, 225, 225);
  p.comm = rgb(255, 70, 20);
  p.copy = rgb(255, 215, 0);
  p.reduce = rgb(255, 105, 180);
  p.other = rgb(170, 190, 210);
  p.idle = rgb(70, 70, 70);
  p.merged = rgb(160, 160, 160);
  p.memory = {rgb(30, 144, 255), rgb(200, 90, 255), rgb(0, 220, 90), rgb(255, 215, 0), rgb(190, 190, 190)};
  p.bucket = {rgb(110, 110, 110), rgb(255, 215, 0), rgb(255, 70, 20), rgb(0, 220, 90)};
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
    case SpanCategory::kComm:
    case SpanCategory::kCollective: return comm;
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
