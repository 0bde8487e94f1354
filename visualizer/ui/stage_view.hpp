// Stage: the picture a student looks at first. GPUs are cards laid out on a ring in rank order
// (so a ring all-reduce goes round the ring), the host in the middle with its PCIe links, the
// GPU-to-GPU links between cards. Each card shows what its streams are doing ("forward 2.Linear",
// "all-reduce bucket 1 ring step 3/6", "idle"), its memory by category, its bucket progress (DDP)
// and the dataset rows it holds as coloured chips. Transfers in flight move along the links as
// arrows with their size. A colour key sits at the bottom. A failed run shows its error in a red
// banner from the moment the first rank stopped. A timing-only world of several nodes is drawn as
// nodes instead (stage_node_view.cpp, ui/node_stage_layout.hpp): lesson 12's node-level stage.
#pragma once

#include <string>
#include <vector>

#include "replay/run_info.hpp"
#include "ui/node_stage_layout.hpp"
#include "ui/view.hpp"

namespace dpscope::viz {

// More rows than this on a GPU, and rows that form runs, are drawn as ranges ("0–63").
inline constexpr size_t kMaxRowChips = 8;

class StageView final : public View {
 public:
  const char* title() const override { return "Stage"; }
  void draw(ViewContext& ctx) override;

  // Where each device sits (screen coordinates of the last frame), for tests and hit-testing.
  struct Box {
    int device = -1;  // index into ReplayModel::devices()
    ImVec2 center;
    ImVec2 half;
  };
  const std::vector<Box>& boxes() const { return boxes_; }
  // Cards shrink their text to fit every row instead of dropping rows: the scale of the last frame
  // (1 = the font's size), and how many cards still had a row that did not fit in it.
  float card_scale() const { return card_scale_; }
  // Where the last frame drew the transfers' size labels (x0, y0, x1, y1).
  const std::vector<ImVec4>& label_rects() const { return label_rects_; }
  // The paths the last frame's transfers were drawn along (for tests).
  const std::vector<std::vector<ImVec2>>& transfer_paths() const { return transfer_paths_; }
  int clipped_cards() const { return clipped_cards_; }
  // The pill at the top right of a device's card in the last frame ("" : none): its phase, with its
  // step when that is not the header's ("step 3 · backward").
  std::string card_pill(int device) const {
    return device >= 0 && static_cast<size_t>(device) < card_pills_.size()
               ? card_pills_[static_cast<size_t>(device)]
               : "";
  }
  // The last frame: the header's title lines (wrapped at " · " to fit, never cut), and the pixel
  // size of the cards' body text (the presentation tests compare it across window sizes).
  const std::vector<std::string>& header_lines() const { return header_lines_; }
  bool header_clipped() const { return header_clipped_; }
  float card_text_px() const { return card_text_px_; }
  // The run-error banner of the last frame (x0, y0, x1, y1; all 0 when none was drawn) and its text
  // ("Run failed: rank 0 stopped at step 1 (4 ranks stopped): Detected mismatch ...").
  const ImVec4& error_banner() const { return error_banner_; }
  const std::string& error_banner_text() const { return error_banner_text_; }
  // The header's run configuration (replay/run_info.hpp) of the trace the last frame showed, and how
  // many times the stage has parsed one: once per trace, when a frame first shows a header whose
  // "run" differs from the one parsed before (another tab, a lesson's re-run, a replaced live file),
  // never on every frame.
  const RunInfo& run_info() const { return run_; }
  int run_info_parses() const { return run_parses_; }

  // The node-level stage (stage_node_view.cpp), drawn instead of the cards when the trace's header
  // has a cluster of more than one node (a timing-only run of lesson 12). Zoom: the node shown
  // alone (-1: every node as a tile); a click on a tile zooms to it, Esc or a click on "all nodes"
  // zooms out. The last frame's layouts and the phases it showed, for tests.
  void set_zoom_node(int node) { zoom_node_ = node; }
  int zoom_node() const { return zoom_node_; }
  bool node_stage_drawn() const { return node_stage_drawn_; }
  const NodeGridLayout& node_grid() const { return node_grid_; }
  const NodeZoomLayout& node_zoom() const { return node_zoom_; }
  const ActivePhases& node_phases() const { return node_phases_; }
  const std::string& node_status() const { return node_status_; }
  // The zoomed node's NVSwitch label in the last frame: where its text was drawn (all 0 and "" when
  // none was), for the tests that keep it inside the bar.
  const NodeRect& node_switch_label() const { return node_switch_label_; }
  const std::string& node_switch_label_text() const { return node_switch_label_text_; }

