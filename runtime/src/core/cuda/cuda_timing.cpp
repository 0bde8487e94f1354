// The cuda device's streams, events and measured clocks (cuda_device.hpp), and the queue of traced
// kernel spans it emits once their work has completed.
//
// Clocks are host nanoseconds since the trace origin (wall_ns_since_origin, the cpu's clock). A
// stream's work ends at a time the host learns only by waiting, so clock_ns() reads the host clock
// now and record() stamps an Event with the host time it was issued; the measured time of an event
// is anchor_host_ns_ + cudaEventElapsedTime(anchor_, event). `advance` and `wait_until` are the
// timing model's calls: a measured device has no model, so advance() returns now - dur (the work
// has just been done) and wait_until() does nothing (the GPU orders work by events, not by times).
//
// Traced kernels (KernelScope) are timed by CUPTI's activity records when the timer is available
// (cupti_timer.hpp: the GPU's own timestamps, already on the host's steady clock), else by a pair
// of events around each kernel. Either way spans are queued and emitted in issue order once known.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "cuda_check.hpp"
#include "cuda_device.hpp"
#include "dpscope/core/cpu_device.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/core/device.hpp"
#include "dpscope/core/trace_sink.hpp"

namespace dpscope::cuda::detail {

namespace {
// Spans queued before the oldest is waited for: the host may run this far ahead of the GPU before
// tracing adds a wait (a wait on a kernel that the GPU has long finished, in practice).
constexpr size_t kMaxPendingSpans = 4096;
// Spans queued before the completed ones are emitted: asking the driver about every span as it is
// queued would cost more host time than the kernels it times take to launch (tracing may cost
// 5 % of a step: docs/gpu.md), so completed spans go out in batches and at every synchronize().
constexpr size_t kEmitBatch = 256;
// Phase spans of unsampled steps (sampled tracing) queued before the completed ones are emitted.
constexpr size_t kPhaseSpansHeld = 10;
// How long a CUPTI span's records may take to be delivered once its work has completed.
constexpr int64_t kRecordWaitNs = 500'000'000;
// The anchor is moved forward after a synchronize() once it is this old: cudaEventElapsedTime is
// float milliseconds, exact to ~0.1 us over a second but to ~10 us over minutes.
constexpr int64_t kAnchorRefreshNs = 1'000'000'000;

int64_t ms_to_ns(float ms) { return static_cast<int64_t>(std::llround(static_cast<double>(ms) * 1e6)); }
}  // namespace

int64_t CudaDevice::clock_ns(StreamKind /*stream*/) const { return wall_ns_since_origin(); }

int64_t CudaDevice::advance(StreamKind /*stream*/, int64_t dur_ns) { return wall_ns_since_origin() - dur_ns; }

void CudaDevice::wait_until(StreamKind /*stream*/, int64_t /*ts_ns*/) {}

Event CudaDevice::record(StreamKind stream) {
  Event event{.ts_ns = wall_ns_since_origin(), .stream = stream, .native = gpu_->events->acquire(where_)};
  if (const cudaError_t status = cudaEventRecord(native_event(event), this->stream(stream));
      status != cudaSuccess)
    check(status, fmt::format("cudaEventRecord ({} stream)", to_string(stream)), where_);
  return event;
}

void CudaDevice::wait(StreamKind stream, const Event& event) {
  // cpu and sim events carry no native event: the host issued their work already.
  cudaEvent_t native = native_event(event);
  if (native == nullptr) return;
  if (const cudaError_t status = cudaStreamWaitEvent(this->stream(stream), native, 0); status != cudaSuccess)
    check(status, fmt::format("cudaStreamWaitEvent ({} stream)", to_string(stream)), where_);
}

int64_t CudaDevice::elapsed_ns(const Event& start, const Event& end) const {
  cudaEvent_t a = native_event(start);
  cudaEvent_t b = native_event(end);
  if (a == nullptr || b == nullptr) return end.ts_ns - start.ts_ns;  // host-stamped events
  check(cudaEventSynchronize(b), "cudaEventSynchronize", where_);
  float ms = 0.0f;
  // Both events must belong to one GPU; the driver says so when they do not.
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime", where_);
  return ms_to_ns(ms);
}

int64_t CudaDevice::event_time_ns(const Event& event) const {
  DPS_CHECK(native_event(event) != nullptr, ErrorKind::kInvalidArgument,
            "event_time_ns on {}: the event was not recorded on a cuda stream", name());
  check(cudaEventSynchronize(native_event(event)), "cudaEventSynchronize", where_);  // outside the lock
  std::lock_guard lock(anchor_mutex_);
  return anchor_host_ns_ + elapsed_ns(anchor_, event);
}

int64_t CudaDevice::synchronize() {
  DeviceGuard guard(gpu_->index, where_);
  // This logical device's streams only: other logical devices share the physical GPU and keep going.
  for (StreamKind kind : {StreamKind::kCompute, StreamKind::kComm, StreamKind::kCopy})
    check(cudaStreamSynchronize(stream(kind)),
          fmt::format("cudaStreamSynchronize ({} stream)", to_string(kind)), where_);
  // Events: every span can be read now. CUPTI: the spans whose records have come; the rest follow
  // (waiting for records here would put the collector's delay into every step).
  emit_spans(/*wait_all=*/cupti_ == nullptr);
  refresh_anchor();
  return wall_ns_since_origin();
}

void CudaDevice::refresh_anchor() {
  std::lock_guard lock(anchor_mutex_);
  if (wall_ns_since_origin() - anchor_host_ns_ < kAnchorRefreshNs) return;
  // Chained from the old anchor (not read off the host clock): a measured trace keeps one GPU
  // timeline, with each link measured over a short interval.
  const Event next = record(StreamKind::kCompute);
  const int64_t next_host_ns = anchor_host_ns_ + elapsed_ns(anchor_, next);
  anchor_ = next;
  anchor_host_ns_ = next_host_ns;
}

// A traced kernel's begin under the CUPTI timer: the span id its thread pushed.
class CuptiSpanMark final : public NativeEvent {
 public:
  explicit CuptiSpanMark(uint64_t span_id) : id(span_id) {}
  const uint64_t id;
};

namespace {
const CuptiSpanMark* cupti_mark(const Event& event) {
  return dynamic_cast<const CuptiSpanMark*>(event.native.get());
}
}  // namespace

ActivityTimer* CudaDevice::cupti_timer() {
  if (!timer_chosen_) {
    timer_chosen_ = true;
    // A sampled trace's phase spans, queued with events on the steps before: out before CUPTI's
    // spans, which are emitted in another way.
    if (!pending_.empty()) emit_spans(/*wait_all=*/true);
    cupti_ = chosen_kernel_timer() == KernelTimer::kCupti ? ActivityTimer::get() : nullptr;
    if (cupti_ != nullptr) cupti_->attach();
  }
  return cupti_;
}

Event CudaDevice::timer_begin(StreamKind stream) {
  // Tracing off, or a step whose kernels are not sampled: no event, no clock read (KernelScope then
  // costs a pointer test and this call).
  if (context_.tracer == nullptr || !context_.kernels) return Event{.stream = stream};
  if (ActivityTimer* cupti = cupti_timer())
    return Event{.stream = stream, .native = std::make_shared<CuptiSpanMark>(cupti->begin_span())};
  // Events: while the stream's last traced kernel has not finished, the GPU is busy and this kernel
  // will start the moment it ends: that end event is this kernel's begin. Each event recorded
  // between two kernels costs the GPU a gap, and a GPU-bound step half as many of them is what
  // keeps tracing cheaper. Once the stream has run dry, a fresh event marks the start, so an idle
  // GPU waiting for the host never counts as kernel time.
  Event& last = last_end_[static_cast<size_t>(stream)];
  if (cudaEvent_t native = native_event(last);
      native != nullptr && cudaEventQuery(native) == cudaErrorNotReady)
    return last;
  return record(stream);
}

TimedSpan CudaDevice::timer_end(StreamKind stream, const Event& begin, KernelCost /*cost*/) {
  // The synchronous form, for direct callers: KernelScope queues cuda spans instead
  // (defer_kernel_span) so that a traced run does not wait for every kernel.
  if (const CuptiSpanMark* mark = cupti_mark(begin)) {
    cupti_->end_span();
    check(cudaStreamSynchronize(this->stream(stream)), "cudaStreamSynchronize", where_);
    std::optional<GpuInterval> interval = wait_for_records(mark->id);
    if (!interval) return {.start_ns = wall_ns_since_origin(), .dur_ns = 0};
    return {.start_ns = interval->start_ns, .dur_ns = interval->end_ns - interval->start_ns};
  }
  if (native_event(begin) == nullptr) return {.start_ns = begin.ts_ns, .dur_ns = 0};
  const Event end = record(stream);
  const int64_t start_ns = event_time_ns(begin);
  return {.start_ns = start_ns, .dur_ns = elapsed_ns(begin, end)};
}

void CudaDevice::defer_kernel_span(StreamKind stream, std::string_view name, const Event& begin,
                                   KernelCost cost) {
  const bool cupti = cupti_mark(begin) != nullptr;
  if (!cupti && native_event(begin) == nullptr) return;  // tracing was off when the kernel began
  PendingSpan span{.name = std::string(name),
                   .stream = stream,
                   .begin = begin,
                   .seq = next_seq_++,
                   .cost = cost,
                   .rank = context_.rank,
                   .step = context_.step,
                   .phase = context_.phase};
  if (cupti) {
    cupti_->end_span();
  } else {
    span.end = record(stream);
    last_end_[static_cast<size_t>(stream)] = span.end;
  }
  pending_.push_back(std::move(span));
  if (pending_.size() >= kMaxPendingSpans) {
    // The host ran far ahead: wait for the oldest half rather than let the queue grow.
    if (cupti) {
      drain_cupti_spans();
      return;
    }
    while (pending_.size() > kMaxPendingSpans / 2) {
      check(cudaEventSynchronize(native_event(pending_.front().end)), "cudaEventSynchronize", where_);
      emit(pending_.front());
      pending_.pop_front();
    }
  }
  if (next_seq_ % kEmitBatch == 0) emit_spans(/*wait_all=*/false);
}

void CudaDevice::defer_phase_span(Phase phase, const Event& begin, const Event& end) {
  DPS_ASSERT(cupti_ == nullptr, "a phase span is queued while CUPTI times kernels");
  if (native_event(begin) == nullptr || native_event(end) == nullptr) return;
  pending_.push_back(PendingSpan{.name = to_string(phase),
                                 .stream = StreamKind::kCompute,
                                 .begin = begin,
                                 .end = end,
                                 .seq = next_seq_++,
                                 .rank = context_.rank,
                                 .step = context_.step,
                                 .phase = phase,
                                 .phase_span = true});
  // Four spans a step, emitted at synchronize() or, where the loop never synchronizes (a DDP
  // rank), once two steps' worth wait (a followed trace lags a step or two).
  if (pending_.size() >= kPhaseSpansHeld) emit_completed_phase_spans();
}

void CudaDevice::emit_completed_phase_spans() {
  // Between sampled steps the queue holds phase spans only, all on the compute stream, whose
  // events complete in order: one completed end event vouches for every span before it. Two
  // queries a batch (the newest, else the middle one) instead of one a span.
  for (size_t probe : {pending_.size(), pending_.size() / 2}) {
    if (probe == 0) return;
    const cudaError_t status = cudaEventQuery(native_event(pending_[probe - 1].end));
    if (status == cudaErrorNotReady) continue;
    check(status, "cudaEventQuery", where_);
    for (size_t i = 0; i < probe; ++i) {
      emit(pending_.front());
      pending_.pop_front();
    }
    return;
  }
}

std::optional<GpuInterval> CudaDevice::wait_for_records(uint64_t id) {
  // The work has completed; its records come with the next buffers CUPTI hands over, or, if other
  // devices' unfinished work keeps a buffer back, with a forced flush once that has had time to end.
  const int64_t deadline_ns = wall_ns_since_origin() + kRecordWaitNs;
  while (!cupti_->peek(id) && wall_ns_since_origin() < deadline_ns) {
    cupti_->collect(/*forced=*/false);
    if (!cupti_->peek(id)) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (!cupti_->peek(id)) cupti_->collect(/*forced=*/true);
  return cupti_->take(id);
}

void CudaDevice::emit_ready_cupti_spans() {
  while (!pending_.empty()) {
    const PendingSpan& front = pending_.front();
    if (!cupti_->peek(cupti_mark(front.begin)->id)) {
      // No records yet: not delivered, or no GPU work at all. Kernels on one stream finish in order
      // and CUPTI delivers their records in that order, so once a later span of the same stream has
      // records, this one never will.
      const auto later = std::find_if(pending_.begin() + 1, pending_.end(), [&](const PendingSpan& p) {
        return p.stream == front.stream && cupti_->peek(cupti_mark(p.begin)->id);
      });
      if (later == pending_.end()) return;
    }
    PendingSpan span = std::move(pending_.front());
    pending_.pop_front();
    emit(span);
  }
}

void CudaDevice::drain_cupti_spans() {
  for (cudaStream_t s : streams_) check(cudaStreamSynchronize(s), "cudaStreamSynchronize", where_);
  // Every span's work has completed. Alone on the timer, its records are all in CUPTI's buffers:
  // a forced flush hands them over now (CUPTI would otherwise deliver a buffer only once it is
  // full, or at the collector's next round: up to milliseconds for each sampled step).
  if (cupti_->sole_user()) cupti_->collect(/*forced=*/true);
  // Otherwise wait for the records to be delivered, then take what came.
  const int64_t deadline_ns = wall_ns_since_origin() + kRecordWaitNs;
  for (;;) {
    emit_ready_cupti_spans();
    if (pending_.empty()) return;
    if (wall_ns_since_origin() >= deadline_ns) break;
    cupti_->collect(/*forced=*/false);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  cupti_->collect(/*forced=*/true);
  while (!pending_.empty()) {
    PendingSpan span = std::move(pending_.front());
    pending_.pop_front();
    emit(span);
  }
}

void CudaDevice::emit_spans(bool wait_all) {
  if (cupti_ != nullptr) {
    if (wait_all) {
      drain_cupti_spans();
    } else {
      emit_ready_cupti_spans();
    }
    return;
  }
  while (!pending_.empty()) {
    const cudaError_t status = wait_all ? cudaEventSynchronize(native_event(pending_.front().end))
                                        : cudaEventQuery(native_event(pending_.front().end));
    if (status == cudaErrorNotReady) return;  // in order: a later span waits behind it
    check(status, wait_all ? "cudaEventSynchronize" : "cudaEventQuery", where_);
    PendingSpan span = std::move(pending_.front());
    pending_.pop_front();
    emit(span);
  }
}

void CudaDevice::flush_trace() {
  emit_spans(/*wait_all=*/true);
  last_end_.fill(Event{});
  last_phase_end_ = Event{};
  if (cupti_ != nullptr) cupti_->detach();
  cupti_ = nullptr;
  timer_chosen_ = false;
}

// `span`'s work has completed. Events: its times are elapsed-time reads, with no wait (the duration
// from its own events: float milliseconds from an old anchor would round it). CUPTI: its records'
// interval; a span whose kernels CUPTI reported nothing for is placed, empty, where its stream's
// last span ended.
void CudaDevice::emit(const PendingSpan& span) {
  if (context_.tracer == nullptr) return;
  const size_t lane = static_cast<size_t>(span.stream);
  if (const CuptiSpanMark* mark = cupti_mark(span.begin)) {
    if (const std::optional<GpuInterval> interval = cupti_->take(mark->id)) {
      last_emitted_end_[lane] = interval->end_ns;
      emit_at(span, interval->start_ns, interval->end_ns - interval->start_ns);
    } else {
      ++untimed_spans_;
      emit_at(span, last_emitted_end_[lane], 0);
    }
    return;
  }
  float begin_ms = 0.0f;
  float dur_ms = 0.0f;
  float end_ms = 0.0f;
  int64_t anchor_host_ns = 0;
  // A phase span begins on the event the previous phase ended on: that end was read already.
  const bool begin_known = span.phase_span && span.begin.native == last_phase_end_.native;
  {
    std::lock_guard lock(anchor_mutex_);
    anchor_host_ns = anchor_host_ns_;
    if (!begin_known)
      check(cudaEventElapsedTime(&begin_ms, native_event(anchor_), native_event(span.begin)),
            "cudaEventElapsedTime", where_);
    // Both ends of a phase span are read from the anchor, so that consecutive phases meet exactly
    // (the rounding of float milliseconds would overlap them).
    if (span.phase_span)
      check(cudaEventElapsedTime(&end_ms, native_event(anchor_), native_event(span.end)),
            "cudaEventElapsedTime", where_);
  }
  if (span.phase_span) {
    const int64_t begin_ns = begin_known ? last_phase_end_.ts_ns : anchor_host_ns + ms_to_ns(begin_ms);
    // Never before the lane's last span (the anchor may have moved between two phases).
    const int64_t start_ns = std::max(begin_ns, last_emitted_end_[lane]);
    const int64_t end_ns = std::max(start_ns, anchor_host_ns + ms_to_ns(end_ms));
    last_emitted_end_[lane] = end_ns;
    last_phase_end_ = Event{.ts_ns = end_ns, .native = span.end.native};  // held: not recycled meanwhile
    emit_at(span, start_ns, end_ns - start_ns);
    return;
  }
  check(cudaEventElapsedTime(&dur_ms, native_event(span.begin), native_event(span.end)),
        "cudaEventElapsedTime", where_);
  const int64_t start_ns = anchor_host_ns + ms_to_ns(begin_ms);
  last_emitted_end_[lane] = start_ns + std::max<int64_t>(0, ms_to_ns(dur_ms));
  emit_at(span, start_ns, std::max<int64_t>(0, ms_to_ns(dur_ms)));
}

void CudaDevice::emit_at(const PendingSpan& span, int64_t start_ns, int64_t dur_ns) {
  TraceSink* tracer = context_.tracer;
  // The tracer stamps rank, step and phase from the context: the span carries those of its launch.
  const TraceContext saved = context_;
  context_.rank = span.rank;
  context_.step = span.step;
  context_.phase = span.phase;
  try {
    if (span.phase_span) {
      tracer->span(Device(shared_from_this()), {.stream = span.stream,
                                                .cat = SpanCategory::kPhase,
                                                .name = span.name,
                                                .ts_ns = start_ns,
                                                .dur_ns = dur_ns});
    } else {
      tracer->kernel_span(Device(shared_from_this()), span.stream, span.name, start_ns, dur_ns, span.cost);
    }
  } catch (...) {
    context_ = saved;
    throw;
  }
  context_ = saved;
}

void CudaDevice::begin_copy_trace() {
  copy_begin_ = Event{};
  copy_end_ = Event{};
  if (context_.tracer != nullptr && context_.kernels) copy_begin_ = record(StreamKind::kCopy);
}

void CudaDevice::end_copy_trace() {
  if (native_event(copy_begin_) != nullptr) copy_end_ = record(StreamKind::kCopy);
}

std::optional<TimedSpan> CudaDevice::last_copy_span() {
  std::lock_guard lock(copy_mutex_);
  if (native_event(copy_begin_) == nullptr || native_event(copy_end_) == nullptr) return std::nullopt;
  const int64_t start_ns = event_time_ns(copy_begin_);
  return TimedSpan{.start_ns = start_ns, .dur_ns = elapsed_ns(copy_begin_, copy_end_)};
}

}  // namespace dpscope::cuda::detail
