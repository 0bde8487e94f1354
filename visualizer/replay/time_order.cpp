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
  // bytes an event at the peak of loading). The key is unique, so unstable sorts give the one
  // stable order. A trace's lines are nearly in time order (ranks' lines interleave a little), so
  // blocks are sorted one by one and merged with the block before, where the events they read are
  // near each other in memory; a file whose disorder reaches further than a block fails the final
  // check and gets one sort of the whole.
  const auto by_key = [this](uint32_t a, uint32_t b) { return earlier(a, b); };
  order_.resize(size_);
  std::iota(order_.begin(), order_.end(), uint32_t{0});
  constexpr size_t kBlock = size_t{1} << 16;
  for (size_t begin = 0; begin < size_; begin += kBlock) {
    const auto first = order_.begin() + static_cast<ptrdiff_t>(begin);
    const auto last = order_.begin() + static_cast<ptrdiff_t>(std::min(begin + kBlock, size_));
    std::sort(first, last, by_key);
    if (begin > 0) std::inplace_merge(first - static_cast<ptrdiff_t>(kBlock), first, last, by_key);
  }
  if (!std::is_sorted(order_.begin(), order_.end(), by_key)) std::sort(order_.begin(), order_.end(), by_key);
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
