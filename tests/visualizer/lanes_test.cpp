// Lane queries: visible range by binary search, covering item, level-of-detail merging and
// nesting levels — on hand-made intervals, on events, and on a real DDP trace.
#include <gtest/gtest.h>

#include <random>

#include "dpscope/trace_tools/reader.hpp"
#include "replay/lanes.hpp"
#include "replay/replay_model.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

std::vector<TimeInterval> level_of(std::initializer_list<std::pair<int64_t, int64_t>> spans) {
  std::vector<TimeInterval> out;
  for (const auto& [a, b] : spans) out.push_back({a, b});
  return out;
}

// Spans with the given [start, start + dur), in this file order.
std::vector<trace::Event> spans_of(std::initializer_list<std::pair<int64_t, int64_t>> start_dur) {
  std::vector<trace::Event> events;
  for (const auto& [ts, dur] : start_dur) {
    trace::Event e;
    e.type = trace::EventType::kSpan;
    e.ts_ns = ts;
    e.dur_ns = dur;
    events.push_back(e);
  }
  return events;
}

std::vector<uint32_t> all_of(const std::vector<trace::Event>& events) {
  std::vector<uint32_t> items(events.size());
  for (uint32_t i = 0; i < items.size(); ++i) items[i] = i;
  return items;
}

std::vector<uint32_t> events_of(std::span<const uint32_t> level) { return {level.begin(), level.end()}; }

TEST(VisibleRange, FindsTheItemsThatIntersectTheWindow) {
  const std::vector<TimeInterval> items = level_of({{0, 10}, {10, 20}, {30, 40}, {50, 100}});
  const IntervalLevel l(items);
  auto range = [&](int64_t a, int64_t b) {
    const IndexRange r = visible_range(l, a, b);
    return std::pair<size_t, size_t>{r.begin, r.end};
  };
  EXPECT_EQ(range(15, 35), (std::pair<size_t, size_t>{1, 3}));
  EXPECT_EQ(range(0, 1000), (std::pair<size_t, size_t>{0, 4}));
  EXPECT_EQ(range(20, 30), (std::pair<size_t, size_t>{2, 2}));  // the gap: nothing
  EXPECT_EQ(range(10, 11), (std::pair<size_t, size_t>{1, 2}));  // [0,10) ends where the window starts
  EXPECT_EQ(range(99, 200), (std::pair<size_t, size_t>{3, 4}));
  EXPECT_TRUE(visible_range(l, 100, 200).empty());
  EXPECT_TRUE(visible_range(l, -10, 0).empty());
  EXPECT_TRUE(visible_range(IntervalLevel({}), 0, 10).empty());
}

TEST(CoveringItem, IsTheItemWhoseHalfOpenIntervalHoldsT) {
  const std::vector<TimeInterval> items = level_of({{0, 10}, {10, 20}, {30, 40}});
  const IntervalLevel l(items);
  EXPECT_EQ(covering_item(l, 0), 0u);
  EXPECT_EQ(covering_item(l, 9), 0u);
  EXPECT_EQ(covering_item(l, 10), 1u);
  EXPECT_EQ(covering_item(l, 25), l.size());
  EXPECT_EQ(covering_item(l, 40), l.size());
  EXPECT_EQ(covering_item(l, -1), l.size());
}

TEST(MergeForDisplay, MergesRunsOfNarrowItemsIntoOneBoxWithACount) {
  std::vector<TimeInterval> items;
  for (int64_t i = 0; i < 100; ++i) items.push_back({2 * i, 2 * i + 1});  // 100 items, 1 ns wide, 1 ns apart
  items.push_back({300, 400});                                            // wide
  items.push_back({500, 501});                                            // narrow, alone
  const IntervalLevel l(items);
  std::vector<LodBox> boxes;
  merge_for_display(l, 0, 1000, 5, boxes);
  ASSERT_EQ(boxes.size(), 3u);
  EXPECT_EQ(boxes[0].count, 100u);
  EXPECT_EQ(boxes[0].first, 0u);
  EXPECT_EQ(boxes[0].start_ns, 0);
  EXPECT_EQ(boxes[0].end_ns, 199);
  EXPECT_EQ(boxes[1].count, 1u);
  EXPECT_EQ(boxes[1].first, 100u);
  EXPECT_EQ(boxes[2].count, 1u);
  EXPECT_EQ(boxes[2].start_ns, 500);
  // Zoomed in far enough, nothing merges.
  boxes.clear();
  merge_for_display(l, 0, 1000, 1, boxes);
  EXPECT_EQ(boxes.size(), 102u);
  // Only the visible part is considered.
  boxes.clear();
  merge_for_display(l, 150, 350, 5, boxes);
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[0].first, 75u);
  EXPECT_EQ(boxes[0].count, 25u);
}

