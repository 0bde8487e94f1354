// The node-level stage's geometry and phase lookup (ui/node_stage_layout.hpp).
#include "ui/node_stage_layout.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace dpscope::viz {
namespace {

constexpr float kMinGpuCellPx = 3.0f;  // narrower GPU cells are not drawn: the tile stays a box

}  // namespace

float NodeGridLayout::rail_y(int row, int rail) const {
  const NodeRect& band = rail_bands[static_cast<size_t>(row)];
  return band.y0 + band.height() * (static_cast<float>(rail) + 0.5f) / static_cast<float>(std::max(1, rails));
}

NodeGridLayout layout_node_grid(int nodes, int gpus_per_node, NodeRect area, float font_px) {
  NodeGridLayout g;
  if (nodes <= 0 || gpus_per_node <= 0 || area.width() <= 0 || area.height() <= 0) return g;
  g.rails = gpus_per_node;
  // A column for the rows' labels ("0", "26", ... up to the last node's number) on the left.
  const float row_label_w = font_px * (nodes >= 100 ? 2.2f : 1.6f);
  area.x0 += row_label_w;
  const float gap = std::max(2.0f, font_px * 0.3f);
  const float label_h = font_px * 1.15f;
  // Each row of tiles has a rail band under it, one thin line per rail.
  // A few rows get a rail band whose lines stand apart (4 px each); many rows, a thin one.
  const float rails_f = static_cast<float>(gpus_per_node);
  auto band_of = [&](int rows) {
    return rows <= 2 ? std::min(font_px * 3.0f, rails_f * 4.0f)
                     : std::max(4.0f, std::min(font_px * 0.9f, rails_f * 2.0f));
  };
  // A tile never grows past this: a few nodes stay boxes of readable size, not walls.
  const float max_tile_h = font_px * 9.0f;
  // The column count that gives the largest tiles whose width is at least their height (a node
  // holds a row of GPUs).
  float best_score = -1.0f;
  for (int c = 1; c <= nodes; ++c) {
    const int r = (nodes + c - 1) / c;
    const float w = (area.width() - gap * static_cast<float>(c - 1)) / static_cast<float>(c);
    const float band_h = band_of(r);
    const float h = (area.height() - (gap + band_h) * static_cast<float>(r)) / static_cast<float>(r);
    if (w <= 0 || h <= 0) continue;
    const float tile_h = std::min({h, w, max_tile_h});  // never taller than wide
    const float tile_w = std::min(w, 3.0f * tile_h);    // nor much wider than tall
    const float score = std::min(tile_w, 2.0f * tile_h) * tile_h;
    if (score > best_score) {
      best_score = score;
      g.columns = c;
    }
  }
  if (g.columns == 0) g.columns = nodes;
  g.rows = (nodes + g.columns - 1) / g.columns;
  const float w = (area.width() - gap * static_cast<float>(g.columns - 1)) / static_cast<float>(g.columns);
  const float band_h = band_of(g.rows);
  const float h = (area.height() - (gap + band_h) * static_cast<float>(g.rows)) / static_cast<float>(g.rows);
  const float tile_h = std::max(1.0f, std::min({h, w, max_tile_h}));
  const float tile_w = std::max(1.0f, std::min(w, 3.0f * tile_h));
  // Centre the grid in the area.
  const float grid_w = tile_w * static_cast<float>(g.columns) + gap * static_cast<float>(g.columns - 1);
  const float grid_h = (tile_h + band_h + gap) * static_cast<float>(g.rows) - gap;
  const float left = area.x0 + std::max(0.0f, (area.width() - grid_w) * 0.5f);
  const float top = area.y0 + std::max(0.0f, (area.height() - grid_h) * 0.5f);
  for (int row = 0; row < g.rows; ++row) {
    const float y = top + static_cast<float>(row) * (tile_h + band_h + gap);
    g.rail_bands.push_back({left, y + tile_h, left + grid_w, y + tile_h + band_h});
    g.row_labels.push_back({left - row_label_w, y, left - gap * 0.5f, y + tile_h});
  }
  const float cell_w = (tile_w - 2.0f) / static_cast<float>(gpus_per_node);
  for (int k = 0; k < nodes; ++k) {
    const int row = k / g.columns;
    const int col = k % g.columns;
    NodeTile t;
    t.node = k;
    const float x = left + static_cast<float>(col) * (tile_w + gap);
    const float y = top + static_cast<float>(row) * (tile_h + band_h + gap);
    const float x1 = std::min(x + tile_w, area.x1);  // never past the area by rounding
    t.box = {x, y, x1, y + tile_h};
    const float lh = std::min(label_h, tile_h * 0.45f);
    t.label = {x, y, x1, y + lh};
    const float rest = tile_h - lh;
    // Room for GPUs: cells at least kMinGpuCellPx wide and the switch bar plus the cells fit.
    const bool gpus = cell_w >= kMinGpuCellPx && rest >= 3.0f * kMinGpuCellPx;
    if (gpus) {
      const float phase_h = rest * 0.3f;
      t.phases = {x + 1, y + lh, x1 - 1, y + lh + phase_h};
      const float sw_h = rest * 0.25f;
      t.nvswitch = NodeRect{x + 1, t.phases.y1 + 1, x1 - 1, t.phases.y1 + 1 + sw_h - 1};
      const float gy0 = t.nvswitch->y1 + 1;
      const float gy1 = y + tile_h - 1;
      for (int i = 0; i < gpus_per_node; ++i) {
        const float cx = x + 1 + cell_w * static_cast<float>(i);
        t.gpus.push_back({cx + 0.5f, gy0, cx + cell_w - 0.5f, std::max(gy0 + 1, gy1)});
      }
    } else {
      t.phases = {x + 1, y + lh, x1 - 1, y + tile_h - 1};
    }
    g.tiles.push_back(std::move(t));
  }
  return g;
}

