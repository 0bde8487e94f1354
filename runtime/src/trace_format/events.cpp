// The event vocabulary's strings and the names built from data (trace_format/events.hpp).
#include "dpscope/trace_format/events.hpp"

#include <fmt/format.h>

#include "dpscope/base/format_bytes.hpp"

namespace dpscope {

namespace {

// The index of `s` in `names`, or 0 (each enum's kOther) when absent.
template <size_t N>
size_t index_of(const std::array<std::string_view, N>& names, std::string_view s) {
  if (s.empty()) return 0;
  for (size_t i = 1; i < N; ++i)
    if (names[i] == s) return i;
  return 0;
}

template <size_t N>
const char* name_at(const std::array<std::string_view, N>& names, size_t index) {
  return index < N ? names[index].data() : "";  // every entry is a literal, so NUL-terminated
}

}  // namespace

const char* to_string(EventType type) { return name_at(kEventTypeNames, static_cast<size_t>(type)); }

std::optional<EventType> event_type_from_string(std::string_view s) {
  for (size_t i = 0; i < kEventTypeNames.size(); ++i)
    if (kEventTypeNames[i] == s) return static_cast<EventType>(i);
  return std::nullopt;
}

const char* to_string(SpanCategory category) {
  return name_at(kSpanCategoryNames, static_cast<size_t>(category));
}
SpanCategory span_category_from_string(std::string_view s) {
  return static_cast<SpanCategory>(index_of(kSpanCategoryNames, s));
}
SpanCategory kernel_category(StreamKind stream) {
  switch (stream) {
    case StreamKind::kCompute: return SpanCategory::kCompute;
    case StreamKind::kComm: return SpanCategory::kComm;
    case StreamKind::kCopy: return SpanCategory::kCopy;
  }
  return SpanCategory::kCompute;
}

const char* to_string(EventName name) { return name_at(kEventNameStrings, static_cast<size_t>(name)); }
EventName event_name_from_string(std::string_view s) {
  return static_cast<EventName>(index_of(kEventNameStrings, s));
}

const char* to_string(ValuesWhen when) { return name_at(kValuesWhenNames, static_cast<size_t>(when)); }
ValuesWhen values_when_from_string(std::string_view s) {
  return static_cast<ValuesWhen>(index_of(kValuesWhenNames, s));
}

const char* to_string(BucketReason reason) {
  return name_at(kBucketReasonNames, static_cast<size_t>(reason));
}
BucketReason bucket_reason_from_string(std::string_view s) {
  return static_cast<BucketReason>(index_of(kBucketReasonNames, s));
}

std::string optimizer_step_span_name(std::string_view optimizer_type) {
  return fmt::format("optimizer.step {}", optimizer_type);
}
std::string reduce_span_name(std::string_view reduce_op) {
  return reduce_op.empty() ? std::string("reduce") : fmt::format("reduce {}", reduce_op);
}
std::string collective_span_name(std::string_view op, std::string_view algorithm, uint64_t bytes) {
  return fmt::format("{} {} {}", op, algorithm, format_bytes(bytes));
}
std::string collective_transfer_name(std::string_view algorithm, std::string_view algo_phase) {
  return fmt::format("{} {}", algorithm, algo_phase);
}

EventName instant_name(const InstantPayload& payload) {
  struct Visitor {
    EventName operator()(const GradReady&) const { return EventName::kGradReady; }
    EventName operator()(const BucketLaunched&) const { return EventName::kBucketLaunched; }
    EventName operator()(const BucketDone&) const { return EventName::kBucketDone; }
    EventName operator()(const WorkCompleted&) const { return EventName::kWorkCompleted; }
    EventName operator()(const CheckpointSaved&) const { return EventName::kCheckpointSaved; }
    EventName operator()(const RunError&) const { return EventName::kError; }
  };
  return std::visit(Visitor{}, payload);
}

}  // namespace dpscope