 private:
  // Parses the header's "run" object when it is not the one already parsed.
  void refresh_run_info(const ReplayModel& model);
  void layout(const ViewContext& ctx, ImVec2 origin, ImVec2 size);
  // The GPU cards and the host (layout's first part); then the switches beside the host.
  void layout_cards(ImVec2 origin, ImVec2 size, ImVec2 host_half);
  void layout_switches(ImVec2 origin, ImVec2 size, ImVec2 host_half);
  // A tree run's cards as tree 0 of the double binary tree (stage_tree_layout.cpp), and the route of
  // an arrow that would cross a card there: along the lanes between rows and a side channel.
  void layout_tree(ImVec2 origin, ImVec2 size, ImVec2 host_half);
  std::vector<ImVec2> tree_route(int a, int b) const;
  bool is_switch(int device) const;
  void draw_links(const ViewContext& ctx, ImDrawList* dl);
  void draw_transfers(const ViewContext& ctx, ImDrawList* dl);
  // Whether `r` overlaps a box of the stage or a label already placed this frame.
  bool covers_something(const ImVec4& r) const;
  // A GPU card (stage_card.cpp), section by section.
  struct CardFrame;
  struct CardFit {
    bool clipped = false;  // a row did not fit
    bool roomy = false;    // rows to spare below the last one
  };
  CardFit draw_card(ViewContext& ctx, ImDrawList* dl, const Box& box);
  void draw_card_title(const ViewContext& ctx, CardFrame& f);
  void draw_card_streams(ViewContext& ctx, CardFrame& f);
  void draw_card_memory(const ViewContext& ctx, CardFrame& f);
  void draw_card_chunks(const ViewContext& ctx, CardFrame& f);
  void draw_card_chips(const ViewContext& ctx, CardFrame& f, const Box& box);
  void draw_host(const ViewContext& ctx, ImDrawList* dl, const Box& box);
  void draw_switch(const ViewContext& ctx, ImDrawList* dl, const Box& box);
  std::string header_title(const ViewContext& ctx) const;
  void draw_header(const ViewContext& ctx, ImDrawList* dl, ImVec2 origin, float width);
  // A failed run (stage_error_banner.cpp): the first rank's error across the top of the stage area
  // once it has happened. Returns the height it takes (0: none); `measure_only` draws nothing;
  // `max_h` > 0: at most that tall (the band between two rows of cards).
  float draw_error_banner(const ViewContext& ctx, ImDrawList* dl, ImVec2 origin, ImVec2 size,
                          bool measure_only, float max_h = 0.0f);
  float draw_legend(const ViewContext& ctx, ImDrawList* dl, ImVec2 origin, float width, bool measure_only);
  // The node-level stage (stage_node_view.cpp) in the area under the header: status lines, the grid
  // or the zoomed node, its legend.
  void draw_node_stage(ViewContext& ctx, ImDrawList* dl, ImVec2 origin, ImVec2 size,
                       const TraceClusterInfo& c);
  void draw_node_grid(const ViewContext& ctx, ImDrawList* dl, const TraceClusterInfo& c);
  void draw_node_zoom(const ViewContext& ctx, ImDrawList* dl, const TraceClusterInfo& c);
  float draw_node_legend(const ViewContext& ctx, ImDrawList* dl, ImVec2 origin, float width,
                         bool measure_only);
  const Box* box_of(int device) const;
  // The path a transfer or link between two devices takes, as a polyline: straight, bent around
  // the host, or — between cards with others in the way — along the corridor between the rows.
  std::vector<ImVec2> link_path(int a, int b) const;
  // Whether `path` passes through a box other than those of devices `a` and `b`.
  bool crosses_a_box(const std::vector<ImVec2>& path, int a, int b) const;

  std::vector<Box> boxes_;
  std::vector<int> ring_;      // GPU device indices in rank order
  std::vector<int> switches_;  // network nodes (kind "switch") in header order
  int host_ = -1;
  bool tree_ = false;                 // a tree run: layout_tree, tree_route
  float tree_channel_x_ = 0.0f;       // tree layout: the free channel right of the cards
  float tree_left_channel_x_ = 0.0f;  // and the one between the host's column and the cards
  float tree_lane_ = 0.0f;            // half the space between two rows of cards
  // The stage size at which the tree layout clipped card rows even at the smallest scale (0, 0:
  // none yet); the tree is tried again once the stage grows past it.
  ImVec2 tree_too_small_{0, 0};
  std::vector<ImVec4> label_rects_;
  std::vector<std::vector<ImVec2>> transfer_paths_;
  static constexpr float kMinCardScale = 0.5f;
  float card_scale_ = 1.0f;
  int clipped_cards_ = 0;                // in the last frame
  std::vector<std::string> card_pills_;  // per device, in the last frame
  std::vector<std::string> header_lines_;
  bool header_clipped_ = false;
  float card_text_px_ = 0.0f;
  bool roomy_ = true;  // every card had rows to spare in the frame being drawn
  int zoom_node_ = -1;
  bool node_stage_drawn_ = false;
  NodeGridLayout node_grid_;
  NodeZoomLayout node_zoom_;
  ActivePhases node_phases_;
  std::string node_status_;
  NodeRect zoom_out_button_;
  NodeRect node_switch_label_;
  std::string node_switch_label_text_;
  ImVec4 error_banner_{0, 0, 0, 0};
  std::string error_banner_text_;
  RunInfo run_;           // parsed from run_json_
  std::string run_json_;  // the header's "run" as parsed; compared, not parsed, each frame
  bool run_parsed_ = false;
  int run_parses_ = 0;
};

}  // namespace dpscope::viz
