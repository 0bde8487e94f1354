// Event filters: the predicates on typed trace events that lesson chapters trigger on and that
// answer expressions aggregate over (docs/lessons.md, "Triggers" and "Answers").
//
// A filter is a conjunction of `key = value` tests on trace::Event fields; a key left out matches
// everything. Lesson files write one as a TOML inline table (`{ type = "transfer", rank = 0 }`),
// answer expressions as `key=value, ...` inside an aggregate (`count(type=transfer, rank=0)`);
// both go through set_filter_key(), so both accept the same keys and values. Used by the lesson
// engine (lesson/report.hpp) and the visualizer's lesson mode.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::lesson {

// The keys a filter understands, in the order docs/lessons.md lists them.
inline constexpr std::string_view kFilterKeys[] = {"type",   "name", "category",  "rank",  "step", "phase",
                                                   "stream", "algo", "algo_step", "chunk", "coll", "param",
                                                   "bucket", "when", "nth",       "at"};

// `at=`: where an event stands at a moment (an expression's EvalContext::now_ns), as the viewer's
// replay model draws it: an event has happened once its start is at or before the moment.
enum class Moment : uint8_t {
  kStarted,  // ts <= now
  kDone,     // ended: ts + dur <= now (an instant or counter: ts <= now)
  kRunning,  // ts <= now < ts + dur (spans and transfers only)
  kPending,  // ts > now
};

struct EventFilter {
  std::optional<trace::EventType> type;
  // `name`: a fixed name (EventName, matched by its enum) or any other name, matched as written;
  // a trailing '*' matches every name that starts with what precedes it ("all_reduce*").
  std::optional<std::string> name;
  trace::EventName known_name = trace::EventName::kOther;
  std::optional<trace::SpanCategory> category;  // a category this version knows
  std::optional<int64_t> rank;
  std::optional<int64_t> step;
  std::optional<Phase> phase;
  std::optional<StreamKind> stream;
  std::optional<std::string> algo;  // transfers: "ring", "tree", "naive"
  std::optional<int64_t> algo_step;
  std::optional<int64_t> chunk;
  std::optional<int64_t> coll;
  std::optional<int64_t> param;           // grad_ready instants and values events (their `param`)
  std::optional<int64_t> bucket;          // bucket_launched / bucket_done instants
  std::optional<trace::ValuesWhen> when;  // values events: "before_reduce", ...
  // Keep only the n-th match (1-based, in time order; -1 is the last, -2 the one before); 0 keeps
  // every match. Triggers default to 1.
  int64_t nth = 0;
  std::optional<Moment> at;  // only in expressions evaluated at a chapter's moment
  std::string text;          // the filter as written, for messages

  bool matches(const trace::TraceData& data, const trace::Event& event) const;
};

// A key's value as a lesson file or an expression wrote it.
using FilterValue = std::variant<int64_t, std::string>;

// Sets `key` of `filter` to `value`. Returns "" on success, else the reason in words ("unknown
// key 'rnk' (expected one of: type, name, ...)", "phase must be one of: none, data, ...; got
// 'fwd'"), for the caller to prefix with where the key was written.
std::string set_filter_key(EventFilter& filter, std::string_view key, const FilterValue& value);

// The events of `data` that `filter` matches, in time order (start time, then rank, then file
// line), restricted to the n-th one when filter.nth > 0.
// With `at` set, `now_ns` (an absolute trace time) keeps the events in that relation to it; a
// filter with `at` and no `now_ns` matches nothing.
std::vector<const trace::Event*> matching_events(const trace::TraceData& data, const EventFilter& filter,
                                                 std::optional<int64_t> now_ns = std::nullopt);

}  // namespace dpscope::lesson