TEST(MergeForDisplay, NeverSwallowsAWideItemIntoARun) {
  const std::vector<TimeInterval> items = level_of({{0, 1}, {2, 3}, {4, 100}, {101, 102}});
  const IntervalLevel l(items);
  std::vector<LodBox> boxes;
  merge_for_display(l, 0, 200, 10, boxes);
  ASSERT_EQ(boxes.size(), 3u);
  EXPECT_EQ(boxes[0].count, 2u);  // [0,1) and [2,3)
  EXPECT_EQ(boxes[1].count, 1u);  // the wide one on its own
  EXPECT_EQ(boxes[1].start_ns, 4);
  EXPECT_EQ(boxes[2].count, 1u);
}

TEST(MergeForDisplay, CountsAddUpToTheVisibleItemsForAnyZoom) {
  std::mt19937 gen(7);
  std::vector<TimeInterval> items;
  int64_t t = 0;
  for (uint32_t i = 0; i < 20000; ++i) {
    t += static_cast<int64_t>(gen() % 50);
    const int64_t w = (gen() % 10 == 0) ? 500 : static_cast<int64_t>(gen() % 20);
    items.push_back({t, t + w});
    t += w;
  }
  const IntervalLevel l(items);
  for (int64_t min_w : {1, 3, 30, 3000, 300000}) {
    for (auto [a, b] : {std::pair<int64_t, int64_t>{0, t}, {t / 3, t / 2}, {t - 100, t + 100}}) {
      std::vector<LodBox> boxes;
      merge_for_display(l, a, b, min_w, boxes);
      const IndexRange r = visible_range(l, a, b);
      size_t total = 0;
      size_t expect_first = r.begin;
      for (const LodBox& box : boxes) {
        EXPECT_EQ(box.first, expect_first);  // boxes tile the visible items in order
        expect_first += box.count;
        total += box.count;
        if (box.count > 1) {
          for (uint32_t k = box.first; k < box.first + box.count; ++k)
            EXPECT_LT(l.end_ns(k) - l.start_ns(k), min_w);
        }
      }
      EXPECT_EQ(total, r.size()) << "min " << min_w;
    }
  }
}

// The ends of runs found from the blocks' largest stops (RunStops) are the ends found by jumps,
// for runs that cross many blocks and superblocks, wide items and gaps anywhere, every zoom.
TEST(MergeForDisplay, RunStopsEndEveryRunWhereJumpsEndIt) {
  std::mt19937 gen(11);
  std::vector<std::pair<int64_t, int64_t>> start_dur;
  int64_t t = 0;
  for (uint32_t i = 0; i < 30000; ++i) {
    const uint32_t r = gen() % 1000;
    t += r == 0 ? 5000 : static_cast<int64_t>(gen() % 4);               // now and then a wide gap
    const int64_t w = r == 1 ? 2000 : static_cast<int64_t>(gen() % 6);  // now and then a wide item
    start_dur.emplace_back(t, w);
    t += w;
  }
  std::vector<trace::Event> events;
  for (const auto& [ts, dur] : start_dur) events.push_back(spans_of({{ts, dur}})[0]);
  const LaneLevels levels(all_of(events), events);
  ASSERT_GE(levels.level(0).size(), 25000u)
      << "nearly all in level 0 (a zero-wide item at another's start nests)";
  const EventLevel jumps(levels.level(0), events, &levels.sampled_starts(0));
  const EventLevel blocks(levels.level(0), events, &levels.sampled_starts(0), &levels.run_stops(0));
  for (int64_t min_w : {1, 2, 7, 100, 3000, 6000, 1000000}) {
    for (auto [a, b] : {std::pair<int64_t, int64_t>{0, t}, {t / 3, t / 2}, {t - 500, t + 500}, {17, 400}}) {
      std::vector<LodBox> want;
      std::vector<LodBox> got;
      merge_for_display(jumps, a, b, min_w, want);
      merge_for_display(blocks, a, b, min_w, got);
      ASSERT_EQ(got.size(), want.size()) << min_w << " " << a << ".." << b;
      for (size_t k = 0; k < got.size(); ++k) {
        EXPECT_EQ(got[k].first, want[k].first) << k;
        EXPECT_EQ(got[k].count, want[k].count) << k;
        EXPECT_EQ(got[k].end_ns, want[k].end_ns) << k;
      }
    }
  }
  // From any item, to any end: the first stop is the same.
  for (size_t from = 1; from < 9000; from += 97) {
    for (size_t to : {from, from + 1, from + 63, from + 4100, size_t{30000}}) {
      for (int64_t w : {2, 5, 3000}) {
        EXPECT_EQ(blocks.first_stop_at_least(from, to, w), jumps.first_stop_at_least(from, to, w))
            << from << ".." << to << " w " << w;
      }
    }
  }
}

