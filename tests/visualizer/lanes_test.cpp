// Lane queries: visible range by binary search, covering item, level-of-detail merging and
// nesting levels — on hand-made items and on a real DDP trace.
#include <gtest/gtest.h>

#include <random>

#include "dpscope/trace_format/reader.hpp"
#include "replay/lanes.hpp"
#include "replay/replay_model.hpp"
#include "trace_fixtures.hpp"

namespace dpscope::viz {
namespace {

LaneLevel level_of(std::initializer_list<std::pair<int64_t, int64_t>> spans) {
  LaneLevel out;
  uint32_t i = 0;
  for (const auto& [a, b] : spans) out.push_back({a, b, i++});
  return out;
}

TEST(VisibleRange, FindsTheItemsThatIntersectTheWindow) {
  const LaneLevel l = level_of({{0, 10}, {10, 20}, {30, 40}, {50, 100}});
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
  EXPECT_TRUE(visible_range(LaneLevel{}, 0, 10).empty());
}

TEST(CoveringItem, IsTheItemWhoseHalfOpenIntervalHoldsT) {
  const LaneLevel l = level_of({{0, 10}, {10, 20}, {30, 40}});
  EXPECT_EQ(covering_item(l, 0), 0u);
  EXPECT_EQ(covering_item(l, 9), 0u);
  EXPECT_EQ(covering_item(l, 10), 1u);
  EXPECT_EQ(covering_item(l, 25), l.size());
  EXPECT_EQ(covering_item(l, 40), l.size());
  EXPECT_EQ(covering_item(l, -1), l.size());
}

TEST(MergeForDisplay, MergesRunsOfNarrowItemsIntoOneBoxWithACount) {
  LaneLevel l;
  for (uint32_t i = 0; i < 100; ++i) l.push_back({2 * i, 2 * i + 1, i});  // 100 items, 1 ns wide, 1 ns apart
  l.push_back({300, 400, 100});                                           // wide
  l.push_back({500, 501, 101});                                           // narrow, alone
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
  const LaneLevel l = level_of({{0, 1}, {2, 3}, {4, 100}, {101, 102}});
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
  LaneLevel l;
  int64_t t = 0;
  for (uint32_t i = 0; i < 20000; ++i) {
    t += static_cast<int64_t>(gen() % 50);
    const int64_t w = (gen() % 10 == 0) ? 500 : static_cast<int64_t>(gen() % 20);
    l.push_back({t, t + w, i});
    t += w;
  }
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
          for (uint32_t k = box.first; k < box.first + box.count; ++k) EXPECT_LT(l[k].width_ns(), min_w);
        }
      }
      EXPECT_EQ(total, r.size()) << "min " << min_w;
    }
  }
}

TEST(BuildLevels, NestsChildrenUnderParentsAndSeparatesPartialOverlaps) {
  std::vector<LaneItem> items = {{10, 20, 1}, {0, 100, 0}, {20, 30, 2}, {25, 50, 3}, {60, 70, 4}};
  const std::vector<LaneLevel> levels = build_levels(items);
  ASSERT_EQ(levels.size(), 3u);
  ASSERT_EQ(levels[0].size(), 1u);
  EXPECT_EQ(levels[0][0].event, 0u);  // the enclosing span
  ASSERT_EQ(levels[1].size(), 3u);
  EXPECT_EQ(levels[1][0].event, 1u);
  EXPECT_EQ(levels[1][1].event, 2u);
  EXPECT_EQ(levels[1][2].event, 4u);
  ASSERT_EQ(levels[2].size(), 1u);
  EXPECT_EQ(levels[2][0].event, 3u);  // overlaps [20,30) partially: a level of its own
  for (const LaneLevel& l : levels)
    for (size_t i = 1; i < l.size(); ++i) EXPECT_LE(l[i - 1].end_ns, l[i].start_ns);
}

TEST(LanesOnARealTrace, EveryLevelIsSortedAndDisjointAndHoldsEverySpan) {
  const auto path = testing::scratch_dir() / "ddp.jsonl";
  testing::write_ddp_trace(path, 4, 3, 8);
  const trace::TraceData data = trace::read_trace(path);
  const ReplayModel m(data);
  size_t items = 0;
  for (const ModelLane& lane : m.lanes()) {
    size_t in_lane = 0;
    for (const LaneLevel& l : lane.levels) {
      in_lane += l.size();
      for (size_t i = 1; i < l.size(); ++i) ASSERT_LE(l[i - 1].end_ns, l[i].start_ns);
    }
    EXPECT_EQ(in_lane, lane.item_count);
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
