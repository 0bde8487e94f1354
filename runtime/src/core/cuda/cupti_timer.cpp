// ActivityTimer (cupti_timer.hpp): libcupti loaded with dlopen, its activity buffers parsed into
// span intervals, and the choice between CUPTI and CUDA events.
#include "cupti_timer.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/core/cpu_device.hpp"

#if DPSCOPE_HAVE_CUPTI
#include <cupti_activity.h>
#include <dlfcn.h>
#endif

namespace dpscope::cuda {

namespace {
// 0: not chosen by the program (DPSCOPE_CUDA_TIMER, else CUPTI); else KernelTimer + 1.
std::atomic<int> g_chosen_timer{0};
}  // namespace

void set_kernel_timer(KernelTimer timer) { g_chosen_timer.store(static_cast<int>(timer) + 1); }

std::string kernel_timer_description() {
  if (detail::chosen_kernel_timer() == KernelTimer::kEvents) {
    return g_chosen_timer.load() != 0 ? "events (chosen by the program)"
                                      : "events (DPSCOPE_CUDA_TIMER=events)";
  }
  if (detail::ActivityTimer::get() != nullptr) return "cupti";
  return "events (" + detail::ActivityTimer::unavailable_reason() + ")";
}

}  // namespace dpscope::cuda

namespace dpscope::cuda::detail {

KernelTimer chosen_kernel_timer() {
  if (const int chosen = g_chosen_timer.load(); chosen != 0) return static_cast<KernelTimer>(chosen - 1);
  const char* env = std::getenv("DPSCOPE_CUDA_TIMER");
  return env != nullptr && std::string_view(env) == "events" ? KernelTimer::kEvents : KernelTimer::kCupti;
}

#if DPSCOPE_HAVE_CUPTI

namespace {

// Buffers CUPTI fills with records. Small, so that they fill (and are delivered) every few steps:
// CUPTI hands over a buffer only once every record in it is complete.
constexpr size_t kBufferBytes = size_t{64} << 10;
constexpr size_t kBufferAlignment = 8;
// How often the collector thread asks CUPTI for the completed buffers.
constexpr auto kCollectPeriod = std::chrono::milliseconds(2);
// A kernel record whose driver call's correlation record has not arrived is kept this long
// (records of one call may come in different buffers), then dropped as work launched outside every
// span (untraced devices, the host copies).
constexpr int64_t kOrphanLifetimeNs = 2'000'000'000;
constexpr CUpti_ExternalCorrelationKind kCorrelationKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

// The kinds whose records carry GPU work with a start, an end and a correlation id, and those that
// tag API calls with our span ids (each runtime or driver call's API record is preceded by one).
// Measured on an H100 (docs/gpu.md): runtime records alone miss cuBLAS's launches at batch 4096
// (driver calls), and API records enabled per call (cuptiActivityEnableRuntimeApi) came without
// correlation records, so both whole API kinds are on.
constexpr CUpti_ActivityKind kWorkKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                             CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
constexpr CUpti_ActivityKind kTagKinds[] = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                            CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

uint64_t CUPTIAPI steady_now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The libcupti entry points used, resolved by dlsym.
struct Api {
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop = nullptr;
};

}  // namespace

struct ActivityTimer::State {
  Api api;
  std::string failure;  // why the timer is unavailable, or ""

  std::mutex attach_mutex;
  int attached = 0;

  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> dropped{0};

  // Asks CUPTI for completed buffers every kCollectPeriod while attached, so that parsing records
  // never runs on a thread that launches kernels.
  std::thread collector;
  std::mutex collector_mutex;
  std::condition_variable collector_wake;
  bool collector_stop = false;

  std::mutex records_mutex;  // what the parsed records say; buffers are parsed as CUPTI delivers them
  struct Span {
    std::vector<uint32_t> correlations;
    bool has_work = false;
    GpuInterval interval;
  };
  std::unordered_map<uint64_t, Span> spans;        // span id -> its work so far
  std::unordered_map<uint32_t, uint64_t> span_of;  // correlation id -> span id
  struct Orphan {
    GpuInterval interval;
    int64_t seen_ns = 0;  // host time it arrived
  };
  std::unordered_map<uint32_t, Orphan> orphans;  // work whose correlation record is missing

  std::string error(CUptiResult result) const {
    const char* text = nullptr;
    if (api.result_string == nullptr || api.result_string(result, &text) != CUPTI_SUCCESS || text == nullptr)
      return fmt::format("CUPTI error {}", static_cast<int>(result));
    return text;
  }
  void check(CUptiResult result, std::string_view what) const {
    if (result != CUPTI_SUCCESS)
      throw Error(ErrorKind::kDevice, fmt::format("{} failed: {}", what, error(result)));
  }