// The same queries on a level of event indices give the answers of the same intervals by hand.
TEST(EventLevel, ReadsItsTimesFromTheEvents) {
  // File order differs from the level's order, and a negative duration is drawn zero-wide.
  const std::vector<trace::Event> events = spans_of({{30, 10}, {0, 10}, {10, -5}, {50, 50}});
  const std::vector<uint32_t> items = {1, 2, 0, 3};
  const EventLevel l(items, events);
  EXPECT_EQ(l.start_ns(0), 0);
  EXPECT_EQ(l.end_ns(1), 10) << "[10, 10): negative durations count as 0";
  EXPECT_EQ(l.event(2), 0u);
  const std::vector<TimeInterval> by_hand = level_of({{0, 10}, {10, 10}, {30, 40}, {50, 100}});
  for (int64_t a = -5; a < 110; a += 5) {
    EXPECT_EQ(covering_item(l, a), covering_item(IntervalLevel(by_hand), a)) << a;
    for (int64_t b = a; b < 110; b += 15) {
      const IndexRange got = visible_range(l, a, b);
      const IndexRange want = visible_range(IntervalLevel(by_hand), a, b);
      EXPECT_EQ(got.begin, want.begin) << a << ".." << b;
      EXPECT_EQ(got.end, want.end) << a << ".." << b;
    }
  }
  std::vector<LodBox> boxes;
  merge_for_display(l, 0, 100, 20, boxes);
  ASSERT_EQ(boxes.size(), 3u);
  EXPECT_EQ(boxes[0].count, 2u);  // [0,10) and [10,10) are narrower than 20 and 0 apart
  EXPECT_EQ(boxes[1].count, 1u);
  EXPECT_EQ(boxes[2].start_ns, 50);
}

TEST(LaneLevels, NestsChildrenUnderParentsAndSeparatesPartialOverlaps) {
  // Written children first, the way spans end: [10,20) [0,100) [20,30) [25,50) [60,70).
  const std::vector<trace::Event> events = spans_of({{10, 10}, {0, 100}, {20, 10}, {25, 25}, {60, 10}});
  const LaneLevels levels(all_of(events), events);
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels.item_count(), 5u);
  EXPECT_EQ(events_of(levels.level(0)), (std::vector<uint32_t>{1}));        // the enclosing span
  EXPECT_EQ(events_of(levels.level(1)), (std::vector<uint32_t>{0, 2, 4}));  // its children, by start
  EXPECT_EQ(events_of(levels.level(2)), (std::vector<uint32_t>{3}));        // overlaps [20,30) partially
  for (size_t d = 0; d < levels.size(); ++d) {
    const EventLevel l(levels.level(d), events);
    for (size_t i = 1; i < l.size(); ++i) EXPECT_LE(l.end_ns(i - 1), l.start_ns(i));
  }
}

TEST(LaneLevels, EqualStartsPutTheLongerOutsideThenKeepFileOrder) {
  // Two identical spans nest (the second under the first); the longer of two equal starts is outside.
  const std::vector<trace::Event> events = spans_of({{0, 5}, {0, 10}, {0, 5}, {20, 0}, {20, 0}});
  const LaneLevels levels(all_of(events), events);
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(events_of(levels.level(0)), (std::vector<uint32_t>{1, 3, 4}));  // zero-wide: never open
  EXPECT_EQ(events_of(levels.level(1)), (std::vector<uint32_t>{0}));
  EXPECT_EQ(events_of(levels.level(2)), (std::vector<uint32_t>{2}));
  EXPECT_EQ(LaneLevels().size(), 0u);
}

TEST(ForEachByStart, VisitsTheItemsOfSeveralLevelsInOrderOfStart) {
  const std::vector<trace::Event> events = spans_of({{0, 100}, {5, 1}, {50, 10}, {7, 2}, {60, 1}});
  const std::vector<uint32_t> outer = {0, 4};
  const std::vector<uint32_t> inner = {1, 3, 2};
  const std::vector<EventLevel> levels = {EventLevel(outer, events), EventLevel(inner, events)};
  std::vector<int64_t> starts;
  for_each_by_start(levels, [&](uint32_t event) { starts.push_back(events[event].ts_ns); });
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 5, 7, 50, 60}));
}

TEST(LanesOnARealTrace, EveryLevelIsSortedAndDisjointAndHoldsEverySpan) {
  const auto path = testing::scratch_dir() / "ddp.jsonl";
  testing::write_ddp_trace(path, 4, 3, 8);
  const trace::TraceData data = trace::read_trace(path);
  const ReplayModel m(data);
  size_t items = 0;
  for (const ModelLane& lane : m.lanes()) {
    size_t in_lane = 0;
    for (size_t d = 0; d < lane.levels.size(); ++d) {
      const EventLevel l = m.level(lane, d);
      in_lane += l.size();
      for (size_t i = 1; i < l.size(); ++i) ASSERT_LE(l.end_ns(i - 1), l.start_ns(i));
    }
    EXPECT_EQ(in_lane, lane.levels.item_count());
    items += in_lane;
  }
  size_t spans_and_transfers = 0;
  for (const trace::Event& e : data.events)
    spans_and_transfers += e.type == trace::EventType::kSpan || e.type == trace::EventType::kTransfer;
  EXPECT_EQ(items, spans_and_transfers);
  // 4 GPUs × (compute, comm, copy).
  EXPECT_EQ(m.lanes().size(), 12u);
}

}  // namespace
}  // namespace dpscope::viz
