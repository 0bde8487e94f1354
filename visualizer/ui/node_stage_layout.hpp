// The node-level stage of a timing-only run whose world spans nodes (lesson 12): where the node
// tiles, their GPUs, NVSwitch and rails go, and which phase of a hierarchical all-reduce is running
// at a moment. Pure geometry and trace lookups — no ImGui drawing — so tests check the layout
// (128 tiles for 1,024 GPUs, nothing overlapping) without a window. stage_node_view.cpp draws it.
//
//   Grid (all nodes): tiles in rows; a tile is its label row on top, then when there is room the
//   NVSwitch bar and a row of its GPU cells; below each row of tiles a rail band where rail k runs
//   past GPU k of every node (a rail-optimized fabric).
//   Zoom (one node): the NVSwitch across the top, the node's GPUs below it, each GPU's NIC under it
//   and its rail leaving downwards to "GPU k of the other nodes".
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "dpscope/trace_format/events.hpp"
#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::viz {

struct NodeRect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  float width() const { return x1 - x0; }
  float height() const { return y1 - y0; }
  bool overlaps(const NodeRect& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  bool contains(const NodeRect& o) const { return o.x0 >= x0 && o.x1 <= x1 && o.y0 >= y0 && o.y1 <= y1; }
  bool contains(float x, float y) const { return x >= x0 && x < x1 && y >= y0 && y < y1; }
};

struct NodeTile {
  int node = 0;
  NodeRect box;                      // the node
  NodeRect label;                    // its label row ("node 12"), the top of the box
  NodeRect phases;                   // the three phase bands of a hierarchical all-reduce, under the label
  std::optional<NodeRect> nvswitch;  // when there is room for the GPUs
  std::vector<NodeRect> gpus;        // gpus_per_node cells, or none when the tile is too small
};

struct NodeGridLayout {
  int columns = 0;
  int rows = 0;
  std::vector<NodeTile> tiles;       // node k at row k / columns, column k % columns
  std::vector<NodeRect> rail_bands;  // one per row of tiles, under it: rail k at y rail_y(row, k)
  std::vector<NodeRect> row_labels;  // left of each row: its first node's number, when tiles are too
                                     // small for their own labels
  int rails = 0;                     // one per GPU of a node
  float rail_y(int row, int rail) const;
};

// `nodes` tiles of `gpus_per_node` GPUs in `area`; `font_px` sizes the label rows. Tiles keep a
// readable aspect; GPU cells appear only when each is at least a few pixels wide.
NodeGridLayout layout_node_grid(int nodes, int gpus_per_node, NodeRect area, float font_px);

struct NodeZoomLayout {
  NodeRect nvswitch;
  std::vector<NodeRect> gpus;   // GPU k of the node
  std::vector<NodeRect> nics;   // GPU k's NIC, under it
  std::vector<NodeRect> rails;  // rail k: from the NIC down to the bottom of the area (a thin rect)
  NodeRect rail_label;          // the caption row under the rails
};

NodeZoomLayout layout_node_zoom(int gpus_per_node, NodeRect area, float font_px);

// A hierarchical all-reduce span's phases (args phase_*, docs/trace-format.md), or nullopt for any
// other event.
std::optional<CollectivePhases> collective_phases(const trace::TraceData& data, const trace::Event& e);

// Which phases are running `t_ns` into the collective (pipelined phases overlap).
struct ActivePhases {
  bool rs = false;   // reduce-scatter inside the node (NVLink)
  bool net = false;  // all-reduce across the nodes (rails)
  bool ag = false;   // all-gather inside the node (NVLink)
  bool any() const { return rs || net || ag; }
};
ActivePhases active_phases(const CollectivePhases& p, int64_t t_ns);

}  // namespace dpscope::viz
