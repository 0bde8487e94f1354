// Timeline lanes: the depth-layered spans and transfers of one (device, stream) and the two queries
// the Timeline and the Stage run on them every frame: the visible range by binary search, and the
// level-of-detail merge of runs narrower than a few pixels into one box with a count (the way
// Tracy keeps millions of zones fluid). Pure data: no GL, no ImGui; unit-tested.
//
// Memory: a lane stores 4-byte event indices and reads every start and end from the trace's events
// (TraceData is loaded anyway), plus every 8th start (sampled_keys.hpp) so that the searches of a
// frame stay in cache, and the largest run stop of every 64 items (RunStops, below): 5.1 bytes a
// span or transfer instead of a 24-byte copy of its times.
#pragma once

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"
#include "replay/sampled_keys.hpp"

namespace dpscope::viz {

inline constexpr uint32_t kNoEvent = UINT32_MAX;

// Where a span or transfer lies on a lane: [ts, ts + dur); a negative duration is drawn zero-wide.
inline int64_t lane_end_ns(const trace::Event& e) { return e.ts_ns + std::max<int64_t>(e.dur_ns, 0); }

// The items at one nesting depth: sorted by start and pairwise disjoint, so ends are sorted too.
// The queries below take any level that tells the start and end of its k-th item, finds the first
// item in [from, to) that starts at or after t, and the first that stops a run at width w (below).
template <typename Level>
concept LaneLevel = requires(const Level& level, size_t k, int64_t t) {
  { level.size() } -> std::convertible_to<size_t>;
  { level.start_ns(k) } -> std::same_as<int64_t>;
  { level.end_ns(k) } -> std::same_as<int64_t>;
  { level.first_start_at_or_after(k, k, t) } -> std::same_as<size_t>;
  { level.first_stop_at_least(k, k, t) } -> std::same_as<size_t>;
};

// Where the level-of-detail merge ends a run of narrow items at a minimum width w: at the first
// item k (k >= 1) at least w wide or starting at least w after item k - 1 ends, that is whose
// stop(k) = max(start(k) - end(k - 1), end(k) - start(k)) is >= w.
//
// The stop of an item [start, end) after an item that ends at prev_end.
inline int64_t run_stop(int64_t prev_end, int64_t start, int64_t end) {
  return std::max(start - prev_end, end - start);
}

// By jumps: one search by start per step, each a gap of at least w past the run's end so far. It
// needs no memory, but a dense run across the screen takes a step per pixel (about 2,000 binary
// searches per level at a full zoom-out of a big trace).
template <typename Level>
size_t first_stop_by_jumps(const Level& level, size_t from, size_t to, int64_t w) {
  size_t j = std::max<size_t>(from, 1);  // item 0 ends no run
  while (j < to) {
    const size_t k = level.first_start_at_or_after(j, to, level.end_ns(j - 1) + w);
    if (k == j) return j;  // j starts w or more after the run's end
    // Items j..k-1 start within w of the run's end; only the last can be w wide (one wider would
    // end w past the run's end, so the next could not start within it).
    if (level.end_ns(k - 1) - level.start_ns(k - 1) >= w) return k - 1;
    j = k;
  }
  return to;
}

// The same answer from the largest stop of each block of 64 items and of each 64 blocks, kept per
// level (an 8-byte maximum per 64 items: 0.13 bytes an item): a dense run is crossed a block or
// 4,096 items at a time, so a frame's merge costs a few hundred reads per level whatever the zoom.
class RunStops {
 public:
  static constexpr size_t kBlock = 64;
  static constexpr size_t kSuper = kBlock * kBlock;

  RunStops() = default;
  // For n items, whose stops are then given by note() (item 0's is not needed: it ends no run).
  explicit RunStops(size_t n)
      : block_max_((n + kBlock - 1) / kBlock, INT64_MIN), super_max_((n + kSuper - 1) / kSuper, INT64_MIN) {}
  void note(size_t k, int64_t stop) {
    block_max_[k / kBlock] = std::max(block_max_[k / kBlock], stop);
    super_max_[k / kSuper] = std::max(super_max_[k / kSuper], stop);
  }
  bool empty() const { return block_max_.empty(); }

  // The first k in [from, to) with stop(k) >= w (`to` when none), for the stops these were built from.
  template <typename Stop>
  size_t first_at_least(size_t from, size_t to, int64_t w, Stop stop) const {
    size_t k = from;
    while (k < to) {
      if (k % kSuper == 0 && super_max_[k / kSuper] < w) {
        k = std::min(k + kSuper, to);
      } else if (k % kBlock == 0 && block_max_[k / kBlock] < w) {
        k = std::min(k + kBlock, to);
      } else if (stop(k) >= w) {
        return k;
      } else {
        ++k;
      }
    }
    return to;
  }

