// Drawing helpers.
#include "ui/draw_util.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "dpscope/base/format_bytes.hpp"
#include "replay/seek.hpp"

namespace dpscope::viz {

void draw_text(ImDrawList* dl, ImFont* font, float size, ImVec2 pos, ImU32 color, std::string_view text,
               const ImVec4* clip) {
  if (text.empty()) return;
  if (font == nullptr) font = ImGui::GetFont();
  const float room = clip != nullptr ? clip->z - pos.x : FLT_MAX;
  if (room <= 0.0f) return;
  if (text_size(font, size, text).x <= room) {
    dl->AddText(font, size, pos, color, text.data(), text.data() + text.size(), 0.0f, clip);
    return;
  }
  // Too wide for its clip: the longest prefix that fits followed by "...", never a cut letter (the
  // cut falls at the start of a UTF-8 character). Widths grow with the prefix: a binary search.
  const float dots = text_size(font, size, "...").x;
  std::vector<size_t> cuts;  // character boundaries
  for (size_t i = 1; i <= text.size(); ++i)
    if (i == text.size() || (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) cuts.push_back(i);
  size_t lo = 0;
  size_t hi = cuts.size();  // cuts[0..lo) fit
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (text_size(font, size, text.substr(0, cuts[mid])).x + dots <= room) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  size_t keep = lo == 0 ? 0 : cuts[lo - 1];
  while (keep > 0 && text[keep - 1] == ' ') --keep;
  if (lo < 3) return;  // "f..." says nothing: a label that cannot show three letters is left out
  const std::string shown = std::string(text.substr(0, keep)) + "...";
  dl->AddText(font, size, pos, color, shown.data(), shown.data() + shown.size(), 0.0f, clip);
}

float font_px(const ImFont* font) { return font->FontSize * font->Scale * ImGui::GetIO().FontGlobalScale; }

ImVec2 text_size(ImFont* font, float size, std::string_view text) {
  if (font == nullptr) font = ImGui::GetFont();
  return font->CalcTextSizeA(size, FLT_MAX, 0.0f, text.data(), text.data() + text.size());
}

void draw_text_centered(ImDrawList* dl, ImFont* font, float size, ImVec2 center, ImU32 color,
                        std::string_view text) {
  const ImVec2 ts = text_size(font, size, text);
  draw_text(dl, font, size, ImVec2(std::floor(center.x - ts.x * 0.5f), std::floor(center.y - ts.y * 0.5f)),
            color, text);
}

void draw_arrow(ImDrawList* dl, ImVec2 from, ImVec2 to, ImU32 color, float thickness, float head) {
  const float dx = to.x - from.x;
  const float dy = to.y - from.y;
  const float len = std::sqrt(dx * dx + dy * dy);
  if (len < 1e-3f) return;
  const float ux = dx / len;
  const float uy = dy / len;
  const ImVec2 base(to.x - ux * head, to.y - uy * head);
  dl->AddLine(from, base, color, thickness);
  const float w = head * 0.55f;
  dl->AddTriangleFilled(to, ImVec2(base.x - uy * w, base.y + ux * w),
                        ImVec2(base.x + uy * w, base.y - ux * w), color);
}

ImVec2 box_exit_point(ImVec2 center, ImVec2 half, ImVec2 toward) {
  const float dx = toward.x - center.x;
  const float dy = toward.y - center.y;
  if (std::fabs(dx) < 1e-6f && std::fabs(dy) < 1e-6f) return center;
  const float tx = std::fabs(dx) > 1e-6f ? half.x / std::fabs(dx) : FLT_MAX;
  const float ty = std::fabs(dy) > 1e-6f ? half.y / std::fabs(dy) : FLT_MAX;
  const float t = std::min({tx, ty, 1.0f});
  return ImVec2(center.x + dx * t, center.y + dy * t);
}

void legend_entry(ImU32 color, const char* label) {
  const float h = ImGui::GetTextLineHeight();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + h * 0.15f),
                                            ImVec2(p.x + h * 0.9f, p.y + h * 0.85f), color, 2.0f);
  ImGui::Dummy(ImVec2(h, h));
  ImGui::SameLine(0, h * 0.25f);
  ImGui::TextUnformatted(label);
}

std::string device_label(const ModelDevice& device) {
  if (device.is_host) return "host";
  if (device.kind == "sim" || device.kind == "cuda") {
    const size_t colon = device.name.find(':');
    if (colon != std::string::npos) return "GPU " + device.name.substr(colon + 1);
  }
  return device.name;
}

std::string describe_event(const ReplayModel& model, uint32_t event) {
  const trace::TraceData& data = model.data();
  const trace::Event& e = data.events[event];
  const std::string name(data.str(e.name));
  auto dev_name = [&](int32_t id) {
    const int d = model.device_index(id);
    return d >= 0 ? device_label(model.devices()[d]) : fmt::format("dev {}", id);
  };
  switch (e.type) {
    case trace::EventType::kSpan: return fmt::format("{} ({})", name, format_time(e.dur_ns));
    case trace::EventType::kTransfer: {
      const trace::Transfer& t = data.transfer(e);
      return fmt::format("{}: {} {} → {} ({})", name, format_bytes(t.bytes), dev_name(t.src), dev_name(t.dst),
                         format_time(e.dur_ns));
    }
    case trace::EventType::kInstant: {
      std::string args;
      if (auto g = data.grad_ready(e)) {
        const int index = g->param;
        const auto& params = data.header.params;
        args = index >= 0 && static_cast<size_t>(index) < params.size()
                   ? params[static_cast<size_t>(index)].name
                   : fmt::format("param {}", index);
      } else if (auto b = data.bucket_args(e)) {
        args = fmt::format("bucket {}", b->bucket);
      }
      return args.empty() ? name : fmt::format("{} {}", name, args);
    }
    case trace::EventType::kCounter: return fmt::format("counter {}", name);
    case trace::EventType::kValues: return fmt::format("values of {}", name);
    case trace::EventType::kSamples: return "samples";
    case trace::EventType::kBuckets: return "bucket assignment";
  }
  return name;
}

}  // namespace dpscope::viz