  void add_work(uint32_t correlation, GpuInterval interval) {
    const auto owner = span_of.find(correlation);
    if (owner == span_of.end()) {
      orphans[correlation] = Orphan{.interval = interval, .seen_ns = wall_ns_since_origin()};
      return;
    }
    const auto span = spans.find(owner->second);
    if (span == spans.end()) return;  // taken already: a record of a span emitted as incomplete
    Span& s = span->second;
    if (!s.has_work) {
      s.interval = interval;
      s.has_work = true;
    } else {
      s.interval.start_ns = std::min(s.interval.start_ns, interval.start_ns);
      s.interval.end_ns = std::max(s.interval.end_ns, interval.end_ns);
    }
  }

  void tag(uint32_t correlation, uint64_t span_id) {
    if (!span_of.emplace(correlation, span_id).second) return;  // the runtime call and its driver call
    spans[span_id].correlations.push_back(correlation);
    if (const auto orphan = orphans.find(correlation); orphan != orphans.end()) {
      const GpuInterval interval = orphan->second.interval;
      orphans.erase(orphan);
      add_work(correlation, interval);
    }
  }

  template <typename Record>
  void add_work_record(const CUpti_Activity* record, int64_t origin_ns) {
    const auto* r = reinterpret_cast<const Record*>(record);
    add_work(r->correlationId, GpuInterval{.start_ns = static_cast<int64_t>(r->start) - origin_ns,
                                           .end_ns = static_cast<int64_t>(r->end) - origin_ns});
  }

  // Tags first, then work (a kernel's record may come before its tag).
  void parse(uint8_t* buffer, size_t valid_bytes) {
    const int64_t origin_ns = trace_origin_steady_ns();
    std::lock_guard lock(records_mutex);
    for (int pass = 0; pass < 2; ++pass) {
      CUpti_Activity* record = nullptr;
      while (api.next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
        if (pass == 0 && record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
          const auto* r = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
          if (r->externalKind == kCorrelationKind) tag(r->correlationId, r->externalId);
        } else if (pass == 1) {
          switch (record->kind) {
            case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
            case CUPTI_ACTIVITY_KIND_KERNEL:
              add_work_record<CUpti_ActivityKernel10>(record, origin_ns);
              break;
            case CUPTI_ACTIVITY_KIND_MEMCPY: add_work_record<CUpti_ActivityMemcpy6>(record, origin_ns); break;
            case CUPTI_ACTIVITY_KIND_MEMSET: add_work_record<CUpti_ActivityMemset4>(record, origin_ns); break;
            default: break;
          }
        }
      }
    }
    const int64_t now_ns = wall_ns_since_origin();
    for (auto it = orphans.begin(); it != orphans.end();) {
      it = now_ns - it->second.seen_ns > kOrphanLifetimeNs ? orphans.erase(it) : std::next(it);
    }
  }

  void collect_periodically() {
    std::unique_lock lock(collector_mutex);
    while (!collector_wake.wait_for(lock, kCollectPeriod, [&] { return collector_stop; })) {
      lock.unlock();
      api.flush_all(0);  // the completed buffers, through buffer_completed on this thread
      lock.lock();
    }
  }
};

namespace {

ActivityTimer::State* g_state = nullptr;  // for CUPTI's callbacks, which take no user pointer

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;  // no buffer: CUPTI drops records and counts them
  *max_records = 0;                               // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                               size_t valid_bytes) {
  ActivityTimer::State& s = *g_state;
  size_t dropped = 0;
  if (s.api.dropped(context, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) s.dropped += dropped;
  if (valid_bytes > 0) s.parse(buffer, valid_bytes);
  std::free(buffer);
}

// Loads libcupti and registers the callbacks; returns why it could not, or "".
std::string load(ActivityTimer::State& s) {
  void* lib = nullptr;
  std::string tried;
  for (const char* name : {"libcupti.so.13", "libcupti.so", DPSCOPE_CUPTI_LIBRARY}) {
    if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (const char* why = dlerror()) tried = why;
  }
  if (lib == nullptr) return fmt::format("libcupti could not be loaded: {}", tried);
  bool missing = false;
  auto resolve = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
    missing = missing || fn == nullptr;
  };
  resolve(s.api.result_string, "cuptiGetResultString");
  resolve(s.api.register_callbacks, "cuptiActivityRegisterCallbacks");
  resolve(s.api.register_timestamp, "cuptiActivityRegisterTimestampCallback");
  resolve(s.api.enable, "cuptiActivityEnable");
  resolve(s.api.disable, "cuptiActivityDisable");
  resolve(s.api.flush_all, "cuptiActivityFlushAll");
  resolve(s.api.next_record, "cuptiActivityGetNextRecord");
  resolve(s.api.dropped, "cuptiActivityGetNumDroppedRecords");
  resolve(s.api.push, "cuptiActivityPushExternalCorrelationId");
  resolve(s.api.pop, "cuptiActivityPopExternalCorrelationId");
  if (missing) return "libcupti lacks an activity API function dpscope uses (an older CUPTI)";
  // Before any kind is enabled, so that every record is on the steady clock.
  if (const CUptiResult r = s.api.register_timestamp(&steady_now_ns); r != CUPTI_SUCCESS)
    return "cuptiActivityRegisterTimestampCallback: " + s.error(r);
  if (const CUptiResult r = s.api.register_callbacks(&buffer_requested, &buffer_completed);
      r != CUPTI_SUCCESS)
    return "cuptiActivityRegisterCallbacks: " + s.error(r);
  return "";
}

}  // namespace