NodeZoomLayout layout_node_zoom(int gpus_per_node, NodeRect area, float font_px) {
  NodeZoomLayout z;
  if (gpus_per_node <= 0 || area.width() <= 0 || area.height() <= 0) return z;
  const float gap = font_px * 0.6f;
  const float n = static_cast<float>(gpus_per_node);
  const float cell_w = (area.width() - gap * (n + 1)) / n;
  const float caption_h = font_px * 1.4f;
  // Rows: switch, GPUs, NICs, rails, caption.
  const float usable = area.height() - caption_h - gap * 4;
  const float switch_h = std::min(font_px * 2.4f, usable * 0.18f);
  const float nic_h = std::min(font_px * 2.0f, usable * 0.16f);
  // The GPUs before the rails: their two lines ("GPU k", "rank r") need about 2.6 lines of text;
  // a rail is a line, and keeps at least one line's height.
  const float gpu_h =
      std::max(std::min(font_px * 4.0f, usable - switch_h - nic_h - font_px * 1.2f), usable * 0.34f);
  z.nvswitch = {area.x0 + gap, area.y0, area.x1 - gap, area.y0 + switch_h};
  const float gpu_y = z.nvswitch.y1 + gap * 1.5f;
  const float nic_y = gpu_y + gpu_h + gap;
  const float rail_bottom = area.y1 - caption_h - gap * 0.5f;
  for (int k = 0; k < gpus_per_node; ++k) {
    const float x = area.x0 + gap + static_cast<float>(k) * (cell_w + gap);
    z.gpus.push_back({x, gpu_y, x + cell_w, gpu_y + gpu_h});
    z.nics.push_back({x + cell_w * 0.15f, nic_y, x + cell_w * 0.85f, nic_y + nic_h});
    const float mid = x + cell_w * 0.5f;
    const float rail_w = std::max(2.0f, font_px * 0.25f);
    z.rails.push_back(
        {mid - rail_w * 0.5f, nic_y + nic_h, mid + rail_w * 0.5f, std::max(nic_y + nic_h + 1, rail_bottom)});
  }
  z.rail_label = {area.x0 + gap, rail_bottom + gap * 0.5f, area.x1 - gap, area.y1};
  return z;
}

std::optional<CollectivePhases> collective_phases(const trace::TraceData& data, const trace::Event& e) {
  if (e.type != EventType::kSpan || e.category != SpanCategory::kCollective || e.payload < 0)
    return std::nullopt;
  CollectivePhases p;
  int found = 0;
  for (const auto& [key, value] : data.arg_values(data.args[static_cast<size_t>(e.payload)])) {
    const std::string_view k = data.strings[key];
    if (k.rfind("phase_", 0) != 0) continue;
    const auto v = static_cast<int64_t>(std::llround(value));
    if (k == "phase_rs_start_ns")
      p.rs_start_ns = v, ++found;
    else if (k == "phase_rs_dur_ns")
      p.rs_dur_ns = v, ++found;
    else if (k == "phase_net_start_ns")
      p.net_start_ns = v, ++found;
    else if (k == "phase_net_dur_ns")
      p.net_dur_ns = v, ++found;
    else if (k == "phase_ag_start_ns")
      p.ag_start_ns = v, ++found;
    else if (k == "phase_ag_dur_ns")
      p.ag_dur_ns = v, ++found;
  }
  if (found != 6) return std::nullopt;
  return p;
}

ActivePhases active_phases(const CollectivePhases& p, int64_t t_ns) {
  auto in = [t_ns](int64_t start, int64_t dur) { return t_ns >= start && t_ns < start + dur; };
  return {.rs = in(p.rs_start_ns, p.rs_dur_ns),
          .net = in(p.net_start_ns, p.net_dur_ns),
          .ag = in(p.ag_start_ns, p.ag_dur_ns)};
}

}  // namespace dpscope::viz
