// TimeOrder (replay/time_order.hpp): the (ts, file index) order of events, and searches on it.
#include "replay/time_order.hpp"

#include <algorithm>
#include <climits>
#include <ranges>
#include <span>

namespace dpscope::viz {

TimeOrder::TimeOrder(const std::vector<trace::Event>& events) : events_(&events), size_(events.size()) {
  const auto by_ts = [](const trace::Event& a, const trace::Event& b) { return a.ts_ns < b.ts_ns; };
  // File order is the time order when timestamps never decrease (ties are broken by file index).
  if (std::is_sorted(events.begin(), events.end(), by_ts)) return;
  // A trace's lines are nearly in time order (ranks' lines interleave a little), so blocks of
  // events are sorted one by one and merged with the block before; a file whose disorder reaches
  // further than a block fails the check on the way and gets one sort of the whole. Each block is
  // sorted as (ts, index) keys copied into a small buffer (3 x 1 MiB, whatever the trace's size),
  // which stays in cache, where comparing through indices would read the 48-byte events at every
  // comparison. The key is unique, so unstable sorts give the one stable order.
  struct Key {
    int64_t ts_ns;
    uint32_t event;
    bool operator<(const Key& o) const { return ts_ns < o.ts_ns || (ts_ns == o.ts_ns && event < o.event); }
  };
  constexpr size_t kBlock = size_t{1} << 16;
  order_.resize(size_);
  std::vector<Key> previous;  // the sorted keys of the block before, not yet final
  std::vector<Key> block;
  std::vector<Key> merged;
  previous.reserve(kBlock);
  block.reserve(kBlock);
  merged.reserve(2 * kBlock);
  bool sorted = true;  // every final position so far follows the one before it
  Key last_final{INT64_MIN, 0};
  size_t final_count = 0;  // positions [0, final_count) of order_ are written and final
  auto finish = [&](std::span<const Key> keys) {
    if (keys.empty()) return;
    if (keys.front() < last_final) sorted = false;
    for (const Key& key : keys) order_[final_count++] = key.event;
    last_final = keys.back();
  };
  for (size_t begin = 0; begin < size_; begin += kBlock) {
    const size_t end = std::min(begin + kBlock, size_);
    block.clear();
    for (size_t i = begin; i < end; ++i) block.push_back({events[i].ts_ns, static_cast<uint32_t>(i)});
    std::sort(block.begin(), block.end());
    // Merged with the block before: the lower part is final, the upper part (as many keys as this
    // block has) waits for the next block.
    merged.resize(previous.size() + block.size());
    std::merge(previous.begin(), previous.end(), block.begin(), block.end(), merged.begin());
    const auto upper = merged.end() - static_cast<ptrdiff_t>(block.size());
    finish(std::span(merged.begin(), upper));
    previous.assign(upper, merged.end());
  }
  finish(previous);
  if (!sorted) {
    const auto by_key = [this](uint32_t a, uint32_t b) { return earlier(a, b); };
    std::sort(order_.begin(), order_.end(), by_key);
  }
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
