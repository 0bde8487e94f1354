// The stage of a tree run (--algo tree): the GPU cards drawn as the tree the all-reduce climbs —
// tree 0 of the double binary tree (comm/schedule.hpp), a heap over the ranks: rank 0 on top, the
// children of rank i (2i+1, 2i+2) on the row below, each under its parent. The host and the
// switches stand in a column on the left. Reduce arrows run up the tree and broadcast arrows down.
//
// Tree 1, the mirror image (rank n-1-i in heap position i), pairs ranks this picture does not put
// next to each other; its transfers, like the host's copies to deep cards, leave along the free
// lane below their row, run down a channel at the stage's side and enter from the lane above
// their row (tree_route), so no arrow crosses a card.
#include <algorithm>
#include <cmath>

#include "ui/stage_view.hpp"

namespace dpscope::viz {
namespace {

int heap_depth(size_t index) {
  int d = 0;
  while ((size_t{2} << d) - 1 <= index) ++d;  // row d holds indices 2^d - 1 .. 2^(d+1) - 2
  return d;
}

}  // namespace

void StageView::layout_tree(ImVec2 origin, ImVec2 size, ImVec2 host_half) {
  const float fs = ImGui::GetFontSize();
  const float gap = fs * 0.8f;
  const size_t n = ring_.size();
  const int rows = heap_depth(n - 1) + 1;
  // The left column (host and switches), a side channel on the right for routed arrows.
  const float left = origin.x + (host_ >= 0 || !switches_.empty() ? 2 * host_half.x + 3 * gap : gap);
  const float right = origin.x + size.x - 2.5f * gap;
  const float width = right - left;
  // A card is as wide as the narrowest spacing between two cards of one row allows.
  float card_w = width * 0.5f;
  for (int r = 1; r < rows; ++r) {
    const size_t first = (size_t{1} << r) - 1;
    if (n - first >= 2) card_w = std::min(card_w, width / static_cast<float>(1 << r) - gap);
  }
  const float lane = gap * 1.2f;  // between rows: room for routed arrows, along its middle
  tree_lane_ = lane * 0.5f;
  const float card_h = std::min((size.y - lane * static_cast<float>(rows + 1)) / static_cast<float>(rows),
                                card_w * 0.75f + fs * 4);
  const ImVec2 half(card_w * 0.5f, card_h * 0.5f);
  for (size_t i = 0; i < n; ++i) {
    const int r = heap_depth(i);
    const size_t slot = i - ((size_t{1} << r) - 1);
    // A lone card of a partly filled last row may lean out of its slot: keep it within the cards'
    // area, off the channels (rows of two or more cards never need this).
    const float x = std::clamp(left + (static_cast<float>(slot) + 0.5f) * width / static_cast<float>(1 << r),
                               left + half.x, right - half.x);
    const float y = origin.y + lane + half.y + static_cast<float>(r) * (card_h + lane);
    boxes_.push_back({ring_[i], ImVec2(x, y), half});
  }
  if (host_ >= 0)
    boxes_.push_back({host_, ImVec2(origin.x + gap + host_half.x, origin.y + lane + host_half.y), host_half});
  tree_channel_x_ = right + 1.25f * gap;
  tree_left_channel_x_ = left - 1.5f * gap;
}

std::vector<ImVec2> StageView::tree_route(int a, int b) const {
  const Box* ba = box_of(a);
  const Box* bb = box_of(b);
  const float lane = tree_lane_;  // half the space between rows: the lanes' middle
  auto is_card = [&](int device) { return std::find(ring_.begin(), ring_.end(), device) != ring_.end(); };
  // Leave a card through its lower edge into the lane below its row; enter one from the lane above.
  // The host and the switches sit in the left column: they leave and enter from the side, along the
  // channel between that column and the cards.
  std::vector<ImVec2> route;
  if (is_card(a)) {
    const float x = ba->center.x + ba->half.x * 0.25f;
    route.push_back(ImVec2(x, ba->center.y + ba->half.y));
    route.push_back(ImVec2(x, ba->center.y + ba->half.y + lane));
  } else {
    route.push_back(ImVec2(ba->center.x + ba->half.x, ba->center.y));
    route.push_back(ImVec2(tree_left_channel_x_, ba->center.y));
  }
  const float channel = is_card(a) ? tree_channel_x_ : tree_left_channel_x_;
  if (is_card(b)) {
    const float x = bb->center.x - bb->half.x * 0.25f;
    const float above = bb->center.y - bb->half.y - lane;
    if (std::fabs(above - route.back().y) > 1.0f) {  // another lane: by the side channel
      route.push_back(ImVec2(channel, route.back().y));
      route.push_back(ImVec2(channel, above));
    }
    route.push_back(ImVec2(x, above));
    route.push_back(ImVec2(x, bb->center.y - bb->half.y));
  } else {
    route.push_back(ImVec2(tree_left_channel_x_, route.back().y));
    route.push_back(ImVec2(tree_left_channel_x_, bb->center.y));
    route.push_back(ImVec2(bb->center.x + bb->half.x, bb->center.y));
  }
  return route;
}

}  // namespace dpscope::viz