ActivityTimer* ActivityTimer::get() {
  static ActivityTimer* const timer = [] {
    auto* state = new ActivityTimer::State();  // never freed: CUPTI may call back until exit
    g_state = state;
    state->failure = load(*state);
    auto* t = new ActivityTimer();
    t->state_ = state;
    return t;
  }();
  return timer->state_->failure.empty() ? timer : nullptr;
}

std::string ActivityTimer::unavailable_reason() {
  if (get() != nullptr) return "";
  return g_state->failure;
}

void ActivityTimer::attach() {
  State& s = *state_;
  std::lock_guard lock(s.attach_mutex);
  if (s.attached++ > 0) return;
  for (CUpti_ActivityKind kind : kTagKinds) s.check(s.api.enable(kind), "cuptiActivityEnable");
  for (CUpti_ActivityKind kind : kWorkKinds) s.check(s.api.enable(kind), "cuptiActivityEnable");
  s.collector_stop = false;
  s.collector = std::thread([&s] { s.collect_periodically(); });
}

void ActivityTimer::detach() {
  State& s = *state_;
  std::lock_guard lock(s.attach_mutex);
  if (s.attached == 0 || --s.attached > 0) return;
  {
    std::lock_guard wake(s.collector_mutex);
    s.collector_stop = true;
  }
  s.collector_wake.notify_all();
  s.collector.join();
  for (CUpti_ActivityKind kind : kWorkKinds) s.api.disable(kind);
  for (CUpti_ActivityKind kind : kTagKinds) s.api.disable(kind);
  s.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // returns every buffer; nobody asks for these records
  std::lock_guard records(s.records_mutex);
  s.spans.clear();
  s.span_of.clear();
  s.orphans.clear();
}

bool ActivityTimer::sole_user() const {
  std::lock_guard lock(state_->attach_mutex);
  return state_->attached == 1;
}

uint64_t ActivityTimer::begin_span() {
  const uint64_t id = state_->next_id.fetch_add(1);
  state_->check(state_->api.push(kCorrelationKind, id), "cuptiActivityPushExternalCorrelationId");
  return id;
}

void ActivityTimer::end_span() {
  uint64_t id = 0;
  state_->check(state_->api.pop(kCorrelationKind, &id), "cuptiActivityPopExternalCorrelationId");
}

void ActivityTimer::collect(bool forced) {
  // Not under a lock of ours: CUPTI delivers the buffers through buffer_completed, on this thread.
  state_->check(state_->api.flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0),
                "cuptiActivityFlushAll");
}

std::optional<GpuInterval> ActivityTimer::peek(uint64_t id) const {
  State& s = *state_;
  std::lock_guard lock(s.records_mutex);
  const auto span = s.spans.find(id);
  if (span == s.spans.end() || !span->second.has_work) return std::nullopt;
  return span->second.interval;
}

std::optional<GpuInterval> ActivityTimer::take(uint64_t id) {
  State& s = *state_;
  std::lock_guard lock(s.records_mutex);
  const auto span = s.spans.find(id);
  if (span == s.spans.end()) return std::nullopt;
  for (uint32_t correlation : span->second.correlations) s.span_of.erase(correlation);
  std::optional<GpuInterval> interval;
  if (span->second.has_work) interval = span->second.interval;
  s.spans.erase(span);
  return interval;
}

uint64_t ActivityTimer::dropped_records() const { return state_->dropped.load(); }

#else  // !DPSCOPE_HAVE_CUPTI

struct ActivityTimer::State {};

ActivityTimer* ActivityTimer::get() { return nullptr; }
std::string ActivityTimer::unavailable_reason() {
  return "dpscope was built without CUPTI's headers (cupti_activity.h not found by configure)";
}
void ActivityTimer::attach() {}
void ActivityTimer::detach() {}
bool ActivityTimer::sole_user() const { return false; }
uint64_t ActivityTimer::begin_span() { return 0; }
void ActivityTimer::end_span() {}
void ActivityTimer::collect(bool /*forced*/) {}
std::optional<GpuInterval> ActivityTimer::peek(uint64_t /*id*/) const { return std::nullopt; }
std::optional<GpuInterval> ActivityTimer::take(uint64_t /*id*/) { return std::nullopt; }
uint64_t ActivityTimer::dropped_records() const { return 0; }

#endif

}  // namespace dpscope::cuda::detail
