// Stage view: layout on a ring, links, cards, host, transfers in flight, colour key.
//
//   Sections: layout · links and transfers · cards · header and legend · draw().
#include "ui/stage_view.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include <fmt/format.h>

#include "dpscope/base/format_bytes.hpp"
#include "replay/run_info.hpp"
#include "replay/seek.hpp"
#include "ui/draw_util.hpp"

namespace dpscope::viz {

namespace {

ImVec2 add(ImVec2 a, ImVec2 b) { return ImVec2(a.x + b.x, a.y + b.y); }
ImVec2 sub(ImVec2 a, ImVec2 b) { return ImVec2(a.x - b.x, a.y - b.y); }
ImVec2 mul(ImVec2 a, float s) { return ImVec2(a.x * s, a.y * s); }
ImVec2 bezier(ImVec2 p0, ImVec2 c, ImVec2 p1, float t) {
  const float u = 1.0f - t;
  return ImVec2(u * u * p0.x + 2 * u * t * c.x + t * t * p1.x, u * u * p0.y + 2 * u * t * c.y + t * t * p1.y);
}
ImVec2 normalized(ImVec2 v) {
  const float len = std::sqrt(v.x * v.x + v.y * v.y);
  return len > 1e-6f ? ImVec2(v.x / len, v.y / len) : ImVec2(1, 0);
}

float length(ImVec2 v) { return std::sqrt(v.x * v.x + v.y * v.y); }

// The point a fraction `t` of the way along a polyline (by length), and its direction there.
ImVec2 along(const std::vector<ImVec2>& pts, float t, ImVec2* direction = nullptr) {
  float total = 0.0f;
  for (size_t i = 1; i < pts.size(); ++i) total += length(sub(pts[i], pts[i - 1]));
  float left = std::clamp(t, 0.0f, 1.0f) * total;
  for (size_t i = 1; i < pts.size(); ++i) {
    const float seg = length(sub(pts[i], pts[i - 1]));
    if (left <= seg || i + 1 == pts.size()) {
      if (direction != nullptr) *direction = normalized(sub(pts[i], pts[i - 1]));
      return seg > 0 ? add(pts[i - 1], mul(sub(pts[i], pts[i - 1]), std::min(1.0f, left / seg))) : pts[i];
    }
    left -= seg;
  }
  if (direction != nullptr) *direction = ImVec2(1, 0);
  return pts.empty() ? ImVec2() : pts.back();
}

// `pts` without the part at its start that lies inside `box` (a path that leaves a box diagonally
// and is then moved sideways starts a few pixels inside it): the path begins where it crosses the
// box's border. `reverse`: the same at its end.
void trim_inside(std::vector<ImVec2>& pts, ImVec2 center, ImVec2 half, bool reverse) {
  if (reverse) std::reverse(pts.begin(), pts.end());
  auto inside = [&](ImVec2 p) {
    return std::fabs(p.x - center.x) < half.x && std::fabs(p.y - center.y) < half.y;
  };
  size_t i = 0;
  while (i < pts.size() && inside(pts[i])) ++i;
  if (i > 0 && i < pts.size()) {
    ImVec2 in = pts[i - 1];
    ImVec2 out = pts[i];
    for (int k = 0; k < 24; ++k) {  // bisection to well under a pixel
      const ImVec2 mid = mul(add(in, out), 0.5f);
      (inside(mid) ? in : out) = mid;
    }
    pts.erase(pts.begin(), pts.begin() + static_cast<ptrdiff_t>(i));
    pts.insert(pts.begin(), out);
  }
  if (reverse) std::reverse(pts.begin(), pts.end());
}

// The part of a polyline from its start to the fraction `t` of its length.
std::vector<ImVec2> prefix(const std::vector<ImVec2>& pts, float t) {
  float total = 0.0f;
  for (size_t i = 1; i < pts.size(); ++i) total += length(sub(pts[i], pts[i - 1]));
  std::vector<ImVec2> out;
  if (pts.empty()) return out;
  out.push_back(pts.front());
  float left = std::clamp(t, 0.0f, 1.0f) * total;
  for (size_t i = 1; i < pts.size(); ++i) {
    const float seg = length(sub(pts[i], pts[i - 1]));
    if (left >= seg) {
      out.push_back(pts[i]);
      left -= seg;
      continue;
    }
    if (seg > 0) out.push_back(add(pts[i - 1], mul(sub(pts[i], pts[i - 1]), left / seg)));
    break;
  }
  return out;
}

bool inside(const StageView::Box& b, ImVec2 p, float margin) {
  return std::fabs(p.x - b.center.x) < b.half.x + margin && std::fabs(p.y - b.center.y) < b.half.y + margin;
}

std::string short_bandwidth(double bytes_per_s) {
  return bytes_per_s >= 1e9 ? fmt::format("{:.0f} GB/s", bytes_per_s / 1e9)
                            : fmt::format("{:.1f} MB/s", bytes_per_s / 1e6);
}

}  // namespace

// ---- layout ----

void StageView::layout(const ViewContext& ctx, ImVec2 origin, ImVec2 size) {
  const ReplayModel& model = *ctx.model;
  const float fs = ImGui::GetFontSize();
  ring_.clear();
  switches_.clear();
  host_ = -1;
  for (size_t d = 0; d < model.devices().size(); ++d) {
    const ModelDevice& dev = model.devices()[d];
    if (dev.is_host) {
      if (host_ < 0) host_ = static_cast<int>(d);
    } else if (dev.is_switch) {
      switches_.push_back(static_cast<int>(d));
    } else {
      ring_.push_back(static_cast<int>(d));
    }
  }
  std::stable_sort(ring_.begin(), ring_.end(), [&](int a, int b) {
    const int ra = model.devices()[a].rank < 0 ? INT32_MAX : model.devices()[a].rank;
    const int rb = model.devices()[b].rank < 0 ? INT32_MAX : model.devices()[b].rank;
    return ra < rb;
  });
  boxes_.clear();
  const ImVec2 host_half(std::min(fs * 5.0f, size.x * 0.09f), fs * 1.6f);
  // A tree run is drawn as its tree. In --present, where every card must keep every row, a stage
  // too small for the tree's cards to do so (8 GPUs at 1280x720) falls back to the two-row ring
  // layout, whose cards do; the working view keeps the tree (the inspector holds the details).
  const bool tree_run = ring_.size() >= 3 && run_.algo == "tree";
  if (size.x > tree_too_small_.x + 1.0f || size.y > tree_too_small_.y + 1.0f) tree_too_small_ = ImVec2(0, 0);
  tree_ = tree_run && tree_too_small_.x == 0.0f;
  if (tree_) {
    layout_tree(origin, size, host_half);
    layout_switches(origin, size, host_half);
    return;
  }
  layout_cards(origin, size, host_half);
  layout_switches(origin, size, host_half);
}

void StageView::layout_cards(ImVec2 origin, ImVec2 size, ImVec2 host_half) {
  const float fs = ImGui::GetFontSize();
  const size_t n = ring_.size();
  const float w = size.x;
  const float h = size.y;
  const ImVec2 c(origin.x + w * 0.5f, origin.y + h * 0.5f);
  const float gap = fs * 0.8f;
  if (n == 0) {
    if (host_ >= 0) boxes_.push_back({host_, c, host_half});
    return;
  }
  if (n <= 2) {
    // One GPU right of the host, or two on either side of it (the host, and any switch stacked
    // under it, in a column between them): each card as wide as leaves that column free.
    const float room =
        n == 1 ? (w - 3 * gap - 2 * host_half.x) * 0.5f : (w * 0.5f - host_half.x - 2 * gap) * 0.5f;
    // As tall as a card's rows need (title, three streams, memory, chunks, a row of chips), not
    // the whole stage: the review found one GPU's card half empty.
    const ImVec2 half(std::max(fs * 4.0f, std::min({w * (n == 1 ? 0.3f : 0.36f), fs * 26.0f, room})),
                      std::min(h * 0.45f, fs * 6.5f));
    if (n == 1) {
      boxes_.push_back({ring_[0], ImVec2(origin.x + w - gap - half.x, c.y), half});
      if (host_ >= 0) boxes_.push_back({host_, ImVec2(origin.x + gap + host_half.x, c.y), host_half});
    } else {
      boxes_.push_back({ring_[0], ImVec2(origin.x + gap + half.x, c.y), half});
      boxes_.push_back({ring_[1], ImVec2(origin.x + w - gap - half.x, c.y), half});
      if (host_ >= 0) boxes_.push_back({host_, c, host_half});
    }
    return;
  }
  // A ring drawn as two rows, clockwise: ranks 0..k-1 left to right on top, the rest right to
  // left below, so every ring neighbour is a card next to (or under) the previous one. The host
  // sits in the band between the rows.
  const size_t cols = (n + 1) / 2;
  const float band = host_ >= 0 ? host_half.y * 2 + gap * 2 : gap * 3;
  // Room between columns for the transfers that move along the ring.
  const float hgap = std::max(gap, w * 0.25f / static_cast<float>(cols + 1));
  const float card_w = (w - 2 * gap - hgap * static_cast<float>(cols - 1)) / static_cast<float>(cols);
  const float card_h = std::min((h - band - gap * 2) * 0.5f, card_w * 0.75f + fs * 4);
  const ImVec2 half(card_w * 0.5f, card_h * 0.5f);
  const float top_y = c.y - band * 0.5f - half.y;
  const float bottom_y = c.y + band * 0.5f + half.y;
  auto col_x = [&](size_t col) {
    return origin.x + gap + half.x + static_cast<float>(col) * (card_w + hgap);
  };
  for (size_t i = 0; i < n; ++i) {
    const bool top = i < cols;
    const size_t col = top ? i : cols - 1 - (i - cols);
    boxes_.push_back({ring_[i], ImVec2(col_x(col), top ? top_y : bottom_y), half});
  }
  if (host_ >= 0) boxes_.push_back({host_, c, host_half});
}

void StageView::layout_switches(ImVec2 origin, ImVec2 size, ImVec2 host_half) {
  if (switches_.empty()) return;
  // Beside the host in the band between the card rows (alternating left and right), or stacked
  // under it when the cards sit left and right of it (one or two GPUs).
  const float gap = ImGui::GetFontSize() * 0.8f;
  const Box* host = host_ >= 0 ? box_of(host_) : nullptr;
  const ImVec2 anchor =
      host != nullptr ? host->center : ImVec2(origin.x + size.x * 0.5f, origin.y + size.y * 0.5f);
  const bool beside = ring_.size() > 2 && !tree_;  // a tree's host column stacks them
  for (size_t i = 0; i < switches_.size(); ++i) {
    const float k = static_cast<float>(i / 2 + 1);
    const float side = i % 2 == 0 ? -1.0f : 1.0f;
    const ImVec2 center =
        beside ? ImVec2(anchor.x + side * k * (2 * host_half.x + gap), anchor.y)
               : ImVec2(anchor.x, anchor.y + static_cast<float>(i + 1) * (2 * host_half.y + gap));
    boxes_.push_back({switches_[i], center, host_half});
  }
}

bool StageView::is_switch(int device) const {
  return std::find(switches_.begin(), switches_.end(), device) != switches_.end();
}

const StageView::Box* StageView::box_of(int device) const {
  for (const Box& b : boxes_)
    if (b.device == device) return &b;
  return nullptr;
}

std::vector<ImVec2> StageView::link_path(int a, int b) const {
  const Box* ba = box_of(a);
  const Box* bb = box_of(b);
  const ImVec2 from = box_exit_point(ba->center, ba->half, bb->center);
  const ImVec2 to = box_exit_point(bb->center, bb->half, ba->center);
  ImVec2 control = mul(add(from, to), 0.5f);
  const Box* host = host_ >= 0 ? box_of(host_) : nullptr;
  if (host != nullptr && a != host_ && b != host_) {
    // A straight line that would cross the host box bends around it.
    const ImVec2 d = sub(to, from);
    const float len2 = d.x * d.x + d.y * d.y;
    if (len2 >= 1.0f) {
      const ImVec2 nrm = normalized(ImVec2(-d.y, d.x));
      const float t = ((host->center.x - from.x) * d.x + (host->center.y - from.y) * d.y) / len2;
      const float dist = (host->center.x - from.x) * nrm.x + (host->center.y - from.y) * nrm.y;
      const float reach =
          std::fabs(nrm.x) * host->half.x + std::fabs(nrm.y) * host->half.y + ImGui::GetFontSize() * 0.6f;
      if (t > 0.0f && t < 1.0f && std::fabs(dist) < reach)
        control = add(control, mul(nrm, (dist >= 0 ? -1.0f : 1.0f) * 2.0f * (reach + std::fabs(dist))));
    }
  }
  std::vector<ImVec2> curve;
  for (int i = 0; i <= 24; ++i) curve.push_back(bezier(from, control, to, static_cast<float>(i) / 24.0f));
  if (!crosses_a_box(curve, a, b)) return curve;
  if (tree_) return tree_route(a, b);
  // Other boxes in the way (a tree's parent and child are seldom ring neighbours; the host's copy
  // to an outer card passes over an inner one): leave towards the corridor between the rows, run
  // along it beside the host, and enter the other box from the corridor.
  float top_row_bottom = -1e9f;
  float bottom_row_top = 1e9f;
  float mid = 0.0f;
  for (int g : ring_) mid += box_of(g)->center.y / static_cast<float>(ring_.size());
  for (int g : ring_) {
    const Box* c = box_of(g);
    if (c->center.y < mid) top_row_bottom = std::max(top_row_bottom, c->center.y + c->half.y);
    if (c->center.y > mid) bottom_row_top = std::min(bottom_row_top, c->center.y - c->half.y);
  }
  if (top_row_bottom < -1e8f || bottom_row_top > 1e8f) return curve;  // one row: nothing to route through
  const float band_top = host != nullptr ? host->center.y - host->half.y : mid;
  const float band_bottom = host != nullptr ? host->center.y + host->half.y : mid;
  const float lane_top = (top_row_bottom + band_top) * 0.5f;
  const float lane_bottom = (bottom_row_top + band_bottom) * 0.5f;
  // Where a box sits: the top row (-1), the corridor's band (0: host, switches) or the bottom row.
  auto row_of = [&](const Box* box) {
    if (box->center.y + box->half.y <= top_row_bottom + 1.0f) return -1;
    if (box->center.y - box->half.y >= bottom_row_top - 1.0f) return 1;
    return 0;
  };
  const int ra = row_of(ba);
  const int rb = row_of(bb);
  if (ra == 0 && rb == 0) return curve;  // host and switch: side by side in the band
  // The row each end leaves towards: its own, or for a band box the other end's.
  const int side_a = ra != 0 ? ra : rb;
  const int side_b = rb != 0 ? rb : ra;
  auto edge = [&](const Box* box, int row, int side) {
    if (row == -1) return box->center.y + box->half.y;  // a top card's bottom edge
    if (row == 1) return box->center.y - box->half.y;   // a bottom card's top edge
    return side < 0 ? box->center.y - box->half.y : box->center.y + box->half.y;
  };
  auto lane_of = [&](int side) { return side < 0 ? lane_top : lane_bottom; };
  const float dir = bb->center.x >= ba->center.x ? 1.0f : -1.0f;
  const float a_edge = edge(ba, ra, side_a);
  const float b_edge = edge(bb, rb, side_b);
  const float x_exit = ba->center.x + dir * ba->half.x * 0.35f;
  std::vector<ImVec2> best;
  if (side_a == side_b) {
    for (const float shift : {-0.35f, 0.35f, -0.7f, 0.7f, 0.0f}) {
      const float x_entry = bb->center.x + dir * bb->half.x * shift;
      std::vector<ImVec2> route = {ImVec2(x_exit, a_edge), ImVec2(x_exit, lane_of(side_a)),
                                   ImVec2(x_entry, lane_of(side_a)), ImVec2(x_entry, b_edge)};
      if (best.empty()) best = route;
      if (!crosses_a_box(route, a, b)) return route;
    }
    return best;
  }
  // From one row to the other, the host and the switches fill the middle of the corridor: cross
  // it where none of them is (between two, or beyond the ends), along both lanes.
  std::vector<std::pair<float, float>> blocked;
  for (const Box& box : boxes_)
    if (row_of(&box) == 0) blocked.emplace_back(box.center.x - box.half.x, box.center.x + box.half.x);
  std::sort(blocked.begin(), blocked.end());
  const float gap = ImGui::GetFontSize() * 0.6f;
  std::vector<float> free_x;
  if (!blocked.empty()) {
    free_x.push_back(blocked.front().first - gap);
    free_x.push_back(blocked.back().second + gap);
    for (size_t i = 1; i < blocked.size(); ++i)
      if (blocked[i].first - blocked[i - 1].second > 2 * gap)
        free_x.push_back((blocked[i].first + blocked[i - 1].second) * 0.5f);
  } else {
    free_x.push_back((x_exit + bb->center.x) * 0.5f);
  }
  const float x_entry = bb->center.x - dir * bb->half.x * 0.35f;
  float best_len = 1e30f;
  for (const float x : free_x) {
    std::vector<ImVec2> route = {ImVec2(x_exit, a_edge),           ImVec2(x_exit, lane_of(side_a)),
                                 ImVec2(x, lane_of(side_a)),       ImVec2(x, lane_of(side_b)),
                                 ImVec2(x_entry, lane_of(side_b)), ImVec2(x_entry, b_edge)};
    float len = 0.0f;
    for (size_t i = 1; i < route.size(); ++i) len += length(sub(route[i], route[i - 1]));
    if (best.empty() || (len < best_len && !crosses_a_box(route, a, b))) {
      best_len = crosses_a_box(route, a, b) ? 1e30f : len;
      best = route;
    }
  }
  return best.empty() ? curve : best;
}

bool StageView::crosses_a_box(const std::vector<ImVec2>& path, int a, int b) const {
  for (size_t i = 1; i < path.size(); ++i) {
    for (int k = 0; k <= 12; ++k) {
      const ImVec2 p = add(path[i - 1], mul(sub(path[i], path[i - 1]), static_cast<float>(k) / 12.0f));
      for (const Box& box : boxes_)
        if (box.device != a && box.device != b && inside(box, p, 2.0f)) return true;
    }
  }
  return false;
}

// ---- links and transfers ----

void StageView::draw_links(const ViewContext& ctx, ImDrawList* dl) {
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  const size_t n = ring_.size();
  auto ring_pos = [&](int device) {
    return static_cast<int>(std::find(ring_.begin(), ring_.end(), device) - ring_.begin());
  };
  if (tree_) {
    // A tree run: the tree's own edges, parent to child (the fabric behind them, NVSwitch or PCIe,
    // is named in the header line; drawn to every card it would only hide the tree).
    for (size_t i = 1; i < n; ++i) {
      const std::vector<ImVec2> path = link_path(ring_[(i - 1) / 2], ring_[i]);
      dl->AddPolyline(path.data(), static_cast<int>(path.size()), pal.link, 0, 2.0f * pal.line_scale);
    }
    return;
  }
  std::vector<std::pair<int, int>> drawn;
  for (const TraceLinkInfo& link : model.data().header.links) {
    int a = model.device_index(link.src);
    int b = model.device_index(link.dst);
    if (a < 0 || b < 0 || a == b || box_of(a) == nullptr || box_of(b) == nullptr) continue;
    if (a > b) std::swap(a, b);
    if (std::find(drawn.begin(), drawn.end(), std::make_pair(a, b)) != drawn.end()) continue;
    drawn.emplace_back(a, b);
    // Links to the host or a switch are the machine's fabric: drawn thin, always.
    const bool with_host = a == host_ || b == host_ || is_switch(a) || is_switch(b);
    if (!with_host && n > 3) {
      // On a ring of cards only neighbours are drawn at rest; other links appear when used.
      const int pa = ring_pos(a);
      const int pb = ring_pos(b);
      const int gap = std::abs(pa - pb);
      if (gap != 1 && gap != static_cast<int>(n) - 1) continue;
    }
    const std::vector<ImVec2> path = link_path(a, b);
    dl->AddPolyline(path.data(), static_cast<int>(path.size()),
                    with_host ? with_alpha(pal.link, 0.6f) : pal.link, 0,
                    (with_host ? 1.0f : 2.0f) * pal.line_scale);
  }
}

void StageView::draw_transfers(const ViewContext& ctx, ImDrawList* dl) {
  label_rects_.clear();
  transfer_paths_.clear();
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  const float fs = ImGui::GetFontSize();
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const float small_size = font_px(small);
  for (const TransferSnapshot& t : ctx.state->transfers) {
    if (box_of(t.src) == nullptr || box_of(t.dst) == nullptr) continue;
    std::vector<ImVec2> path = link_path(t.src, t.dst);
    // Two directions on one link run side by side.
    const ImVec2 nrm = normalized(ImVec2(-(path.back().y - path.front().y), path.back().x - path.front().x));
    const float offset = fs * 0.35f * (t.src < t.dst ? 1.0f : -1.0f);
    for (ImVec2& q : path) q = add(q, mul(nrm, offset));
    // Neither end may reach into its card (the review found arrowheads over card rows).
    trim_inside(path, box_of(t.src)->center, box_of(t.src)->half, false);
    trim_inside(path, box_of(t.dst)->center, box_of(t.dst)->half, true);
    transfer_paths_.push_back(path);
    const ImU32 color = pal.event_color(model.data(), model.event(t.event));
    const float thick = 3.0f * pal.line_scale;
    dl->AddPolyline(path.data(), static_cast<int>(path.size()), with_alpha(color, 0.3f), 0, thick);
    const float p = static_cast<float>(t.progress);
    const std::vector<ImVec2> done = prefix(path, p);
    dl->AddPolyline(done.data(), static_cast<int>(done.size()), color, 0, thick);
    // The arrow's tip is at the transfer's progress, and the whole arrow stays on the path: it
    // never pokes past the path's end into the receiving card or behind its start into the sender.
    float path_len = 0.0f;
    for (size_t i = 1; i < path.size(); ++i) path_len += length(sub(path[i], path[i - 1]));
    // A short link (the host right beside a card) gets a smaller head, never longer than the link.
    const float hs = std::min(fs * 0.75f * pal.line_scale, path_len * 0.45f);
    const float arrow_len = hs * 2.0f;
    const float tip = path_len > arrow_len ? std::max(p, arrow_len / path_len) : 1.0f;
    ImVec2 dir;
    const ImVec2 head = along(path, tip, &dir);
    const ImVec2 tail = path_len > arrow_len ? along(path, tip - arrow_len / path_len) : path.front();
    draw_arrow(dl, tail, head, color, thick, hs);
    // The size rides beside the arrow's head, but never on a card, the host or another label: it
    // steps back along the link (then forward), on either side, to the nearest free place; with
    // none free it is left out (the tooltip and the inspector still give it).
    const std::string label = format_bytes(t.bytes);
    const ImVec2 ts = text_size(small, small_size, label);
    const float side = (t.src < t.dst ? 1.0f : -1.0f) * (fs * 0.9f);
    auto rect_at = [&](float q, float away) {
      const ImVec2 lp = add(along(path, q), mul(nrm, away));
      return ImVec4(lp.x - ts.x * 0.5f - 3, lp.y - ts.y * 0.5f - 1, lp.x + ts.x * 0.5f + 3,
                    lp.y + ts.y * 0.5f + 1);
    };
    std::optional<ImVec4> rect;
    for (int k = 0; k <= 40 && !rect; ++k) {
      const float q = k <= 20 ? p - 0.05f * static_cast<float>(k) : p + 0.05f * static_cast<float>(k - 20);
      if (q < 0.0f || q > 1.0f) continue;
      for (const float away : {side, -side, 2.0f * side, -2.0f * side}) {
        if (const ImVec4 r = rect_at(q, away); !covers_something(r)) {
          rect = r;
          break;
        }
      }
    }
    if (!rect) continue;
    label_rects_.push_back(*rect);
    dl->AddRectFilled(ImVec2(rect->x, rect->y), ImVec2(rect->z, rect->w), with_alpha(pal.background, 0.85f),
                      3.0f);
    draw_text(dl, small, small_size, ImVec2(rect->x + 3, rect->y + 1), color, label);
  }
}

bool StageView::covers_something(const ImVec4& r) const {
  auto overlap = [&](const ImVec4& a) { return r.x < a.z && a.x < r.z && r.y < a.w && a.y < r.w; };
  for (const Box& b : boxes_)
    if (overlap(ImVec4(b.center.x - b.half.x - 2, b.center.y - b.half.y - 2, b.center.x + b.half.x + 2,
                       b.center.y + b.half.y + 2)))
      return true;
  for (const ImVec4& other : label_rects_)
    if (overlap(other)) return true;
  return false;
}

// ---- cards ----

void StageView::draw_host(const ViewContext& ctx, ImDrawList* dl, const Box& box) {
  const Palette& pal = *ctx.palette;
  const ImVec2 r0 = sub(box.center, box.half);
  const ImVec2 r1 = add(box.center, box.half);
  dl->AddRectFilled(r0, r1, pal.card, 6.0f);
  dl->AddRect(r0, r1, pal.card_border, 6.0f, 0, 1.0f * pal.line_scale);
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const float fs = ImGui::GetFontSize();
  // Both lines inside the box: smaller where the box is narrow (1280x720 in --present).
  const float room = box.half.x * 2.0f - fs * 0.4f;
  auto fitted = [&](ImFont* font, const char* text) {
    const float w = text_size(font, font_px(font), text).x;
    return w > room && w > 0 ? font_px(font) * room / w : font_px(font);
  };
  draw_text_centered(dl, bold, fitted(bold, "host (CPU)"), ImVec2(box.center.x, box.center.y - fs * 0.4f),
                     pal.text, "host (CPU)");
  draw_text_centered(dl, small, fitted(small, "dataset, data loader"),
                     ImVec2(box.center.x, box.center.y + fs * 0.55f), pal.text_dim, "dataset, data loader");
}

void StageView::draw_switch(const ViewContext& ctx, ImDrawList* dl, const Box& box) {
  const Palette& pal = *ctx.palette;
  const ImVec2 r0 = sub(box.center, box.half);
  const ImVec2 r1 = add(box.center, box.half);
  dl->AddRectFilled(r0, r1, pal.card, 3.0f);
  dl->AddRect(r0, r1, pal.card_border, 3.0f, 0, 1.0f * pal.line_scale);
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const float fs = ImGui::GetFontSize();
  const ModelDevice& dev = ctx.model->devices()[static_cast<size_t>(box.device)];
  draw_text_centered(dl, bold, font_px(bold), ImVec2(box.center.x, box.center.y - fs * 0.4f), pal.text,
                     dev.name);
  draw_text_centered(dl, small, font_px(small), ImVec2(box.center.x, box.center.y + fs * 0.55f), pal.text_dim,
                     "switch");
}

// ---- header and legend ----

std::string StageView::header_title(const ViewContext& ctx) const {
  const ReplayModel& model = *ctx.model;
  const RunInfo& run = run_;
  std::string hardware;
  for (int d : ring_)
    if (!model.devices()[d].hardware.empty()) {
      hardware = model.devices()[d].hardware;
      break;
    }
  std::string title = run.mode_title().empty() ? "trace" : run.mode_title();
  // The header's clock, not the backend: DataParallel runs without one, on either kind of GPU.
  const bool simulated = model.data().header.clock == "simulated";
  if (run.timing_only && run.devices > static_cast<int>(ring_.size())) {
    // One traced GPU stands for the world (train --timing-only): say so, not "1 GPU".
    title += fmt::format(" · GPU 0 of {} ({}, simulated, timing-only)", run.devices, hardware);
  } else if (!ring_.empty() && std::all_of(ring_.begin(), ring_.end(),
                                           [&](int d) { return model.devices()[d].kind == "cpu"; })) {
    // Ranks that are processes on CPUs (train --backend mpi, merged): say so, not "GPUs".
    title += fmt::format(" · {} CPU process{}", ring_.size(), ring_.size() == 1 ? "" : "es");
  } else {
    title += fmt::format(" · {} GPU{}", ring_.size(), ring_.size() == 1 ? "" : "s");
    if (!hardware.empty()) title += fmt::format(" ({}, {})", hardware, simulated ? "simulated" : "measured");
  }
  if (!run.model.empty()) title += fmt::format(" · model {}", run.model);
  if (!run.batch.empty())
    title += fmt::format(" · batch {}{}", run.batch, run.mode == "ddp" ? " per rank" : "");
  if (run.kernels_every > 1) title += fmt::format(" · kernels traced on 1 step in {}", run.kernels_every);
  return title;
}

void StageView::draw_header(const ViewContext& ctx, ImDrawList* dl, ImVec2 origin, float width) {
  const Palette& pal = *ctx.palette;
  const ReplayModel& model = *ctx.model;
  const ReplayState& state = *ctx.state;
  const float fs = ImGui::GetFontSize();
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
  float y = origin.y + fs * 0.3f;
  for (const std::string& line : header_lines_) {
    const ImVec4 clip(origin.x, y, origin.x + width - fs * 0.25f, y + font_px(bold) * 1.3f);
    draw_text(dl, bold, font_px(bold), ImVec2(origin.x + fs * 0.5f, y), pal.text, line, &clip);
    y += font_px(bold) * 1.3f;
  }
  const float y2 = y;
  float x = origin.x + fs * 0.5f;
  if (state.step >= 0) {
    // "step 2 of 3": steps count from 1 on screen (the trace's "step":1 is the second step).
    const std::string step = step_position_label(state.step, model.first_step(), model.last_step());
    draw_text(dl, ImGui::GetFont(), fs, ImVec2(x, y2), pal.text, step);
    x += text_size(nullptr, fs, step).x + fs * 0.8f;
  }
  if (state.phase != Phase::kNone) {
    const std::string phase = to_string(state.phase);
    const ImVec2 ps = text_size(nullptr, fs, phase);
    const ImU32 fill = pal.phase_color(state.phase);
    dl->AddRectFilled(ImVec2(x - 4, y2 - 1), ImVec2(x + ps.x + 4, y2 + ps.y + 1), fill, 4.0f);
    draw_text(dl, ImGui::GetFont(), fs, ImVec2(x, y2), pal.text_on(fill), phase);
    x += ps.x + fs * 0.8f;
  }
  // A sampled trace's other steps hold one span per phase and no kernel: said where they are shown.
  if (state.step >= 0 && !run_.kernels_traced(state.step)) {
    const std::string note = "phases only (kernels not sampled)";
    draw_text(dl, ImGui::GetFont(), fs, ImVec2(x, y2), pal.text_dim, note);
    x += text_size(nullptr, fs, note).x + fs * 0.8f;
  }
  const std::string t = fmt::format("t = {} of {}", format_time(state.cursor.t_ns - model.begin_ns()),
                                    format_time(model.end_ns() - model.begin_ns()));
  draw_text(dl, ImGui::GetFont(), fs, ImVec2(x, y2), pal.text_dim, t);
  x += text_size(nullptr, fs, t).x + fs * 0.8f;
  // The link kinds, once, on the right.
  std::string links;
  std::vector<std::string> seen;
  for (const TraceLinkInfo& l : model.data().header.links) {
    const int a = model.device_index(l.src);
    const int b = model.device_index(l.dst);
    auto any = [&](bool ModelDevice::*flag) {
      return (a >= 0 && model.devices()[a].*flag) || (b >= 0 && model.devices()[b].*flag);
    };
    const char* role = any(&ModelDevice::is_host)     ? "to host"
                       : any(&ModelDevice::is_switch) ? "to switch"
                                                      : "GPU-GPU";
    const std::string entry = fmt::format("{} {} {}", l.kind, short_bandwidth(l.bandwidth_bytes_per_s), role);
    if (std::find(seen.begin(), seen.end(), entry) != seen.end()) continue;
    seen.push_back(entry);
    links += fmt::format("{}{}", links.empty() ? "links: " : " · ", entry);
  }
  const ImVec2 ls = text_size(nullptr, fs, links);
  if (!links.empty() && origin.x + width - ls.x - fs * 0.5f > x)
    draw_text(dl, ImGui::GetFont(), fs, ImVec2(origin.x + width - ls.x - fs * 0.5f, y2), pal.text_dim, links);
}

float StageView::draw_legend(const ViewContext& ctx, ImDrawList* dl, ImVec2 origin, float width,
                             bool measure_only) {
  const Palette& pal = *ctx.palette;
  ImFont* small = ctx.fonts.small != nullptr ? ctx.fonts.small : ImGui::GetFont();
  const float size = font_px(small);
  struct Entry {
    const char* group;  // starts a group when not null
    ImU32 color;
    const char* label;
  };
  const Entry entries[] = {
      {"work:", pal.forward, "forward"},
      {nullptr, pal.backward, "backward"},
      {nullptr, pal.optimizer, "optimizer"},
      {nullptr, pal.data, "data"},
      {nullptr, pal.comm, "all-reduce / comm"},
      {nullptr, pal.copy, "copy"},
      {nullptr, pal.reduce, "reduce"},
      {nullptr, pal.idle, "idle"},
      {"memory:", pal.memory[0], "parameters"},
      {nullptr, pal.memory[1], "gradients"},
      {nullptr, pal.memory[2], "optimizer state"},
      {nullptr, pal.memory[3], "activations"},
      {nullptr, pal.memory[4], "buffers"},
      {"buckets:", pal.bucket[0], "pending"},
      {nullptr, pal.bucket[1], "ready"},
      {nullptr, pal.bucket[2], "launched"},
      {nullptr, pal.bucket[3], "done"},
  };
  const float gap = size * 0.9f;
  float x = origin.x + gap * 0.5f;
  float y = origin.y + size * 0.3f;
  // The bucket key only where the run has buckets (DDP): a single GPU's key is one line shorter.
  const bool buckets = !ctx.model->data().buckets.empty();
  constexpr size_t kFirstBucketEntry = 13;
  for (size_t i = 0; i < std::size(entries); ++i) {
    if (!buckets && i >= kFirstBucketEntry) break;
    const Entry& e = entries[i];
    float w = size * 1.2f + text_size(small, size, e.label).x + gap;
    const float gw = e.group != nullptr ? text_size(small, size, e.group).x + size * 0.4f : 0.0f;
    if (x + gw + w > origin.x + width) {
      x = origin.x + gap * 0.5f;
      y += size * 1.4f;
    }
    if (e.group != nullptr) {
      if (!measure_only) draw_text(dl, small, size, ImVec2(x, y), pal.text, e.group);
      x += gw;
    }
    if (!measure_only) {
      dl->AddRectFilled(ImVec2(x, y + size * 0.1f), ImVec2(x + size * 0.9f, y + size * 0.95f), e.color, 2.0f);
      draw_text(dl, small, size, ImVec2(x + size * 1.2f, y), pal.text_dim, e.label);
    }
    x += w;
  }
  return y + size * 1.4f - origin.y;
}

// ---- draw ----

void StageView::refresh_run_info(const ReplayModel& model) {
  // Keyed on the header's text itself rather than on a document's address, which a new document may
  // reuse: a string comparison per frame instead of a JSON parse.
  const std::string& json = model.data().header.run_json;
  if (run_parsed_ && json == run_json_) return;
  run_json_ = json;
  run_ = parse_run_info(json);
  run_parsed_ = true;
  ++run_parses_;
}

void StageView::draw(ViewContext& ctx) {
  if (ctx.model == nullptr || ctx.state == nullptr) return;
  refresh_run_info(*ctx.model);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 size = ImGui::GetContentRegionAvail();
  if (size.x < 50 || size.y < 50) return;
  const float fs = ImGui::GetFontSize();
  dl->AddRectFilled(origin, add(origin, size), ctx.palette->background, 4.0f);
  ImFont* bold = ctx.fonts.bold != nullptr ? ctx.fonts.bold : ImGui::GetFont();
  if (const auto& cluster = ctx.model->data().header.cluster; cluster && cluster->nodes > 1) {
    ring_.clear();  // the title names the GPUs' hardware (layout() is skipped for the node stage)
    for (size_t d = 0; d < ctx.model->devices().size(); ++d)
      if (!ctx.model->devices()[d].is_host && !ctx.model->devices()[d].is_switch)
        ring_.push_back(static_cast<int>(d));
  }
  // The title wraps at its " · " separators rather than end in "..." (1280x720 in --present cut it
  // at "batc...").
  header_lines_.clear();
  header_clipped_ = false;
  {
    const std::string title = header_title(ctx);
    const float room = size.x - fs * 0.75f;
    std::string line;
    size_t from = 0;
    while (from <= title.size()) {
      size_t to = title.find(" · ", from);
      if (to == std::string::npos) to = title.size();
      const std::string part = title.substr(from, to - from);
      const std::string joined = line.empty() ? part : line + " · " + part;
      if (!line.empty() && text_size(bold, font_px(bold), joined).x > room) {
        header_lines_.push_back(line);
        line = part;
      } else {
        line = joined;
      }
      from = to + std::string_view(" · ").size();
    }
    header_lines_.push_back(line);
    for (const std::string& l : header_lines_)
      header_clipped_ = header_clipped_ || text_size(bold, font_px(bold), l).x > room;
  }
  const float header_h =
      fs * 0.6f + font_px(bold) * 1.3f * static_cast<float>(header_lines_.size()) + fs * 1.3f;
  // A world of several nodes (timing-only, lesson 12): the node-level stage instead of the cards.
  node_stage_drawn_ = false;
  if (const auto& cluster = ctx.model->data().header.cluster; cluster && cluster->nodes > 1) {
    boxes_.clear();
    draw_node_stage(ctx, dl, ImVec2(origin.x, origin.y + header_h), ImVec2(size.x, size.y - header_h),
                    *cluster);
    draw_header(ctx, dl, origin, size.x);
    ImGui::Dummy(size);
    return;
  }
  const float legend_h = draw_legend(ctx, dl, ImVec2(origin.x, 0), size.x, true);
  const ImVec2 area_origin(origin.x + fs * 0.3f, origin.y + header_h);
  const ImVec2 area_size(size.x - fs * 0.6f, size.y - header_h - legend_h - fs * 0.3f);
  // A failed run's error banner takes the top of the area and the cards are laid out below it,
  // when that leaves them most of the area; on a small stage (1280x720 in --present) it lies across
  // the middle instead, over the host, so no card loses a row.
  const float banner_h = draw_error_banner(ctx, dl, area_origin, area_size, true);
  const bool banner_on_top = banner_h > 0 && area_size.y - banner_h >= area_size.y * 0.8f;
  const float reserved_h = banner_on_top ? banner_h : 0.0f;
  layout(ctx, ImVec2(area_origin.x, area_origin.y + reserved_h),
         ImVec2(area_size.x, area_size.y - reserved_h));
  draw_links(ctx, dl);
  int clipped = 0;
  roomy_ = true;
  card_pills_.assign(ctx.state->devices.size(), "");
  for (const Box& box : boxes_) {
    if (box.device == host_) {
      draw_host(ctx, dl, box);
    } else if (is_switch(box.device)) {
      draw_switch(ctx, dl, box);
    } else {
      const CardFit fit = draw_card(ctx, dl, box);
      clipped += fit.clipped ? 1 : 0;
      roomy_ = roomy_ && fit.roomy;
    }
  }
  // The next frame's card scale: smaller while a row does not fit, back towards 1 while every card
  // has rows to spare (the gap between the two keeps it from oscillating).
  clipped_cards_ = clipped;
  if (clipped > 0 && tree_ && ctx.present && card_scale_ <= kMinCardScale) {
    tree_too_small_ = area_size;  // the tree cannot keep its rows here: the ring layout from now on
    card_scale_ = 1.0f;
  } else if (clipped > 0) {
    card_scale_ = std::max(kMinCardScale, card_scale_ * 0.85f);
  } else if (roomy_ && card_scale_ < 1.0f) {
    card_scale_ = std::min(1.0f, card_scale_ * 1.05f);
  }
  draw_transfers(ctx, dl);
  if (banner_h > 0) {
    // Across the middle: in the band between the two rows of cards, over the host and switches
    // only, cut to the band's height.
    float top_row_bottom = area_origin.y;
    float bottom_row_top = area_origin.y + area_size.y;
    float mid = 0.0f;
    for (int g : ring_)
      mid += box_of(g) != nullptr ? box_of(g)->center.y / static_cast<float>(ring_.size()) : 0.0f;
    for (int g : ring_) {
      const Box* c = box_of(g);
      if (c == nullptr) continue;
      if (c->center.y < mid) top_row_bottom = std::max(top_row_bottom, c->center.y + c->half.y);
      if (c->center.y > mid) bottom_row_top = std::min(bottom_row_top, c->center.y - c->half.y);
    }
    const float band = bottom_row_top - top_row_bottom - fs * 0.4f;
    const float middle_y = (top_row_bottom + bottom_row_top) * 0.5f;
    if (banner_on_top) {
      draw_error_banner(ctx, dl, area_origin, area_size, false);
    } else {
      const float h = draw_error_banner(ctx, dl, area_origin, area_size, true, band) - fs * 0.4f;
      draw_error_banner(ctx, dl, ImVec2(area_origin.x, std::max(area_origin.y, middle_y - h * 0.5f)),
                        area_size, false, band);
    }
  }
  draw_header(ctx, dl, origin, size.x);
  dl->AddLine(ImVec2(origin.x, origin.y + size.y - legend_h - fs * 0.15f),
              ImVec2(origin.x + size.x, origin.y + size.y - legend_h - fs * 0.15f), ctx.palette->grid);
  draw_legend(ctx, dl, ImVec2(origin.x, origin.y + size.y - legend_h), size.x, false);
  ImGui::Dummy(size);
}

}  // namespace dpscope::viz
