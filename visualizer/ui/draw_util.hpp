// Small drawing helpers shared by the views (ImDrawList only): clipped text, arrows, the point
// where a line leaves a box, colour-key entries, and human descriptions of events.
#pragma once

#include <string>
#include <string_view>

#include <imgui.h>

#include "replay/replay_model.hpp"

namespace dpscope::viz {

// Text clipped to `clip` (x0, y0, x1, y1): when too wide, the longest prefix that fits and "...";
// nothing when not even three letters fit.
void draw_text(ImDrawList* dl, ImFont* font, float size, ImVec2 pos, ImU32 color, std::string_view text,
               const ImVec4* clip = nullptr);
// Text centred on `center`.
void draw_text_centered(ImDrawList* dl, ImFont* font, float size, ImVec2 center, ImU32 color,
                        std::string_view text);
ImVec2 text_size(ImFont* font, float size, std::string_view text);
// `font`'s size in pixels as text is drawn now: its atlas size times the global font scale that
// presentation mode sets from the window size (ui/viewer.hpp, present_text_scale). Views read font
// sizes through this, never font->FontSize.
float font_px(const ImFont* font);
// A line from `from` to `to` with a filled head at `to`.
void draw_arrow(ImDrawList* dl, ImVec2 from, ImVec2 to, ImU32 color, float thickness, float head);
// Where the segment from the centre of the box (center ± half) towards `toward` crosses its border.
ImVec2 box_exit_point(ImVec2 center, ImVec2 half, ImVec2 toward);
// A colour swatch and label at the cursor, on the current line (ImGui layout).
void legend_entry(ImU32 color, const char* label);

// "forward 2.Linear (12.3 µs)", "ring all-gather 64.00 KiB sim:1 → sim:2" for tooltips and lists.
std::string describe_event(const ReplayModel& model, uint32_t event);
// "GPU 0" for simulated/real GPUs, "host" for the host, otherwise the device name.
std::string device_label(const ModelDevice& device);

}  // namespace dpscope::viz
