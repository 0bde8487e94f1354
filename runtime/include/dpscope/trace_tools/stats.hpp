// Time breakdown of a dpscope trace per device (and per device and training step): how much of the
// time was compute, communication, communication hidden behind compute, and idle.
// Used by `dpscope trace stats`, the visualizer's step-time plot and lessons on overlap: all of
// them classify events with busy_class() below, so they report the same numbers for one trace.
//
// Definitions (all lengths are of unions of intervals, so nested or overlapping work counts once):
//  * compute  = spans on the device's compute stream;
//  * comm     = spans and transfers on its comm or copy stream: data moving between devices (a
//               transfer counts for the device that issued it, the event's `dev`). DataParallel
//               has no comm stream: its scatter, gather and reduce-add copies are its communication;
//  * copy     = the part of comm on the copy stream (reported on its own as well);
//  * spans of category "phase" are markers of what the loop is doing, not work, and are left out;
//  * span     = from the device's first span/transfer start to its last end (any stream);
//  * busy     = compute ∪ comm;  exposed comm = comm \ compute;  idle = span − busy;
//  * overlap  = |comm ∩ compute| / |comm| · 100 (the share of communication hidden behind
//               computation, as in Holistic Trace Analysis); 0 when there is no comm.
// Cost: O(n log n) in the number of events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::trace {

// What an event's interval counts as, for every time breakdown of a trace (one definition).
enum class BusyClass : uint8_t {
  kNone,     // not an interval of work: instants, counters, values, ..., and "phase" marker spans
  kCompute,  // a span or transfer on the compute stream
  kComm,     // on the comm or copy stream
};
BusyClass busy_class(const Event& e);

struct DeviceStats {
  int32_t dev = -1;      // header device id
  int64_t begin_ns = 0;  // first start of a span or transfer
  int64_t end_ns = 0;    // last end
  int64_t span_ns = 0;   // end_ns - begin_ns
  int64_t busy_ns = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t copy_ns = 0;
  int64_t exposed_comm_ns = 0;
  int64_t idle_ns = 0;
  double overlap_pct = 0.0;
};

// The same breakdown restricted to the events of one training step on one device.
struct StepStats {
  int64_t step = 0;
  DeviceStats stats;
};

struct TraceStats {
  std::vector<DeviceStats> devices;  // header order; devices without spans or transfers are left out
  std::vector<StepStats> steps;      // by step, then device; events of step -1 are not in any step
};

// `per_step`: fill TraceStats::steps too (a second pass over the events).
TraceStats compute_stats(const TraceData& data, bool per_step = true);

// A table, one row per device ("sim:0", ...), times in ns/us/ms/s; with `per_step`, a second table
// with one row per (step, device).
std::string format_stats(const TraceStats& stats, const TraceData& data, bool per_step = false);

// "850 ns", "12.345 us", "1.234 ms", "2.500 s".
std::string format_duration(int64_t ns);

}  // namespace dpscope::trace
