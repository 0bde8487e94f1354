// TimeOrder (replay/time_order.hpp): the (ts, file index) order of events, and searches on it.
#include "replay/time_order.hpp"

#include <algorithm>
#include <numeric>
#include <ranges>

namespace dpscope::viz {

TimeOrder::TimeOrder(const std::vector<trace::Event>& events) : events_(&events), size_(events.size()) {
  const auto by_ts = [](const trace::Event& a, const trace::Event& b) { return a.ts_ns < b.ts_ns; };
  // File order is the time order when timestamps never decrease (ties are broken by file index).
  if (std::is_sorted(events.begin(), events.end(), by_ts)) return;
  // Indices sorted in place, reading ts from the events (no (ts, index) copy, which would cost 16
  // bytes an event at the peak of loading); a trace's lines are nearly in time order, so the reads
  // stay local. The key is unique, so the unstable sort gives the one stable order.
  order_.resize(size_);
  std::iota(order_.begin(), order_.end(), uint32_t{0});
  std::sort(order_.begin(), order_.end(), [this](uint32_t a, uint32_t b) { return earlier(a, b); });
}

uint32_t TimeOrder::position_of(uint32_t event) const {
  if (identity()) return event;
  const auto positions = std::views::iota(size_t{0}, size_);
  const auto it =
      std::ranges::partition_point(positions, [&](size_t pos) { return earlier(order_[pos], event); });
  return static_cast<uint32_t>(it - positions.begin());
}

bool TimeOrder::within_first(uint32_t event, uint32_t count) const {
  if (count == 0) return false;
  if (count >= size_) return event < size_;
  const uint32_t last = event_at(count - 1);
  return event == last || earlier(event, last);
}

size_t TimeOrder::count_until(int64_t t_ns) const {
  const auto positions = std::views::iota(size_t{0}, size_);
  const auto it = std::ranges::partition_point(positions, [&](size_t pos) { return ts_at(pos) <= t_ns; });
  return static_cast<size_t>(it - positions.begin());
}

}  // namespace dpscope::viz
