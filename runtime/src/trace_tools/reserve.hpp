// Reserving a trace's large vectors up front (internal to libdpscope), so they are never regrown:
// a regrowth briefly holds the old copy and the new one, tens of bytes an event at 10M events.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::trace::detail {

// A guess that errs high of the events in a trace file of `bytes`: traces take about 200 bytes an
// event as text and 5 compressed.
inline size_t estimated_events(uint64_t bytes, bool compressed) {
  return static_cast<size_t>(bytes / (compressed ? 2 : 100)) + 1024;
}

// vector.reserve(count), capped at a quarter of physical memory: reserved pages that are never
// written cost address space, not memory, and a huge guess cannot fail to allocate.
template <typename T>
void reserve_address_space(std::vector<T>& v, size_t count) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGESIZE);
  const size_t cap_bytes = pages > 0 && page_bytes > 0 ? static_cast<size_t>(pages) * page_bytes / 4 : 0;
  v.reserve(std::min(count, cap_bytes / sizeof(T)));
}

// Room for `events` events and their payloads (2 args or counter values each).
inline void reserve_events(TraceData& data, size_t events) {
  reserve_address_space(data.events, events);
  reserve_address_space(data.args, events);
  reserve_address_space(data.counters, events / 2);
  reserve_address_space(data.transfers, events / 2);
  reserve_address_space(data.value_pool, 2 * events);
}

}  // namespace dpscope::trace::detail
