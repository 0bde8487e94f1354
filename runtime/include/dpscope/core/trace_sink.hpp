// TraceSink: where devices and the layers above them send trace events.
//
// Core sits below the trace writer, so it talks to this interface only; the JSON Lines recorder
// (trace/recorder.hpp) implements it, and tests may implement it to observe events in memory.
// Every event is stamped with the emitting device's trace id, rank, training step and phase.
// Thread semantics: implementations must accept events from several host threads at once (rank
// threads, DataParallel replica threads); each call formats or stores one whole event.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "dpscope/core/timing.hpp"
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
  std::string_view name = "copy";
  int64_t collective = -1;  // the group's sequence number, -1 for plain copies
  std::string_view algo;    // "ring", "tree", ... (empty for copies)
  int algo_step = -1;
  int chunk = -1;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;

  // A kernel timed by KernelScope (category "kernel", args flops and bytes).
  virtual void kernel_span(const Device& device, StreamKind stream, std::string_view name, int64_t ts_ns,
                           int64_t dur_ns, KernelCost cost) = 0;
  // `args_json`: empty or a JSON object rendered by the caller.
  virtual void span(const Device& device, StreamKind stream, std::string_view name, std::string_view cat,
                    int64_t ts_ns, int64_t dur_ns, std::string_view args_json = {}) = 0;
  virtual void instant(const Device& device, std::string_view name, int64_t ts_ns,
                       std::string_view args_json = {}) = 0;
  virtual void counter(const Device& device, std::string_view name, int64_t ts_ns,
                       std::span<const std::pair<std::string_view, double>> values) = 0;
  virtual void memory_counter(const Device& device, int64_t ts_ns, const MemoryStats& memory) = 0;
  // A transfer stamped by `device` (the rank that issues it); returns its flow id.
  virtual uint64_t transfer(const Device& device, const TraceTransfer& transfer) = 0;
  // A host<->device or device<->device copy made by Tensor::to().
  virtual void copy_transfer(const Device& src, const Device& dst, int64_t ts_ns, int64_t dur_ns,
                             uint64_t bytes) = 0;
  // A few values of a tensor (e.g. a gradient before and after all-reduce) and its L2 norm.
  // `when` is a short tag: "local", "before_reduce", "after_reduce", "after_step".
  virtual void values(const Device& device, std::string_view name, int64_t ts_ns, int param,
                      std::string_view when, std::span<const float> values, double norm) = 0;
  // The dataset indices `device` holds in the current step.
  virtual void samples(const Device& device, int64_t ts_ns, std::span<const int64_t> indices) = 0;
  // A (new) bucket assignment: `reason` is "initial" or "rebuilt".
  virtual void buckets(const Device& device, int64_t ts_ns, std::span<const TraceBucketInfo> buckets,
                       std::string_view reason) = 0;
  // Makes the events so far visible to readers (called once per training step).
  virtual void flush() = 0;
};

}  // namespace dpscope
