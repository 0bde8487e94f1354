// Device handles: construction, parsing, names, and the trace context a device stamps on events.
#include "dpscope/core/device.hpp"

#include <charconv>

#include "dpscope/base/error.hpp"
#include "dpscope/core/cpu_device.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/core/sim_device.hpp"
#include "dpscope/core/trace_sink.hpp"

namespace dpscope {

std::string DeviceImpl::name() const {
  switch (kind()) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kSim: return fmt::format("sim:{}", index());
    case DeviceKind::kCuda: return fmt::format("cuda:{}", index());
  }
  return "?";
}

Device::Device() : Device(cpu()) {}

Device::Device(std::shared_ptr<DeviceImpl> impl) : impl_(std::move(impl)) {
  DPS_ASSERT(impl_ != nullptr, "Device needs an implementation");
}

Device Device::cpu() {
  // Shared by the whole process, so it carries no trace context (CpuDevice(shared = true)).
  static const std::shared_ptr<DeviceImpl> shared = std::make_shared<CpuDevice>(/*shared=*/true);
  return Device(shared);
}

Device Device::new_cpu() { return Device(std::make_shared<CpuDevice>(/*shared=*/false)); }

Device Device::sim(int index, const HardwarePreset& preset) {
  DPS_CHECK(index >= 0, ErrorKind::kInvalidArgument, "sim device index must be >= 0, got {}", index);
  return Device(std::make_shared<SimDevice>(index, preset));
}

Device Device::parse(const std::string& name, const HardwarePreset* preset) {
  if (name == "cpu") return cpu();
  if (name.rfind("sim:", 0) == 0) {
    int index = -1;
    const char* first = name.data() + 4;
    const char* last = name.data() + name.size();
    auto [ptr, ec] = std::from_chars(first, last, index);
    DPS_CHECK(ec == std::errc() && ptr == last && index >= 0, ErrorKind::kDevice,
              "invalid device '{}': expected cpu or sim:N with N >= 0", name);
    DPS_CHECK(preset != nullptr, ErrorKind::kDevice, "device '{}' needs a hardware preset", name);
    return sim(index, *preset);
  }
  if (name.rfind("cuda", 0) == 0) {
    // Logical GPUs share physical ones and split their memory, so they are made as a set.
    const std::string reason = cuda::unavailable_reason();
    throw Error(ErrorKind::kDevice,
                fmt::format("device '{}' cannot be made on its own: cuda devices are made together by "
                            "cuda::make_devices() (dpscope train --device cuda --devices N){}",
                            name, reason.empty() ? "" : fmt::format("; {}", reason)));
  }
  throw Error(ErrorKind::kDevice, fmt::format("invalid device '{}': expected cpu, sim:N or cuda:N", name));
}

void Device::attach_tracer(TraceSink* tracer, int trace_id) const {
  TraceContext* c = impl_->trace_context();
  if (c == nullptr) {
    // Detaching from a device that never had a tracer is harmless (the recorder's close does it).
    DPS_CHECK(tracer == nullptr, ErrorKind::kInvalidArgument,
              "cannot trace the process's shared {} device: give the run its own with Device::new_cpu()",
              name());
    return;
  }
  // Measured spans a cuda device still holds belong to the tracer they were issued under.
  if (kind() == DeviceKind::kCuda && c->tracer != tracer) cuda::flush_trace(*impl_);
  c->tracer = tracer;
  c->trace_id = trace_id;
}

// The shared cpu device has no trace context: its setters do nothing and its getters read the
// defaults (nothing on it is ever traced).
int Device::trace_id() const {
  const TraceContext* c = impl_->trace_context();
  return c == nullptr ? -1 : c->trace_id;
}
void Device::set_rank(int rank) const {
  if (TraceContext* c = impl_->trace_context()) c->rank = rank;
}
int Device::rank() const {
  const TraceContext* c = impl_->trace_context();
  return c == nullptr ? 0 : c->rank;
}
void Device::set_step(int64_t step) const {
  TraceContext* c = impl_->trace_context();
  if (c == nullptr) return;
  c->step = step;
  const bool kernels = step < 0 || c->kernels_every <= 1 || step % c->kernels_every == 0;
  // A measured device times the sampled step's last kernels before it stops timing any: its
  // timer (CUPTI) is detached until the next sampled step, so unsampled steps pay nothing for it.
  if (c->kernels && !kernels && kind() == DeviceKind::kCuda) cuda::flush_trace(*impl_);
  // An unsampled step's first phase starts where the previous step's last phase ended (its mark
  // is kept), so its phases tile the GPU's timeline; after a sampled step it needs a mark of its own.
  if (c->kernels) c->phase_begin_set = false;
  c->kernels = kernels;
}
void Device::set_trace_kernels_every(int64_t every) const {
  DPS_CHECK(every >= 1, ErrorKind::kInvalidArgument, "trace kernels every {} steps: must be at least 1",
            every);
  TraceContext* c = impl_->trace_context();
  if (c == nullptr) return;
  c->kernels_every = every;
  set_step(c->step);
}
int64_t Device::step() const {
  const TraceContext* c = impl_->trace_context();
  return c == nullptr ? -1 : c->step;
}
void Device::set_phase(Phase phase) const {
  TraceContext* c = impl_->trace_context();
  if (c == nullptr) return;
  if (c->tracer != nullptr && !c->kernels && phase != c->phase) trace_phase_change(*c, phase);
  c->phase = phase;
}

// An unsampled step's phases as spans, each from its start mark to its end mark on the compute
// stream (on a GPU, events: the span is where the stream's work of the phase ran). A phase starts
// on the mark the previous one ended on, so a step of four phases costs four marks.
void Device::trace_phase_change(TraceContext& c, Phase next) const {
  if (c.phase != Phase::kNone) {
    const Event end = impl_->record(StreamKind::kCompute);
    if (c.phase_begin_set) {
      if (kind() == DeviceKind::kCuda) {
        cuda::defer_phase_span(*impl_, c.phase, c.phase_begin, end);
      } else {
        c.tracer->span(*this, {.stream = StreamKind::kCompute,
                               .cat = SpanCategory::kPhase,
                               .name = to_string(c.phase),
                               .ts_ns = c.phase_begin.ts_ns,
                               .dur_ns = end.ts_ns - c.phase_begin.ts_ns});
      }
    }
    c.phase_begin = end;  // where the next phase of this step starts
    c.phase_begin_set = true;
  }
  if (next != Phase::kNone && !c.phase_begin_set) {
    c.phase_begin = impl_->record(StreamKind::kCompute);
    c.phase_begin_set = true;
  }
}
Phase Device::phase() const {
  const TraceContext* c = impl_->trace_context();
  return c == nullptr ? Phase::kNone : c->phase;
}

void Device::trace_memory() const {
  TraceSink* sink = tracer();
  if (sink == nullptr) return;
  const MemoryStats m = memory();
  sink->memory_counter(*this, clock_ns(StreamKind::kCompute), m);
}

}  // namespace dpscope
