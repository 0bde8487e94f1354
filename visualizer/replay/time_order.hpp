// TimeOrder: the global time order of a trace's events, by (ts, file index). The key is unique, so
// "the k-th event in time" is well defined and equal timestamps keep file order. Used by
// ReplayModel for its positions (Cursor::seq counts events of this order that have happened).
//
// Memory: a trace written in time order (the usual case) is its own order and costs nothing;
// otherwise the permutation takes 4 bytes an event. There is no inverse table and no copy of the
// timestamps: because the key is unique, "has event i happened" compares i's key with the last
// happened event's (O(1)), and "where is event i" is a binary search on the key (O(log n)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::viz {

class TimeOrder {
 public:
  TimeOrder() = default;
  // Orders the first `events.size()` events; `events` must outlive this order (it may grow: a
  // followed trace appends before the model is rebuilt, and the order keeps to the events it saw).
  explicit TimeOrder(const std::vector<trace::Event>& events);

  size_t size() const { return size_; }
  // The event at time-order position `pos` (< size()).
  uint32_t event_at(size_t pos) const { return identity() ? static_cast<uint32_t>(pos) : order_[pos]; }
  int64_t ts_at(size_t pos) const { return (*events_)[event_at(pos)].ts_ns; }
  // The position of `event` (< size()).
  uint32_t position_of(uint32_t event) const;
  // Whether `event` is among the first `count` events in time order.
  bool within_first(uint32_t event, uint32_t count) const;
  // How many events have ts <= t_ns.
  size_t count_until(int64_t t_ns) const;
  // True when the events were already in time order (no permutation is stored).
  bool identity() const { return order_.empty(); }

 private:
  // (ts, index) order, the unique key.
  bool earlier(uint32_t a, uint32_t b) const {
    const int64_t ta = (*events_)[a].ts_ns;
    const int64_t tb = (*events_)[b].ts_ns;
    return ta < tb || (ta == tb && a < b);
  }

  const std::vector<trace::Event>* events_ = nullptr;
  size_t size_ = 0;
  std::vector<uint32_t> order_;  // (size_) event indices in time order; empty: the identity
};

}  // namespace dpscope::viz
