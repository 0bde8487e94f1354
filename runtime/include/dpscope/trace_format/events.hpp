// The trace contract's event vocabulary: every event type, span category, well-known event name,
// `values` tag, bucket reason and payload key the runtime writes, as constants and enums, and the
// typed payloads the runtime emits through TraceSink (core/trace_sink.hpp).
//
// Writers (the recorder, trace/recorder.cpp) turn the enums into the strings below; the reader
// (trace_tools/reader.hpp) turns the strings back into the enums at parse time, so the visualizer
// and lessons match `EventName::kGradReady`, never "grad_ready". docs/trace-format.md lists the
// same words in its "Vocabulary" table; tests/runtime/trace/vocabulary_test.cpp compares the two.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "dpscope/trace_format/schema.hpp"

namespace dpscope {

// ---- event types: the `type` field ----
enum class EventType : uint8_t { kSpan, kInstant, kCounter, kTransfer, kValues, kSamples, kBuckets };
inline constexpr std::array<std::string_view, 7> kEventTypeNames = {
    "span", "instant", "counter", "transfer", "values", "samples", "buckets"};
const char* to_string(EventType type);
std::optional<EventType> event_type_from_string(std::string_view s);

// ---- span categories: a span's `cat` ----
// kOther stands for a category this version does not know (readers keep the string).
enum class SpanCategory : uint8_t {
  kOther,
  kCompute,
  kCopy,
  kComm,
  kReduce,
  kCollective,
  kOptimizer,
  kPhase
};
inline constexpr std::array<std::string_view, 8> kSpanCategoryNames = {
    "", "compute", "copy", "comm", "reduce", "collective", "optimizer", "phase"};
const char* to_string(SpanCategory category);
SpanCategory span_category_from_string(std::string_view s);  // kOther when unknown
// The category of a kernel timed by KernelScope: "compute" on the compute stream, else the stream.
SpanCategory kernel_category(StreamKind stream);

// ---- event names with a fixed spelling ----
// Instants, counters, `values` subjects, and the spans/transfers whose name is not built from
// data. Names built from data (kernels "forward 0.Linear", collectives "all_reduce ring 4.00 KiB",
// "reduce sum", "optimizer.step SGD", transfers "ring reduce-scatter") resolve to kOther; the
// functions further down build them.
enum class EventName : uint8_t {
  kOther,
  // instants
  kGradReady,
  kBucketLaunched,
  kBucketDone,
  kWorkCompleted,
  kCheckpointSaved,
  kError,
  // counters
  kMemory,
  kLoss,
  // values subjects
  kGrad,
  kAllReduce,
  // spans and transfers
  kBarrier,
  kAvgScale,
  kSyncParams,
  kCopyH2D,
  kCopyD2H,
  kCopyD2D,
  kSendRecv,
};
inline constexpr std::array<std::string_view, 18> kEventNameStrings = {"",
                                                                       "grad_ready",
                                                                       "bucket_launched",
                                                                       "bucket_done",
                                                                       "work_completed",
                                                                       "checkpoint_saved",
                                                                       "error",
                                                                       "memory",
                                                                       "loss",
                                                                       "grad",
                                                                       "all_reduce",
                                                                       "barrier",
                                                                       "avg scale",
                                                                       "optimizer.sync_params",
                                                                       "copy H2D",
                                                                       "copy D2H",
                                                                       "copy D2D",
                                                                       "send/recv"};
const char* to_string(EventName name);
EventName event_name_from_string(std::string_view s);  // kOther when not a fixed name
inline constexpr EventName kInstantNames[] = {EventName::kGradReady,       EventName::kBucketLaunched,
                                              EventName::kBucketDone,      EventName::kWorkCompleted,
                                              EventName::kCheckpointSaved, EventName::kError};
inline constexpr EventName kCounterNames[] = {EventName::kMemory, EventName::kLoss};
inline constexpr EventName kValuesNames[] = {EventName::kGrad, EventName::kAllReduce};

// ---- `values.when` ----
enum class ValuesWhen : uint8_t { kOther, kLocal, kBeforeReduce, kAfterReduce, kAfterStep };
inline constexpr std::array<std::string_view, 5> kValuesWhenNames = {"", "local", "before_reduce",
                                                                     "after_reduce", "after_step"};
const char* to_string(ValuesWhen when);
ValuesWhen values_when_from_string(std::string_view s);

// ---- `buckets.reason` ----
enum class BucketReason : uint8_t { kOther, kInitial, kRebuilt };
inline constexpr std::array<std::string_view, 3> kBucketReasonNames = {"", "initial", "rebuilt"};
const char* to_string(BucketReason reason);
BucketReason bucket_reason_from_string(std::string_view s);

// ---- keys inside payloads ----
namespace trace_key {
inline constexpr std::string_view kParam = "param";    // grad_ready, values
inline constexpr std::string_view kBucket = "bucket";  // bucket_launched / bucket_done
inline constexpr std::string_view kBytes = "bytes";
inline constexpr std::string_view kParams = "params";
inline constexpr std::string_view kFlops = "flops";  // kernel spans
inline constexpr std::string_view kColl = "coll";    // collective spans, reduce spans, work_completed
inline constexpr std::string_view kGroup = "group";
inline constexpr std::string_view kSrcRank = "src_rank";
inline constexpr std::string_view kDivisor = "divisor";
inline constexpr std::string_view kStepsDone = "steps_done";  // checkpoint_saved
inline constexpr std::string_view kMessage = "message";       // error
inline constexpr std::string_view kError = "error";           // a collective span that failed
inline constexpr std::string_view kCapacity = "capacity";     // memory counter, besides the categories
inline constexpr std::string_view kLoss = "loss";             // loss counter
}  // namespace trace_key

// ---- names built from data ----
std::string optimizer_step_span_name(std::string_view optimizer_type);  // "optimizer.step SGD"
std::string reduce_span_name(std::string_view reduce_op);               // "reduce sum"; "reduce" for no op
std::string collective_span_name(std::string_view op, std::string_view algorithm,
                                 uint64_t bytes);  // "all_reduce ring 4.00 KiB"
std::string collective_transfer_name(std::string_view algorithm,
                                     std::string_view algo_phase);  // "ring reduce-scatter"

// ======================= typed payloads (what TraceSink takes) =======================

// Span args. Every alternative is written as the span's `args` object (NoArgs: no `args`).
struct NoArgs {};
struct KernelArgs {  // roofline cost of a kernel
  double flops = 0.0;
  double bytes = 0.0;
};
// The three phases of a hierarchical all-reduce as the analytic model timed them, offsets from the
// span's start in ns (args "phase_rs_*", "phase_net_*", "phase_ag_*", docs/trace-format.md): the
// reduce-scatter inside each node, the all-reduce of each GPU's share across the nodes on its rail,
// the all-gather inside the node. Pipelined per chunk, they may overlap.
struct CollectivePhases {
  int64_t rs_start_ns = 0;
  int64_t rs_dur_ns = 0;
  int64_t net_start_ns = 0;
  int64_t net_dur_ns = 0;
  int64_t ag_start_ns = 0;
  int64_t ag_dur_ns = 0;
  bool operator==(const CollectivePhases&) const = default;
};

struct CollectiveArgs {  // one collective on one rank
  int64_t coll = 0;      // the group's sequence number
  int group = 0;
  std::string_view op;    // "all_reduce"
  std::string_view algo;  // "ring"
  uint64_t bytes = 0;
  int64_t count = 0;  // elements (0 for a barrier)
  std::string_view dtype;
  std::string_view redop;  // "sum", ..., "none"
  int root = 0;
  int ranks = 0;
  int slices = 0;
  int steps = 0;
  // Empty, or the error the collective ended in (written as `args.error` only then): it never ran,
  // the span lasts from the rank's call to the moment the failure was found, and no chunk moved.
  std::string_view error;
  std::optional<CollectivePhases> phases;  // a hierarchical all-reduce across nodes only
};
struct ReduceArgs {  // a reduction of a received chunk into the local one
  int64_t coll = 0;
  uint64_t bytes = 0;
  int src_rank = 0;
};
struct AvgScaleArgs {  // the division by world size of ReduceOp::kAvg
  int64_t coll = 0;
  uint64_t bytes = 0;
  int divisor = 1;
};
using SpanArgs = std::variant<NoArgs, KernelArgs, CollectiveArgs, ReduceArgs, AvgScaleArgs>;

struct SpanEvent {
  StreamKind stream = StreamKind::kCompute;
  SpanCategory cat = SpanCategory::kCompute;
  std::string_view name;  // a fixed name (to_string(EventName)) or one built by the functions above
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  SpanArgs args;
};

// Instants: the payload's type decides the event name.
struct GradReady {  // "grad_ready": a parameter's gradient is final for this backward
  int param = 0;
};
struct BucketArgs {
  int bucket = 0;       // bucket id (0 is reduced first)
  uint64_t bytes = 0;   // bucket size
  uint64_t params = 0;  // parameters in it
};
struct BucketLaunched : BucketArgs {};  // "bucket_launched": a full DDP bucket's all-reduce starts
struct BucketDone : BucketArgs {};      // "bucket_done": its result is copied back into the gradients
struct WorkCompleted {                  // "work_completed": a collective finished on this rank
  int64_t coll = 0;
  std::string_view op;
  int group = 0;
};
struct CheckpointSaved {  // "checkpoint_saved"
  int64_t steps_done = 0;
};
// "error": this rank stopped with an error (the run failed); written once per failing rank, at the
// time the rank stopped, before the trace is closed, so a failed run still ends in a readable trace.
struct RunError {
  std::string_view message;  // the error's one line, as the command line prints it
};
using InstantPayload =
    std::variant<GradReady, BucketLaunched, BucketDone, WorkCompleted, CheckpointSaved, RunError>;
EventName instant_name(const InstantPayload& payload);

// `values`: a few elements of a tensor and its L2 norm.
struct ValuesEvent {
  EventName name = EventName::kGrad;  // kGrad or kAllReduce
  int param = -1;                     // -1: not a model parameter
  ValuesWhen when = ValuesWhen::kLocal;
  std::span<const float> values;  // elements 0, stride, 2 * stride, ... of the tensor
  double norm = 0.0;
  int64_t stride = 1;
};

}  // namespace dpscope
