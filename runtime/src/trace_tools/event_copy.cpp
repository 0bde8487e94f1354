// copy_event (event_copy.hpp).
#include "event_copy.hpp"

#include <limits>

namespace dpscope::trace::detail {

namespace {

constexpr uint32_t kNoShape = std::numeric_limits<uint32_t>::max();

// The numbers go over as they are; string values are string indices, re-interned.
Args copy_args(TraceData& into, const TraceData& from, const Args& a, CopyMaps& maps) {
  if (a.shape >= from.shapes.size()) return {};
  constexpr uint64_t kNoRun = std::numeric_limits<uint64_t>::max();
  uint64_t* run = nullptr;
  if (maps.runs != nullptr && a.begin < from.value_pool.size()) {
    if (maps.runs->size() < from.value_pool.size()) maps.runs->resize(from.value_pool.size(), kNoRun);
    run = &(*maps.runs)[a.begin];
    if (*run != kNoRun && *run >> 32 == a.shape)  // this run, with these keys, was copied before
      return {.shape = copy_shape(into, from, a.shape, maps), .begin = static_cast<uint32_t>(*run)};
  }
  thread_local std::vector<double> entries;
  entries.clear();
  for (const auto& [key, value] : from.arg_values(a)) entries.push_back(value);
  for (const auto& [key, text] : from.arg_texts(a)) entries.push_back(copy_string(into, from, text, maps));
  const Args copied{.shape = copy_shape(into, from, a.shape, maps), .begin = into.add_entries(entries)};
  if (run != nullptr) *run = (uint64_t{a.shape} << 32) | copied.begin;
  return copied;
}

template <typename T>
int32_t push(std::vector<T>& table, T entry) {
  table.push_back(std::move(entry));
  return static_cast<int32_t>(table.size() - 1);
}

}  // namespace

uint32_t copy_string(TraceData& into, const TraceData& from, uint32_t index, CopyMaps& maps) {
  if (index == kNoString || index >= from.strings.size()) return kNoString;
  if (index >= maps.strings.size()) maps.strings.resize(from.strings.size(), kNoString);
  uint32_t& copied = maps.strings[index];
  if (copied == kNoString) copied = into.intern(from.strings[index]);
  return copied;
}

uint32_t copy_shape(TraceData& into, const TraceData& from, uint32_t index, CopyMaps& maps) {
  if (index >= maps.shapes.size()) maps.shapes.resize(from.shapes.size(), kNoShape);
  uint32_t& copied = maps.shapes[index];
  if (copied == kNoShape) {
    ArgShape shape = from.shapes[index];
    for (uint32_t& k : shape.number_keys) k = copy_string(into, from, k, maps);
    for (uint32_t& k : shape.text_keys) k = copy_string(into, from, k, maps);
    copied = into.intern_shape(shape);
  }
  return copied;
}

Event copy_event(TraceData& into, const TraceData& from, const Event& e, CopyMaps& maps,
                 bool keep_remote_ends) {
  Event out = e;
  out.name = copy_string(into, from, e.name, maps);
  out.cat = copy_string(into, from, e.cat, maps);
  out.payload = kNoPayload;
  if (e.payload < 0) return out;
  const auto payload = static_cast<size_t>(e.payload);
  switch (e.type) {
    case EventType::kSpan:
    case EventType::kInstant:
      out.payload = push(into.args, copy_args(into, from, from.args[payload], maps));
      break;
    case EventType::kCounter:
      out.payload = push(into.counters, copy_args(into, from, from.counters[payload], maps));
      break;
    case EventType::kValues: {
      ValueSample v = from.values[payload];
      v.when = copy_string(into, from, v.when, maps);
      out.payload = push(into.values, std::move(v));
      break;
    }
    case EventType::kSamples: out.payload = push(into.samples, from.samples[payload]); break;
    case EventType::kBuckets: {
      BucketAssignment b = from.buckets[payload];
      b.reason = copy_string(into, from, b.reason, maps);
      out.payload = push(into.buckets, std::move(b));
      break;
    }
    case EventType::kTransfer: {
      Transfer t = from.transfers[payload];
      t.algo = copy_string(into, from, t.algo, maps);
      const RemoteEnds* remote = from.remote_ends_of(e);
      t.remote = remote != nullptr && keep_remote_ends ? push(into.remote_ends, *remote) : kNoPayload;
      out.payload = push(into.transfers, t);
      break;
    }
  }
  return out;
}

void drop_events(TraceData& data) {
  data.events.clear();
  data.args.clear();
  data.counters.clear();
  data.transfers.clear();
  data.value_pool.clear();
  data.values.clear();
  data.samples.clear();
  data.buckets.clear();
  data.remote_ends.clear();
  data.problems.clear();
}

}  // namespace dpscope::trace::detail
