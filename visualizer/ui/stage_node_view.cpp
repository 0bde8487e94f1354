// The node-level stage (ui/stage_view.hpp, lesson 12): a world of many nodes as tiles, or one node
// zoomed in, with the phases of the hierarchical all-reduce running at the cursor.
//
// A timing-only trace records GPU 0 only, and the analytic model runs the same schedule on every
// node; so every tile shows GPU 0's node, and the stage says so instead of inventing differences.
//
//   Sections: status lines · grid · zoom · legend · draw_node_stage().
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "replay/seek.hpp"
#include "ui/draw_util.hpp"
#include "ui/stage_view.hpp"

namespace dpscope::viz {
namespace {

ImVec2 tl(const NodeRect& r) { return ImVec2(r.x0, r.y0); }
ImVec2 br(const NodeRect& r) { return ImVec2(r.x1, r.y1); }

// The phases' colours (Okabe-Ito, from the palette) and names; the number is the second cue.
struct PhaseStyle {
  ImU32 color;
  const char* number;
  const char* name;
  const char* short_name;
};
std::array<PhaseStyle, 3> phase_styles(const Palette& pal) {
  return {{{pal.reduce, "1", "reduce-scatter in the node (NVLink)", "reduce-scatter"},
           {pal.data, "2", "all-reduce across nodes (rails)", "across nodes"},
           {pal.optimizer, "3", "all-gather in the node (NVLink)", "all-gather"}}};
}

std::string rate(double bytes_per_s) { return fmt::format("{:.0f} GB/s", bytes_per_s / 1e9); }

// Where `text` goes centred in `r`, when it fits there.
std::optional<NodeRect> text_place(ImFont* font, float px, const NodeRect& r, const std::string& text) {
  const ImVec2 ts = text_size(font, px, text);
  if (ts.x > r.width() - 2 || ts.y > r.height() + 1) return std::nullopt;
  const float x0 = (r.x0 + r.x1 - ts.x) * 0.5f;
  const float y0 = (r.y0 + r.y1 - ts.y) * 0.5f;
  return NodeRect{x0, y0, x0 + ts.x, y0 + ts.y};
}

// Text drawn only when it fits `r` (centred); returns whether it was drawn.
bool text_in(ImDrawList* dl, ImFont* font, float px, const NodeRect& r, ImU32 color,
             const std::string& text) {
  const std::optional<NodeRect> at = text_place(font, px, r, text);
  if (at) draw_text(dl, font, px, ImVec2(at->x0, at->y0), color, text);
  return at.has_value();
}

}  // namespace

// ---- grid ----

void StageView::draw_node_grid(const ViewContext& ctx, ImDrawList* dl, const TraceClusterInfo& c) {
  const Palette& pal = *ctx.palette;
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const float small_px = font_px(small);
  const auto styles = phase_styles(pal);
  const bool phase_on[3] = {node_phases_.rs, node_phases_.net, node_phases_.ag};
  const ImU32 gpu_fill = pal.text_dim;  // GPUs neutral: the phase colours belong to the all-reduce
  const float line = std::max(1.0f, pal.line_scale);
  // Rails first, under the tiles: rail k runs past GPU k of every node of the row.
  for (int row = 0; row < node_grid_.rows; ++row) {
    const NodeRect& band = node_grid_.rail_bands[static_cast<size_t>(row)];
    for (int k = 0; k < node_grid_.rails; ++k) {
      const float y = node_grid_.rail_y(row, k);
      dl->AddLine(ImVec2(band.x0, y), ImVec2(band.x1, y), node_phases_.net ? styles[1].color : pal.link,
                  node_phases_.net ? line * 1.5f : line * 0.75f);
    }
  }
  // One label style for every tile, the one the last (widest) number fits: "node 127", or "127".
  bool every_tile_labelled = !node_grid_.tiles.empty();
  bool with_word = every_tile_labelled;
  if (every_tile_labelled) {
    const NodeRect& last = node_grid_.tiles.back().label;
    auto fits = [&](const std::string& text) {
      const ImVec2 ts = text_size(small, small_px, text);
      return ts.x <= last.width() - 2 && ts.y <= last.height() + 1;
    };
    with_word = fits(fmt::format("node {}", node_grid_.tiles.back().node));
    every_tile_labelled = with_word || fits(fmt::format("{}", node_grid_.tiles.back().node));
  }
  for (const NodeTile& t : node_grid_.tiles) {
    dl->AddRectFilled(tl(t.box), br(t.box), pal.card, 3.0f);
    dl->AddRect(tl(t.box), br(t.box), pal.card_border, 3.0f, 0, line * 0.75f);
    if (every_tile_labelled)
      text_in(dl, small, small_px, t.label, pal.text,
              with_word ? fmt::format("node {}", t.node) : fmt::format("{}", t.node));
    // The three phase bands, left to right in their order, lit while their phase runs.
    const float third = t.phases.width() / 3.0f;
    for (int i = 0; i < 3; ++i) {
      const NodeRect band{t.phases.x0 + third * static_cast<float>(i) + 0.5f, t.phases.y0,
                          t.phases.x0 + third * static_cast<float>(i + 1) - 0.5f, t.phases.y1};
      const PhaseStyle& style = styles[static_cast<size_t>(i)];
      const ImU32 fill = phase_on[i] ? style.color : pal.grid;
      dl->AddRectFilled(tl(band), br(band), fill);
      // Its number, dim while it does not run, and its short name where there is room.
      const ImU32 ink = phase_on[i] ? pal.text_on(fill) : pal.text_dim;
      if (!text_in(dl, small, small_px, band, ink, fmt::format("{} {}", style.number, style.short_name)))
        text_in(dl, small, small_px, band, ink, style.number);
    }
    if (t.nvswitch) {  // the phase bands above carry the phases; the switch stays one colour
      const ImU32 fill = pal.link;
      dl->AddRectFilled(tl(*t.nvswitch), br(*t.nvswitch), fill, 2.0f);
      if (!text_in(dl, small, small_px, *t.nvswitch, pal.text_on(fill), "NVSwitch"))
        text_in(dl, small, small_px, *t.nvswitch, pal.text_on(fill), "NVS");
    }
    const int row = t.node / std::max(1, node_grid_.columns);
    for (size_t k = 0; k < t.gpus.size(); ++k) {
      const NodeRect& g = t.gpus[k];
      dl->AddRectFilled(tl(g), br(g), gpu_fill, 1.0f);
      if (!text_in(dl, small, small_px, g, pal.text_on(gpu_fill), fmt::format("GPU {}", k)))
        text_in(dl, small, small_px, g, pal.text_on(gpu_fill), fmt::format("{}", k));
      const float x = (g.x0 + g.x1) * 0.5f;
      dl->AddLine(ImVec2(x, t.box.y1), ImVec2(x, node_grid_.rail_y(row, static_cast<int>(k))),
                  node_phases_.net ? styles[1].color : pal.link, line * 0.75f);
    }
  }
  // Tiles too small for their numbers: each row says which node it starts with.
  if (!every_tile_labelled)
    for (size_t row = 0; row < node_grid_.row_labels.size(); ++row) {
      const NodeRect& r = node_grid_.row_labels[row];
      const std::string first = fmt::format("{}", row * static_cast<size_t>(node_grid_.columns));
      const ImVec2 ts = text_size(small, small_px, first);
      draw_text(dl, small, small_px, ImVec2(r.x1 - ts.x, (r.y0 + r.y1 - ts.y) * 0.5f), pal.text_dim, first);
    }
  (void)c;
}

// ---- zoom ----

void StageView::draw_node_zoom(const ViewContext& ctx, ImDrawList* dl, const TraceClusterInfo& c) {
  const Palette& pal = *ctx.palette;
  const float fs = ImGui::GetFontSize();
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
  const auto styles = phase_styles(pal);
  const float line = std::max(1.0f, pal.line_scale);
  const NodeZoomLayout& z = node_zoom_;
  const bool nvlink = node_phases_.rs || node_phases_.ag;
  const ImU32 nvlink_color = node_phases_.rs ? styles[0].color : styles[2].color;
  // NVLink from every GPU to the switch, then the boxes over them.
  for (const NodeRect& g : z.gpus) {
    const float x = (g.x0 + g.x1) * 0.5f;
    dl->AddLine(ImVec2(x, z.nvswitch.y1), ImVec2(x, g.y0), nvlink ? nvlink_color : pal.link,
                nvlink ? line * 3.0f : line * 1.5f);
  }
  const ImU32 sw_fill = nvlink ? nvlink_color : pal.card;
  dl->AddRectFilled(tl(z.nvswitch), br(z.nvswitch), sw_fill, 4.0f);
  dl->AddRect(tl(z.nvswitch), br(z.nvswitch), pal.card_border, 4.0f, 0, line);
  // The phase's number beside its colour: colour is never the only cue.
  const std::string nvlink_phase = node_phases_.rs && node_phases_.ag ? " · phases 1 and 3"
                                   : node_phases_.rs                  ? " · phase 1"
                                   : node_phases_.ag                  ? " · phase 3"
                                                                      : "";
  // The switch's label, the longest that fits: in the bar's bold type, else in the small one (a short
  // stage, lesson 12 at 1280x720, leaves the bar one small line high); never a label over its edges.
  const std::string bandwidth = rate(c.intra_bandwidth_bytes_per_s);
  const std::string labels[] = {
      fmt::format("NVSwitch: {} {} per GPU each way{}", c.intra_link, bandwidth, nvlink_phase),
      fmt::format("NVSwitch: {} {}{}", c.intra_link, bandwidth, nvlink_phase),
      fmt::format("NVSwitch{}", nvlink_phase),
      "NVSwitch",
  };
  node_switch_label_ = {};
  node_switch_label_text_.clear();
  for (ImFont* font : {bold, small}) {
    for (const std::string& label : labels)
      if (const std::optional<NodeRect> at = text_place(font, font_px(font), z.nvswitch, label)) {
        draw_text(dl, font, font_px(font), ImVec2(at->x0, at->y0), pal.text_on(sw_fill), label);
        node_switch_label_ = *at;
        node_switch_label_text_ = label;
        break;
      }
    if (!node_switch_label_text_.empty()) break;
  }
  const ImU32 gpu_fill = pal.text_dim;
  for (size_t k = 0; k < z.gpus.size(); ++k) {
    const NodeRect& g = z.gpus[k];
    dl->AddRectFilled(tl(g), br(g), pal.card, 4.0f);
    dl->AddRect(tl(g), br(g), pal.card_border, 4.0f, 0, line);
    const NodeRect top{g.x0, g.y0, g.x1, g.y0 + g.height() * 0.5f};
    const NodeRect bottom{g.x0 + 3, top.y1, g.x1 - 3, g.y1 - 3};
    text_in(dl, bold, font_px(bold), top, pal.text, fmt::format("GPU {}", k));
    dl->AddRectFilled(tl(bottom), br(bottom), gpu_fill, 2.0f);
    const int rank = zoom_node_ * c.gpus_per_node + static_cast<int>(k);
    text_in(dl, small, font_px(small), bottom, pal.text_on(gpu_fill), fmt::format("rank {}", rank));
    // GPU -> its NIC, the NIC, its rail.
    const NodeRect& nic = z.nics[k];
    const float x = (g.x0 + g.x1) * 0.5f;
    dl->AddLine(ImVec2(x, g.y1), ImVec2(x, nic.y0), pal.link, line * 1.5f);
    const ImU32 nic_fill = node_phases_.net ? styles[1].color : pal.card;
    dl->AddRectFilled(tl(nic), br(nic), nic_fill, 3.0f);
    dl->AddRect(tl(nic), br(nic), pal.card_border, 3.0f, 0, line);
    if (!text_in(dl, small, font_px(small), nic, pal.text_on(nic_fill),
                 fmt::format("NIC {}{}", k, node_phases_.net ? " · phase 2" : "")) &&
        !text_in(dl, small, font_px(small), nic, pal.text_on(nic_fill), fmt::format("NIC {}", k)))
      text_in(dl, small, font_px(small), nic, pal.text_on(nic_fill), fmt::format("{}", k));
    const NodeRect& rail = z.rails[k];
    dl->AddRectFilled(tl(rail), br(rail), node_phases_.net ? styles[1].color : pal.link);
    text_in(dl, small, font_px(small),
            NodeRect{rail.x0 - fs * 3, rail.y1 - font_px(small) * 1.2f, rail.x0 - 2, rail.y1}, pal.text_dim,
            fmt::format("rail {}", k));
  }
  const std::string caption = fmt::format("rail k: {} {} each way to GPU k of the other {} nodes",
                                          c.rail_kind, rate(c.rail_bandwidth_bytes_per_s), c.nodes - 1);
  if (!text_in(dl, small, font_px(small), z.rail_label, pal.text, caption))
    text_in(dl, small, font_px(small), z.rail_label, pal.text, "rail k: to GPU k of every other node");
}

// ---- legend ----

float StageView::draw_node_legend(const ViewContext& ctx, ImDrawList* dl, ImVec2 origin, float width,
                                  bool measure_only) {
  const Palette& pal = *ctx.palette;
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const float px = font_px(small);
  const float gap = px * 0.9f;
  float x = origin.x + gap * 0.5f;
  float y = origin.y + px * 0.3f;
  const float row_h = px * 1.5f;
  auto entry = [&](ImU32 color, const std::string& label) {
    const float w = px + px * 0.4f + text_size(small, px, label).x + gap;
    if (x + w > origin.x + width && x > origin.x + gap) {
      x = origin.x + gap * 0.5f;
      y += row_h;
    }
    if (!measure_only) {
      dl->AddRectFilled(ImVec2(x, y + px * 0.1f), ImVec2(x + px, y + px * 1.1f), color, 2.0f);
      draw_text(dl, small, px, ImVec2(x + px * 1.4f, y), pal.text, label);
    }
    x += w;
  };
  const auto styles = phase_styles(pal);
  for (const PhaseStyle& s : styles) entry(s.color, fmt::format("{} {}", s.number, s.name));
  entry(pal.grid, "phase not running");
  entry(pal.link, "idle link / rail");
  return y + row_h - origin.y;
}

// ---- the stage ----

void StageView::draw_node_stage(ViewContext& ctx, ImDrawList* dl, ImVec2 origin, ImVec2 size,
                                const TraceClusterInfo& c) {
  node_stage_drawn_ = true;
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  const float fs = ImGui::GetFontSize();
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  if (zoom_node_ >= c.nodes) zoom_node_ = -1;
  // The collective on GPU 0's comm stream at the cursor, and its phases.
  node_phases_ = {};
  std::string comm_text;
  std::string compute_text;
  for (size_t d = 0; d < ctx.state->devices.size() && d < model.devices().size(); ++d) {
    if (model.devices()[d].is_host || model.devices()[d].is_switch) continue;
    for (const StreamActivity& a : ctx.state->devices[d].activity) {
      if (a.event == kNoEvent) continue;
      if (a.stream == StreamKind::kCompute && compute_text.empty()) compute_text = a.text;
      if (a.stream != StreamKind::kComm || !comm_text.empty()) continue;
      comm_text = a.text;
      const trace::Event& e = model.data().events[a.event];
      if (const std::optional<CollectivePhases> p = collective_phases(model.data(), e)) {
        node_phases_ = active_phases(*p, ctx.state->cursor.t_ns - e.ts_ns);
        comm_text +=
            fmt::format(" ({} of {})", format_time(ctx.state->cursor.t_ns - e.ts_ns), format_time(e.dur_ns));
      }
    }
    break;  // GPU 0 stands for every GPU
  }
  // Status lines: what the picture stands for, then what is running (wrapped at words).
  const float wrap_w = size.x - fs * 1.0f;
  auto wrapped = [&](ImFont* font, float px, const std::string& text, ImU32 color, float y_at) {
    std::string line;
    size_t from = 0;
    float y_line = y_at;
    while (from < text.size()) {
      size_t to = text.find(' ', from);
      if (to == std::string::npos) to = text.size();
      const std::string word = text.substr(from, to - from);
      const std::string joined = line.empty() ? word : line + " " + word;
      if (!line.empty() && text_size(font, px, joined).x > wrap_w) {
        draw_text(dl, font, px, ImVec2(origin.x + fs * 0.5f, y_line), color, line);
        y_line += px * 1.3f;
        line = word;
      } else {
        line = joined;
      }
      from = to + 1;
    }
    if (!line.empty()) {
      draw_text(dl, font, px, ImVec2(origin.x + fs * 0.5f, y_line), color, line);
      y_line += px * 1.3f;
    }
    return y_line;
  };
  float y = origin.y;
  const std::string world = fmt::format(
      "{} nodes x {} GPUs = {} GPUs. Timing-only: GPU 0 is traced and the model runs the same "
      "schedule on every node, so every tile shows node 0's state.",
      c.nodes, c.gpus_per_node, c.nodes * c.gpus_per_node);
  y = wrapped(small, font_px(small), world, pal.text_dim, y);
  std::string phases;
  const auto styles = phase_styles(pal);
  const bool on[3] = {node_phases_.rs, node_phases_.net, node_phases_.ag};
  for (int i = 0; i < 3; ++i)
    if (on[i])
      phases += fmt::format("{}{} {}", phases.empty() ? "" : " + ", styles[static_cast<size_t>(i)].number,
                            styles[static_cast<size_t>(i)].name);
  node_status_ = comm_text.empty() ? "no collective running"
                 : phases.empty()  ? fmt::format("{} (one algorithm, no phases)", comm_text)
                                   : fmt::format("{}: {}", comm_text, phases);
  if (!compute_text.empty()) node_status_ = fmt::format("compute: {} · {}", compute_text, node_status_);
  y = wrapped(ImGui::GetFont(), fs, node_status_, pal.text, y) + fs * 0.1f;

  const float legend_h = draw_node_legend(ctx, dl, ImVec2(origin.x, 0), size.x, true);
  const NodeRect area{origin.x + fs * 0.5f, y + fs * 0.2f, origin.x + size.x - fs * 0.5f,
                      origin.y + size.y - legend_h - fs * 0.4f};
  const bool interactive = !ctx.headless && ImGui::IsWindowHovered();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  if (zoom_node_ < 0) {
    node_grid_ = layout_node_grid(c.nodes, c.gpus_per_node, area, font_px(small));
    node_zoom_ = {};
    node_switch_label_ = {};
    node_switch_label_text_.clear();
    draw_node_grid(ctx, dl, c);
    if (interactive && ImGui::IsMouseClicked(0))
      for (const NodeTile& t : node_grid_.tiles)
        if (t.box.contains(mouse.x, mouse.y)) zoom_node_ = t.node;
  } else {
    // "all nodes" to zoom back out, left of the node's title.
    ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
    const std::string back = "< all nodes (Esc)";
    const ImVec2 bs = text_size(small, font_px(small), back);
    zoom_out_button_ = {area.x0, area.y0, area.x0 + bs.x + fs, area.y0 + bs.y + fs * 0.4f};
    dl->AddRectFilled(tl(zoom_out_button_), br(zoom_out_button_), pal.card, 3.0f);
    dl->AddRect(tl(zoom_out_button_), br(zoom_out_button_), pal.card_border, 3.0f);
    text_in(dl, small, font_px(small), zoom_out_button_, pal.text, back);
    draw_text(dl, bold, font_px(bold), ImVec2(zoom_out_button_.x1 + fs, area.y0), pal.text,
              fmt::format("node {} of {}: ranks {}-{}", zoom_node_, c.nodes, zoom_node_ * c.gpus_per_node,
                          (zoom_node_ + 1) * c.gpus_per_node - 1));
    const NodeRect inner{area.x0, zoom_out_button_.y1 + fs * 0.6f, area.x1, area.y1};
    node_zoom_ = layout_node_zoom(c.gpus_per_node, inner, fs);
    node_grid_ = {};
    draw_node_zoom(ctx, dl, c);
    if (interactive && ImGui::IsMouseClicked(0) && zoom_out_button_.contains(mouse.x, mouse.y))
      zoom_node_ = -1;
    if (!ctx.headless && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) zoom_node_ = -1;
  }
  const float legend_y = origin.y + size.y - legend_h;
  dl->AddLine(ImVec2(origin.x, legend_y - fs * 0.15f), ImVec2(origin.x + size.x, legend_y - fs * 0.15f),
              pal.grid);
  draw_node_legend(ctx, dl, ImVec2(origin.x, legend_y), size.x, false);
}

}  // namespace dpscope::viz