 private:
  std::vector<int64_t> block_max_;  // (ceil(n / kBlock))
  std::vector<int64_t> super_max_;  // (ceil(n / kSuper))
};

// A level of a model lane: event indices, the times read from the events; searches by start use
// the level's sampled starts when given.
class EventLevel {
 public:
  EventLevel(std::span<const uint32_t> items, const std::vector<trace::Event>& events,
             const SampledKeys* sampled_starts = nullptr, const RunStops* run_stops = nullptr)
      : items_(items), events_(&events), sampled_starts_(sampled_starts), run_stops_(run_stops) {}
  size_t size() const { return items_.size(); }
  uint32_t event(size_t k) const { return items_[k]; }
  int64_t start_ns(size_t k) const { return (*events_)[items_[k]].ts_ns; }
  int64_t end_ns(size_t k) const { return lane_end_ns((*events_)[items_[k]]); }
  size_t first_start_at_or_after(size_t from, size_t to, int64_t t_ns) const {
    const auto start = [this](size_t k) { return start_ns(k); };
    return sampled_starts_ != nullptr ? sampled_starts_->lower_bound(from, to, t_ns, start)
                                      : SampledKeys().lower_bound(from, to, t_ns, start);
  }
  // The item k >= 1 that ends a run of narrow items at width w (see first_stop_by_jumps).
  int64_t stop_ns(size_t k) const { return run_stop(end_ns(k - 1), start_ns(k), end_ns(k)); }
  size_t first_stop_at_least(size_t from, size_t to, int64_t w) const {
    if (run_stops_ == nullptr || run_stops_->empty()) return first_stop_by_jumps(*this, from, to, w);
    return run_stops_->first_at_least(std::max<size_t>(from, 1), to, w,  // item 0 ends no run
                                      [this](size_t k) { return stop_ns(k); });
  }

 private:
  std::span<const uint32_t> items_;
  const std::vector<trace::Event>* events_;
  const SampledKeys* sampled_starts_;  // nullptr: search the items alone
  const RunStops* run_stops_;          // nullptr: find the ends of runs by jumps
};

// A level of explicit intervals: the phase lane's bands, and hand-made levels in tests.
struct TimeInterval {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

class IntervalLevel {
 public:
  explicit IntervalLevel(std::span<const TimeInterval> items) : items_(items) {}
  size_t size() const { return items_.size(); }
  int64_t start_ns(size_t k) const { return items_[k].start_ns; }
  int64_t end_ns(size_t k) const { return items_[k].end_ns; }
  size_t first_start_at_or_after(size_t from, size_t to, int64_t t_ns) const {
    return SampledKeys().lower_bound(from, to, t_ns, [this](size_t k) { return start_ns(k); });
  }
  size_t first_stop_at_least(size_t from, size_t to, int64_t w) const {
    return first_stop_by_jumps(*this, from, to, w);
  }

 private:
  std::span<const TimeInterval> items_;
};

struct IndexRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  bool empty() const { return begin == end; }
};

// The items of `level` that intersect [t0_ns, t1_ns): two binary searches, O(log n).
template <LaneLevel Level>
IndexRange visible_range(const Level& level, int64_t t0_ns, int64_t t1_ns);

// The index of the item with start <= t_ns < end, or `level.size()` when none covers t_ns.
template <LaneLevel Level>
size_t covering_item(const Level& level, int64_t t_ns);

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
template <LaneLevel Level>
void merge_for_display(const Level& level, int64_t t0_ns, int64_t t1_ns, int64_t min_width_ns,
                       std::vector<LodBox>& out);

// The spans and transfers of one lane split into nesting levels, stored level after level in one
// array of event indices.
class LaneLevels {
 public:
  LaneLevels() = default;
  // Splits `items` (indices into `events`, any order; consumed). Items are first sorted by start
  // (longer first on ties, then by index); each goes one level below the items still open at its
  // start, so a properly nested span lands under its parent and a partially overlapping one
  // (allowed for transfers) gets a level of its own. Every level is sorted and disjoint.
  // Extra memory while building: 24 bytes an item of this lane (its times, sorted).
  LaneLevels(std::vector<uint32_t> items, const std::vector<trace::Event>& events);

  size_t size() const { return level_begin_.size() - 1; }  // levels; level 0 is the outermost
  size_t item_count() const { return items_.size(); }
  std::span<const uint32_t> level(size_t depth) const {
    return std::span(items_).subspan(level_begin_[depth], level_begin_[depth + 1] - level_begin_[depth]);
  }
  const SampledKeys& sampled_starts(size_t depth) const { return sampled_starts_[depth]; }
  const RunStops& run_stops(size_t depth) const { return run_stops_[depth]; }

 private:
  std::vector<uint32_t> items_;              // (item_count) event indices, level 0 first
  std::vector<uint32_t> level_begin_ = {0};  // (levels + 1) where each level starts in items_
  std::vector<SampledKeys> sampled_starts_;  // (levels) every 8th start of each level
  std::vector<RunStops> run_stops_;          // (levels) where each level's runs of narrow items end
};

// Calls f(event) for every item of `levels` in order of start (equal starts in any order): a k-way
// merge, O(items * levels) for the few levels lanes have, with no copy of the items. Several lanes'
// levels may be given together.
template <typename F>
void for_each_by_start(std::span<const EventLevel> levels, F&& f) {
  std::vector<size_t> next(levels.size(), 0);
  for (;;) {
    size_t best = levels.size();
    int64_t best_start = 0;
    for (size_t l = 0; l < levels.size(); ++l) {
      if (next[l] == levels[l].size()) continue;
      const int64_t start = levels[l].start_ns(next[l]);
      if (best == levels.size() || start < best_start) {
        best = l;
        best_start = start;
      }
    }
    if (best == levels.size()) return;
    f(levels[best].event(next[best]++));
  }
}

}  // namespace dpscope::viz
