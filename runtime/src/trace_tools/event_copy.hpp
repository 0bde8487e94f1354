// Copying events from one TraceData into another (internal to libdpscope): string indices
// re-interned, payloads (args, counter values, transfers, value samples, samples, buckets)
// appended to the other's tables. Where a trace is assembled from parts: the rank merge
// (rank_traces.cpp) and the two-thread parse of a file (trace_file.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::trace::detail {

// What one source's indices became in the destination: the caller's tables, kept between calls
// (both traces grow).
struct CopyMaps {
  std::vector<uint32_t>& strings;  // source string index -> destination (kNoString: not yet)
  std::vector<uint32_t>& shapes;   // source arg shape -> destination (UINT32_MAX: not yet)
  // Optional: a source run of args' values (its first entry) -> (its shape << 32) | the
  // destination's first entry, so a run many events share is copied and looked up once. Valid
  // while the source's value pool is unchanged: empty it when the source's events are dropped.
  std::vector<uint64_t>* runs = nullptr;
};

// `index` of `from`'s strings as `into` interns it (kNoString stays kNoString).
uint32_t copy_string(TraceData& into, const TraceData& from, uint32_t index, CopyMaps& maps);
// The arg shape `index` of `from`, its keys re-interned, as `into` interns it.
uint32_t copy_shape(TraceData& into, const TraceData& from, uint32_t index, CopyMaps& maps);

// Appends `e`'s payload to `into`'s tables and returns `e` with its name, category and payload
// pointing into `into`; every other field as it was. A transfer's remote ends are copied when
// `keep_remote_ends`, else dropped (Transfer::remote is kNoPayload: the caller resolves them).
// Throws Error(kFormat) when `into`'s value pool would pass 2^32 entries.
Event copy_event(TraceData& into, const TraceData& from, const Event& e, CopyMaps& maps,
                 bool keep_remote_ends);

// Empties `data`'s events, their payload tables and problems once they were copied on: the strings
// and arg shapes stay (a parser's cache and CopyMaps point at them). The table of recent value runs
// may then name entries past the pool; add_entries compares before it reuses one.
void drop_events(TraceData& data);

}  // namespace dpscope::trace::detail
