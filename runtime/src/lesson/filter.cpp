// Event filters (lesson/filter.hpp): parsing `key = value` pairs into typed tests and matching
// them against a loaded trace.
#include "dpscope/lesson/filter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace dpscope::lesson {
namespace {

constexpr std::array kPhases = {Phase::kNone,     Phase::kData,      Phase::kForward,
                                Phase::kBackward, Phase::kOptimizer, Phase::kCheckpoint};
constexpr std::array kStreams = {StreamKind::kCompute, StreamKind::kComm, StreamKind::kCopy};

// "a, b, c" of the serialized names of `values`.
template <typename Range>
std::string joined_names(const Range& values) {
  std::vector<std::string> names;
  for (const auto& v : values) names.emplace_back(to_string(v));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string joined_strings(const auto& strings, size_t skip_first) {
  std::vector<std::string_view> names(std::begin(strings) + static_cast<std::ptrdiff_t>(skip_first),
                                      std::end(strings));
  return fmt::format("{}", fmt::join(names, ", "));
}

// Looks `text` up among the serialized names of `values`.
template <typename T, size_t N>
std::optional<T> enum_from_name(const std::array<T, N>& values, std::string_view text) {
  for (T v : values)
    if (text == to_string(v)) return v;
  return std::nullopt;
}

bool name_matches(const trace::TraceData& data, const trace::Event& event, const EventFilter& filter) {
  if (filter.known_name != trace::EventName::kOther) return event.known == filter.known_name;
  const std::string& pattern = *filter.name;
  const std::string_view name = data.str(event.name);
  if (!pattern.empty() && pattern.back() == '*')
    return name.starts_with(std::string_view(pattern).substr(0, pattern.size() - 1));
  return name == pattern;
}

bool arg_equals(const trace::TraceData& data, const trace::Event& event, std::string_view key, int64_t want) {
  const std::optional<double> value = data.arg(event, key);
  return value && *value == static_cast<double>(want);
}

}  // namespace

bool EventFilter::matches(const trace::TraceData& data, const trace::Event& event) const {
  using trace::EventType;
  if (type && event.type != *type) return false;
  if (name && !name_matches(data, event, *this)) return false;
  if (category && (event.type != EventType::kSpan || event.category != *category)) return false;
  if (rank && event.rank != *rank) return false;
  if (step && event.step != *step) return false;
  if (phase && event.phase != *phase) return false;
  if (stream &&
      ((event.type != EventType::kSpan && event.type != EventType::kTransfer) || event.stream != *stream))
    return false;
  const trace::Transfer& transfer = data.transfer(event);  // defaults for any other event
  if (algo && data.str(transfer.algo) != *algo) return false;
  if (algo_step && transfer.algo_step != *algo_step) return false;
  if (chunk && transfer.chunk != *chunk) return false;
  if (coll) {
    // Transfers carry `coll` as a field; collective spans, reduce spans and work_completed as an arg.
    const bool in_field = event.type == EventType::kTransfer && transfer.coll == *coll;
    if (!in_field && !arg_equals(data, event, trace_key::kColl, *coll)) return false;
  }
  if (param) {
    if (event.type == EventType::kValues) {
      if (event.payload < 0 || data.values[static_cast<size_t>(event.payload)].param != *param) return false;
    } else if (!arg_equals(data, event, trace_key::kParam, *param)) {
      return false;
    }
  }
  if (bucket && !arg_equals(data, event, trace_key::kBucket, *bucket)) return false;
  if (when) {
    if (event.type != EventType::kValues || event.payload < 0 ||
        data.values[static_cast<size_t>(event.payload)].when_kind != *when)
      return false;
  }
  return true;
}

std::string set_filter_key(EventFilter& filter, std::string_view key, const FilterValue& value) {
  const auto* text = std::get_if<std::string>(&value);
  const auto* number = std::get_if<int64_t>(&value);
  auto need_text = [&](std::string_view what) {
    return fmt::format("{} must be {}, got the number {}", key, what, *number);
  };
  auto need_integer = [&] { return fmt::format("{} must be an integer, got '{}'", key, *text); };

  if (key == "type") {
    if (!text) return need_text("an event type");
    const std::optional<trace::EventType> type = event_type_from_string(*text);
    if (!type)
      return fmt::format("type must be one of: {}; got '{}'", joined_strings(kEventTypeNames, 0), *text);
    filter.type = type;
  } else if (key == "name") {
    if (!text) return need_text("an event name");
    if (text->empty()) return "name must not be empty";
    filter.name = *text;
    filter.known_name = event_name_from_string(*text);
  } else if (key == "category") {
    if (!text) return need_text("a span category");
    const trace::SpanCategory category = span_category_from_string(*text);
    if (category == trace::SpanCategory::kOther)
      return fmt::format("category must be one of: {}; got '{}'", joined_strings(kSpanCategoryNames, 1),
                         *text);
    filter.category = category;
  } else if (key == "phase") {
    if (!text) return need_text("a phase");
    filter.phase = enum_from_name(kPhases, *text);
    if (!filter.phase) return fmt::format("phase must be one of: {}; got '{}'", joined_names(kPhases), *text);
  } else if (key == "stream") {
    if (!text) return need_text("a stream");
    filter.stream = enum_from_name(kStreams, *text);
    if (!filter.stream)
      return fmt::format("stream must be one of: {}; got '{}'", joined_names(kStreams), *text);
  } else if (key == "algo") {
    if (!text) return need_text("an algorithm name");
    filter.algo = *text;
  } else if (key == "when") {
    if (!text) return need_text("a values tag");
    const trace::ValuesWhen when = values_when_from_string(*text);
    if (when == trace::ValuesWhen::kOther)
      return fmt::format("when must be one of: {}; got '{}'", joined_strings(kValuesWhenNames, 1), *text);
    filter.when = when;
  } else if (key == "rank" || key == "step" || key == "algo_step" || key == "chunk" || key == "coll" ||
             key == "param" || key == "bucket" || key == "nth") {
    if (!number) return need_integer();
    if (key == "rank") filter.rank = *number;
    if (key == "step") filter.step = *number;
    if (key == "algo_step") filter.algo_step = *number;
    if (key == "chunk") filter.chunk = *number;
    if (key == "coll") filter.coll = *number;
    if (key == "param") filter.param = *number;
    if (key == "bucket") filter.bucket = *number;
    if (key == "nth") {
      if (*number == 0)
        return "nth counts matches from 1 (the first), or from -1 (the last) backwards; got 0";
      filter.nth = *number;
    }
  } else if (key == "at") {
    if (!text) return need_text("started, done, running or pending");
    if (*text == "started")
      filter.at = Moment::kStarted;
    else if (*text == "done")
      filter.at = Moment::kDone;
    else if (*text == "running")
      filter.at = Moment::kRunning;
    else if (*text == "pending")
      filter.at = Moment::kPending;
    else
      return fmt::format("at must be one of: started, done, running, pending; got '{}'", *text);
  } else {
    return fmt::format("unknown key '{}' (expected one of: {})", key, joined_strings(kFilterKeys, 0));
  }
  return "";
}

namespace {

bool at_moment(const trace::Event& e, Moment at, int64_t now_ns) {
  switch (at) {
    case Moment::kStarted: return e.ts_ns <= now_ns;
    case Moment::kDone: return e.end_ns() <= now_ns;
    case Moment::kRunning:
      return (e.type == trace::EventType::kSpan || e.type == trace::EventType::kTransfer) &&
             e.ts_ns <= now_ns && now_ns < e.end_ns();
    case Moment::kPending: return e.ts_ns > now_ns;
  }
  return false;
}

}  // namespace

std::vector<const trace::Event*> matching_events(const trace::TraceData& data, const EventFilter& filter,
                                                 std::optional<int64_t> now_ns) {
  std::vector<const trace::Event*> found;
  if (filter.at && !now_ns) return found;
  for (const trace::Event& e : data.events)
    if (filter.matches(data, e) && (!filter.at || at_moment(e, *filter.at, *now_ns))) found.push_back(&e);
  std::stable_sort(found.begin(), found.end(), [](const trace::Event* a, const trace::Event* b) {
    if (a->ts_ns != b->ts_ns) return a->ts_ns < b->ts_ns;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->line < b->line;
  });
  if (filter.nth > 0) {
    if (static_cast<size_t>(filter.nth) > found.size()) return {};
    return {found[static_cast<size_t>(filter.nth - 1)]};
  }
  if (filter.nth < 0) {  // from the end: -1 is the last match (the same for any number of ranks)
    if (static_cast<size_t>(-filter.nth) > found.size()) return {};
    return {found[found.size() - static_cast<size_t>(-filter.nth)]};
  }
  return found;
}

}  // namespace dpscope::lesson
