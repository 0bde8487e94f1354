// Lane queries: visible range, covering item, level-of-detail merge, nesting levels.
#include "replay/lanes.hpp"

#include <algorithm>

namespace dpscope::viz {

IndexRange visible_range(std::span<const LaneItem> level, int64_t t0_ns, int64_t t1_ns) {
  // Ends are sorted (items are disjoint), so the first visible item is the first ending after t0.
  auto first = std::upper_bound(level.begin(), level.end(), t0_ns,
                                [](int64_t t, const LaneItem& item) { return t < item.end_ns; });
  auto last = std::lower_bound(first, level.end(), t1_ns,
                               [](const LaneItem& item, int64_t t) { return item.start_ns < t; });
  // A zero-width item exactly at t0 ends at t0: keep it visible.
  while (first != level.begin() && (first - 1)->end_ns == t0_ns && (first - 1)->start_ns == t0_ns) --first;
  return {static_cast<size_t>(first - level.begin()), static_cast<size_t>(last - level.begin())};
}

size_t covering_item(std::span<const LaneItem> level, int64_t t_ns) {
  auto after = std::upper_bound(level.begin(), level.end(), t_ns,
                                [](int64_t t, const LaneItem& item) { return t < item.start_ns; });
  if (after == level.begin()) return level.size();
  const LaneItem& candidate = *(after - 1);
  return candidate.end_ns > t_ns ? static_cast<size_t>(after - 1 - level.begin()) : level.size();
}

void merge_for_display(std::span<const LaneItem> level, int64_t t0_ns, int64_t t1_ns, int64_t min_width_ns,
                       std::vector<LodBox>& out) {
  const IndexRange range = visible_range(level, t0_ns, t1_ns);
  const int64_t min_w = std::max<int64_t>(min_width_ns, 1);
  auto by_start = [](const LaneItem& item, int64_t t) { return item.start_ns < t; };
  size_t i = range.begin;
  while (i < range.end) {
    const LaneItem& head = level[i];
    if (head.width_ns() >= min_w) {
      out.push_back({head.start_ns, head.end_ns, static_cast<uint32_t>(i), 1});
      ++i;
      continue;
    }
    // A narrow item starts a run. Jump to the first item that starts a full min width after the
    // run's end; every item skipped lies entirely inside that gap, so only the last one can be wide.
    size_t j = i + 1;
    int64_t run_end = head.end_ns;
    while (j < range.end) {
      const size_t k = static_cast<size_t>(std::lower_bound(level.begin() + static_cast<ptrdiff_t>(j),
                                                            level.begin() + static_cast<ptrdiff_t>(range.end),
                                                            run_end + min_w, by_start) -
                                           level.begin());
      if (k == j) break;  // the next item is too far away: the run ends here
      if (level[k - 1].width_ns() >= min_w) {
        j = k - 1;  // a wide item: the run stops before it, it gets its own box
        break;
      }
      j = k;
      run_end = level[k - 1].end_ns;
    }
    out.push_back(
        {head.start_ns, level[j - 1].end_ns, static_cast<uint32_t>(i), static_cast<uint32_t>(j - i)});
    i = j;
  }
}

std::vector<LaneLevel> build_levels(std::vector<LaneItem> items) {
  std::sort(items.begin(), items.end(), [](const LaneItem& a, const LaneItem& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;  // the enclosing span first
    return a.event < b.event;
  });
  std::vector<LaneLevel> levels;
  std::vector<int64_t> open_ends;  // ends of the items enclosing the current start, outermost first
  for (const LaneItem& item : items) {
    while (!open_ends.empty() && open_ends.back() <= item.start_ns) open_ends.pop_back();
    const size_t depth = open_ends.size();
    if (depth == levels.size()) levels.emplace_back();
    levels[depth].push_back(item);
    open_ends.push_back(item.end_ns);
  }
  return levels;
}

}  // namespace dpscope::viz
