// Lane queries (visible range, covering item, level-of-detail merge) and nesting levels.
#include "replay/lanes.hpp"

#include <ranges>

namespace dpscope::viz {

namespace {

// The first item index in [from, to) for which `pred` is false, where pred holds for a prefix.
template <typename Pred>
size_t first_false(size_t from, size_t to, Pred pred) {
  const auto indices = std::views::iota(from, to);
  return static_cast<size_t>(std::ranges::partition_point(indices, pred) - indices.begin()) + from;
}

}  // namespace

template <LaneLevel Level>
IndexRange visible_range(const Level& level, int64_t t0_ns, int64_t t1_ns) {
  // Ends are sorted (items are disjoint), so the first visible item is the first ending after t0.
  size_t first = first_false(0, level.size(), [&](size_t k) { return level.end_ns(k) <= t0_ns; });
  const size_t last = level.first_start_at_or_after(first, level.size(), t1_ns);
  // A zero-width item exactly at t0 ends at t0: keep it visible.
  while (first > 0 && level.end_ns(first - 1) == t0_ns && level.start_ns(first - 1) == t0_ns) --first;
  return {first, last};
}

template <LaneLevel Level>
size_t covering_item(const Level& level, int64_t t_ns) {
  if (t_ns == INT64_MAX) return level.size();  // nothing ends after it
  const size_t after = level.first_start_at_or_after(0, level.size(), t_ns + 1);
  if (after == 0) return level.size();
  return level.end_ns(after - 1) > t_ns ? after - 1 : level.size();
}

template <LaneLevel Level>
void merge_for_display(const Level& level, int64_t t0_ns, int64_t t1_ns, int64_t min_width_ns,
                       std::vector<LodBox>& out) {
  const IndexRange range = visible_range(level, t0_ns, t1_ns);
  const int64_t min_w = std::max<int64_t>(min_width_ns, 1);
  auto width = [&](size_t k) { return level.end_ns(k) - level.start_ns(k); };
  size_t i = range.begin;
  while (i < range.end) {
    const int64_t head_start = level.start_ns(i);
    if (width(i) >= min_w) {
      out.push_back({head_start, level.end_ns(i), static_cast<uint32_t>(i), 1});
      ++i;
      continue;
    }
    // A narrow item starts a run, which ends before the first item that is wide (it gets its own
    // box) or starts a full min width after the item before it ends.
    const size_t j = level.first_stop_at_least(i + 1, range.end, min_w);
    out.push_back({head_start, level.end_ns(j - 1), static_cast<uint32_t>(i), static_cast<uint32_t>(j - i)});
    i = j;
  }
}

// The level types the model and the views use.
template IndexRange visible_range(const EventLevel&, int64_t, int64_t);
template IndexRange visible_range(const IntervalLevel&, int64_t, int64_t);
template size_t covering_item(const EventLevel&, int64_t);
template size_t covering_item(const IntervalLevel&, int64_t);
template void merge_for_display(const EventLevel&, int64_t, int64_t, int64_t, std::vector<LodBox>&);
template void merge_for_display(const IntervalLevel&, int64_t, int64_t, int64_t, std::vector<LodBox>&);

LaneLevels::LaneLevels(std::vector<uint32_t> items, const std::vector<trace::Event>& events) {
  // The lane's times, copied once into contiguous keys (24 bytes an item of this one lane, freed on
  // return): sorting them and assigning depths then reads no events, where comparing through the
  // indices would jump around the events at every comparison.
  struct Key {
    int64_t start_ns;
    int64_t end_ns;
    uint32_t event;
  };
  std::vector<Key> keys(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    const trace::Event& e = events[items[k]];
    keys[k] = {e.ts_ns, lane_end_ns(e), items[k]};
  }
  std::vector<uint32_t>().swap(items);
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;  // the enclosing span first
    return a.event < b.event;
  });
  // Two passes over the sorted items with the same depth rule: the first counts each level's items,
  // so the second writes them straight to their place in one exactly sized array.
  std::vector<int64_t> open_ends;  // ends of the items enclosing the current start, outermost first
  auto for_each_depth = [&](auto&& f) {
    open_ends.clear();
    for (const Key& key : keys) {
      while (!open_ends.empty() && open_ends.back() <= key.start_ns) open_ends.pop_back();
      f(key.event, open_ends.size());
      open_ends.push_back(key.end_ns);
    }
  };
  std::vector<uint32_t> level_size;
  for_each_depth([&](uint32_t, size_t depth) {
    if (depth == level_size.size()) level_size.push_back(0);
    ++level_size[depth];
  });
  level_begin_.resize(level_size.size() + 1);
  for (size_t depth = 0; depth < level_size.size(); ++depth)
    level_begin_[depth + 1] = level_begin_[depth] + level_size[depth];
  std::vector<uint32_t> fill(level_begin_.begin(), level_begin_.end() - 1);  // next free slot per level
  items_.resize(keys.size());
  // Each item's stop (lanes.hpp, RunStops) from its times and the end of the item before it on its
  // level, noted as it is placed: the keys hold the times, so no event is read for them.
  for (size_t depth = 0; depth < level_size.size(); ++depth) run_stops_.emplace_back(level_size[depth]);
  std::vector<int64_t> last_end(level_size.size(), 0);
  size_t k = 0;
  for_each_depth([&](uint32_t event, size_t depth) {
    const size_t at = fill[depth]++ - level_begin_[depth];  // the item's index within its level
    items_[level_begin_[depth] + at] = event;
    const Key& key = keys[k++];
    if (at > 0) run_stops_[depth].note(at, run_stop(last_end[depth], key.start_ns, key.end_ns));
    last_end[depth] = key.end_ns;
  });
  sampled_starts_.reserve(size());
  for (size_t depth = 0; depth < size(); ++depth) {
    const std::span<const uint32_t> items_at = level(depth);
    sampled_starts_.emplace_back(items_at.size(), [&](size_t i) { return events[items_at[i]].ts_ns; });
  }
}

}  // namespace dpscope::viz
