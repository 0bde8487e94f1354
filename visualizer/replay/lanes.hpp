// Timeline lanes: the sorted, depth-layered items of one (device, stream) and the two queries the
// Timeline and the Stage run on them every frame: the visible range by binary search, and the
// level-of-detail merge of runs narrower than a few pixels into one box with a count (the way
// Tracy keeps millions of zones fluid). Pure data: no GL, no ImGui; unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dpscope::viz {

inline constexpr uint32_t kNoEvent = UINT32_MAX;

// One span or transfer on a lane. `event` indexes trace::TraceData::events.
struct LaneItem {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t event = kNoEvent;

  int64_t width_ns() const { return end_ns - start_ns; }
};

// The items at one nesting depth: sorted by start and pairwise disjoint, so ends are sorted too.
using LaneLevel = std::vector<LaneItem>;

struct IndexRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  bool empty() const { return begin == end; }
};

// The items of `level` that intersect [t0_ns, t1_ns): two binary searches, O(log n).
IndexRange visible_range(std::span<const LaneItem> level, int64_t t0_ns, int64_t t1_ns);

// The index of the item with start <= t_ns < end, or `level.size()` when none covers t_ns.
size_t covering_item(std::span<const LaneItem> level, int64_t t_ns);

// A box to draw: either one item (count == 1) or a merged run of `count` narrow items.
struct LodBox {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t first = 0;  // index in the level of the first item of the box
  uint32_t count = 0;  // items drawn as this box
};

// Level of detail. Walks the items of `level` that intersect [t0_ns, t1_ns) and appends to `out`
// one box per item at least `min_width_ns` wide, and one merged box per run of narrower items whose
// gaps are narrower than `min_width_ns` as well. A wide item is never swallowed by a run. The cost is
// O(boxes * log n), independent of how many items are visible: runs are skipped by binary search.
void merge_for_display(std::span<const LaneItem> level, int64_t t0_ns, int64_t t1_ns, int64_t min_width_ns,
                       std::vector<LodBox>& out);

// Splits `items` into nesting levels. Items are first sorted by start (longer first on ties); each
// goes one level below the items still open at its start, so a properly nested span lands under
// its parent and a partially overlapping one (allowed for transfers) gets a level of its own.
// Every returned level is sorted and disjoint.
std::vector<LaneLevel> build_levels(std::vector<LaneItem> items);

}  // namespace dpscope::viz
