// TraceSink: where devices and the layers above them send trace events.
//
// Core sits below the trace writer, so it talks to this interface only; the JSON Lines recorder
// (trace/recorder.hpp) implements it, and tests may implement it to observe events in memory.
// Every call is typed: names are the constants of trace_format/events.hpp (or built by its
// functions) and payloads are its plain structs, so only the recorder knows the JSON spelling.
// Every event is stamped with the emitting device's trace id, rank, training step and phase.
// Thread semantics: implementations must accept events from several host threads at once (rank
// threads, DataParallel replica threads); each call formats or stores one whole event.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "dpscope/core/timing.hpp"
#include "dpscope/trace_format/events.hpp"
#include "dpscope/trace_format/schema.hpp"

namespace dpscope {

class Device;
struct MemoryStats;

// One transfer between two devices (a copy, or one step of a collective).
struct TraceTransfer {
  int src = 0;  // device trace ids
  int dst = 0;
  uint64_t bytes = 0;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  StreamKind stream = StreamKind::kCopy;
  std::string_view name;    // to_string(EventName::kSendRecv), or collective_transfer_name()
  int64_t collective = -1;  // the group's sequence number, -1 for plain copies
  std::string_view algo;    // "ring", "tree", ... (empty for copies)
  int algo_step = -1;
  int chunk = -1;
  // Process ranks (mpi: one trace file per rank), -1 when unset: when set, that end's device id
  // (src or dst) is an id in rank R's own trace file (rank-R.jsonl), not in this one's.
  int src_rank = -1;
  int dst_rank = -1;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;

  // A kernel timed by KernelScope (category kernel_category(stream), args flops and bytes).
  virtual void kernel_span(const Device& device, StreamKind stream, std::string_view name, int64_t ts_ns,
                           int64_t dur_ns, KernelCost cost) = 0;
  // Any other span: a collective, a reduction, an optimizer step, a phase marker.
  virtual void span(const Device& device, const SpanEvent& span) = 0;
  // A moment; the payload's type names it (GradReady -> "grad_ready", ...).
  virtual void instant(const Device& device, int64_t ts_ns, const InstantPayload& payload) = 0;
  // The `loss` counter, once per step by the rank that computed it.
  virtual void loss_counter(const Device& device, int64_t ts_ns, double loss) = 0;
  // The `memory` counter: bytes by category and the capacity.
  virtual void memory_counter(const Device& device, int64_t ts_ns, const MemoryStats& memory) = 0;
  // A transfer stamped by `device` (the rank that issues it); returns its flow id.
  virtual uint64_t transfer(const Device& device, const TraceTransfer& transfer) = 0;
  // A host<->device or device<->device copy made by Tensor::to().
  virtual void copy_transfer(const Device& src, const Device& dst, int64_t ts_ns, int64_t dur_ns,
                             uint64_t bytes) = 0;
  // A few values of a tensor (e.g. a gradient before and after all-reduce) and its L2 norm.
  virtual void values(const Device& device, int64_t ts_ns, const ValuesEvent& values) = 0;
  // The dataset indices `device` holds in the current step, and the training loop's epoch they
  // belong to (its pass over the sampler, 0-based) when the loop knows it.
  virtual void samples(const Device& device, int64_t ts_ns, std::span<const int64_t> indices,
                       std::optional<int64_t> epoch) = 0;
  // A (new) bucket assignment.
  virtual void buckets(const Device& device, int64_t ts_ns, std::span<const TraceBucketInfo> buckets,
                       BucketReason reason) = 0;
  // Makes the events so far visible to readers: they are in the file when this returns.
  virtual void flush() = 0;
  // The same without waiting: readers see the events moments later (what training loops call once
  // per step, so that a traced step does not wait for the disk).
  virtual void flush_soon() { flush(); }
};

// A sink that drops every event: a device traced into it pays for timing its work (on a GPU, the
// events around each kernel) but nothing for writing a trace; for benchmarks and tests.
class NullTraceSink final : public TraceSink {
 public:
  void kernel_span(const Device&, StreamKind, std::string_view, int64_t, int64_t, KernelCost) override {}
  void span(const Device&, const SpanEvent&) override {}
  void instant(const Device&, int64_t, const InstantPayload&) override {}
  void loss_counter(const Device&, int64_t, double) override {}
  void memory_counter(const Device&, int64_t, const MemoryStats&) override {}
  uint64_t transfer(const Device&, const TraceTransfer&) override { return 0; }
  void copy_transfer(const Device&, const Device&, int64_t, int64_t, uint64_t) override {}
  void values(const Device&, int64_t, const ValuesEvent&) override {}
  void samples(const Device&, int64_t, std::span<const int64_t>, std::optional<int64_t>) override {}
  void buckets(const Device&, int64_t, std::span<const TraceBucketInfo>, BucketReason) override {}
  void flush() override {}
};

}  // namespace dpscope
