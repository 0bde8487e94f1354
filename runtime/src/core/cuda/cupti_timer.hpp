// ActivityTimer: traced cuda kernels timed by CUPTI's activity records (private to core's cuda part).
//
// A CUDA event pair around every kernel puts two commands in the stream and costs the host two
// driver calls per kernel: 12-37 % of a small training step on an H100 (docs/gpu.md). CUPTI, the
// library profilers use, instead stamps every kernel, memcpy and memset with the GPU's own start and
// end times and hands the records over in buffers, so a traced step issues exactly the work of an
// untraced one. A traced KernelScope pushes an external correlation id (one per span) for its
// thread; CUPTI tags each driver call made under it, and the span's interval is the earliest start
// and the latest end of the work those calls launched. Timestamps are on this process's steady
// clock (CUPTI's timestamp callback), so they land on the trace origin without an offset.
//
// libcupti is loaded at run time (dlopen), so a build or machine without it still runs: get()
// returns nullptr and unavailable_reason() says why, and the cuda device falls back to events.
// Threads: every member is thread-safe; the id stack is per thread (CUPTI's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dpscope/core/cuda.hpp"

namespace dpscope::cuda::detail {

// Where a span's GPU work ran, in nanoseconds since the trace origin.
struct GpuInterval {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

class ActivityTimer {
 public:
  // The process's timer, loaded on first use; nullptr when CUPTI cannot be used here.
  static ActivityTimer* get();
  // Why get() is nullptr ("libcupti.so.13 not found: ..."), or "".
  static std::string unavailable_reason();

  // A tracer started or stopped using the timer: records are collected while any does.
  void attach();
  void detach();
  // Only one tracer uses the timer now: once its streams are idle, a forced collect() loses no
  // record anyone waits for.
  bool sole_user() const;

  // Opens a span on the calling thread and returns its id; work launched until end_span() is its.
  uint64_t begin_span();
  void end_span();

  // Records are parsed as CUPTI delivers them: a thread of the timer asks for the completed
  // buffers every few milliseconds. collect() asks now, on the calling thread; `forced` also takes
  // the buffers still being filled (their unfinished work's records are lost: only when the GPU is
  // idle).
  void collect(bool forced);
  // The interval of span `id` from the records delivered so far, or nothing yet.
  std::optional<GpuInterval> peek(uint64_t id) const;
  // Like peek(), and forgets the span (nothing when it launched no GPU work, or CUPTI dropped its
  // records: dropped_records() counts those).
  std::optional<GpuInterval> take(uint64_t id);
  uint64_t dropped_records() const;

  ActivityTimer(const ActivityTimer&) = delete;
  ActivityTimer& operator=(const ActivityTimer&) = delete;

  struct State;  // libcupti's entry points and the parsed records (cupti_timer.cpp)

 private:
  ActivityTimer() = default;
  State* state_ = nullptr;  // lives as long as the process (CUPTI may call back until exit)
};

// The timer that tracers attached now use (set_kernel_timer, else DPSCOPE_CUDA_TIMER, else CUPTI
// when available).
KernelTimer chosen_kernel_timer();

}  // namespace dpscope::cuda::detail
