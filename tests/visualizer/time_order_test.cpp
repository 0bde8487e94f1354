// The global time order: (ts, file index), free when the file is already in time order, and the
// searches the model's positions run on it (has it happened, where is it, how many by time t).
#include <gtest/gtest.h>

#include <random>

#include "replay/time_order.hpp"

namespace dpscope::viz {
namespace {

std::vector<trace::Event> events_at(std::initializer_list<int64_t> ts) {
  std::vector<trace::Event> events;
  for (const int64_t t : ts) {
    trace::Event e;
    e.ts_ns = t;
    events.push_back(e);
  }
  return events;
}

TEST(TimeOrder, AFileInTimeOrderIsItsOwnOrder) {
  const std::vector<trace::Event> events = events_at({0, 5, 5, 9});
  const TimeOrder order(events);
  EXPECT_TRUE(order.identity());
  ASSERT_EQ(order.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(order.event_at(i), i);
    EXPECT_EQ(order.position_of(i), i);
  }
  EXPECT_EQ(order.ts_at(3), 9);
}

TEST(TimeOrder, SortsByTimeAndKeepsFileOrderOnTies) {
  //                                                 0   1  2  3   4  5
  const std::vector<trace::Event> events = events_at({20, 5, 5, 10, 5, 0});
  const TimeOrder order(events);
  EXPECT_FALSE(order.identity());
  const std::vector<uint32_t> expected = {5, 1, 2, 4, 3, 0};
  for (uint32_t p = 0; p < expected.size(); ++p) {
    EXPECT_EQ(order.event_at(p), expected[p]) << p;
    EXPECT_EQ(order.position_of(expected[p]), p) << p;
  }
  EXPECT_EQ(order.ts_at(1), 5);
}

TEST(TimeOrder, AnEventIsWithinTheFirstCountExactlyWhenItsPositionIsBelowIt) {
  const std::vector<trace::Event> events = events_at({20, 5, 5, 10, 5, 0});
  const TimeOrder order(events);
  for (uint32_t count = 0; count <= events.size() + 1; ++count)
    for (uint32_t e = 0; e < events.size(); ++e)
      EXPECT_EQ(order.within_first(e, count), order.position_of(e) < count) << e << " of " << count;
}

TEST(TimeOrder, CountUntilIsHowManyEventsHaveTsAtMostT) {
  const std::vector<trace::Event> events = events_at({20, 5, 5, 10, 5, 0});
  const TimeOrder order(events);
  EXPECT_EQ(order.count_until(-1), 0u);
  EXPECT_EQ(order.count_until(0), 1u);
  EXPECT_EQ(order.count_until(4), 1u);
  EXPECT_EQ(order.count_until(5), 4u);
  EXPECT_EQ(order.count_until(19), 5u);
  EXPECT_EQ(order.count_until(20), 6u);
  EXPECT_EQ(TimeOrder().count_until(0), 0u);
}

TEST(TimeOrder, AgreesWithAStableSortOnARandomTrace) {
  std::mt19937 gen(3);
  std::vector<trace::Event> events;
  for (int i = 0; i < 5000; ++i) {
    trace::Event e;
    e.ts_ns = static_cast<int64_t>(i / 4 + static_cast<int>(gen() % 40));  // nearly sorted, many ties
    events.push_back(e);
  }
  std::vector<uint32_t> expected(events.size());
  for (uint32_t i = 0; i < expected.size(); ++i) expected[i] = i;
  std::stable_sort(expected.begin(), expected.end(),
                   [&](uint32_t a, uint32_t b) { return events[a].ts_ns < events[b].ts_ns; });
  const TimeOrder order(events);
  for (uint32_t p = 0; p < expected.size(); ++p) {
    ASSERT_EQ(order.event_at(p), expected[p]) << p;
    ASSERT_EQ(order.position_of(expected[p]), p) << p;
  }
}

// The order is sorted block by block where the events lie close; disorder reaching across many
// blocks (here the last line belongs first, and lines swap in pairs) must still give the exact order.
TEST(TimeOrder, IsExactWhenTheDisorderReachesFarther) {
  const size_t n = 300'000;
  std::vector<trace::Event> events(n);
  for (size_t i = 0; i < n; ++i) events[i].ts_ns = static_cast<int64_t>(i ^ 1) + 10;  // pairs swapped
  events.back().ts_ns = 0;
  const TimeOrder order(events);
  ASSERT_EQ(order.event_at(0), n - 1);
  for (size_t p = 1; p + 1 < n; ++p) ASSERT_EQ(order.event_at(p), (p - 1) ^ 1) << p;
  EXPECT_EQ(order.event_at(n - 1), n - 2) << "its partner, the last line, went first";
  for (uint32_t e : {uint32_t{0}, uint32_t{1}, uint32_t{70'000}, static_cast<uint32_t>(n - 1)})
    EXPECT_EQ(order.event_at(order.position_of(e)), e);
}

TEST(TimeOrder, KeepsToTheEventsItSawWhenTheTraceGrows) {
  std::vector<trace::Event> events = events_at({0, 5});
  const TimeOrder order(events);
  events.push_back(events_at({1}).front());  // a followed trace appends before the next rebuild
  EXPECT_EQ(order.size(), 2u);
  EXPECT_EQ(order.count_until(100), 2u);
}

}  // namespace
}  // namespace dpscope::viz
