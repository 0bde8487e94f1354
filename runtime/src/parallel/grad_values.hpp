// Traced gradient values: the first few values and the L2 norm of a gradient as a `values` trace
// event, so lessons can show averaging with numbers. DataParallel (local / after reduce-add) and
// DDP (before / after all-reduce) use it. Costs one pointer test when no tracer is attached.
//
// On a GPU the numbers are snapshotted in stream order (kernels::snapshot_values) and the events
// written later, at emit(): reading them at once would make the host wait for the GPU in the
// middle of every traced step (issue 10: a measured trace must not change the step it measures).
#pragma once

#include <vector>

#include "dpscope/core/trace_sink.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::detail {

inline constexpr size_t kTracedGradValues = 4;

class TracedGradValues {
 public:
  TracedGradValues() = default;
  TracedGradValues(const TracedGradValues&) = delete;
  TracedGradValues& operator=(const TracedGradValues&) = delete;
  // Events not emitted yet are dropped: their tracer may be gone (owners emit() first).
  ~TracedGradValues() = default;

  // Takes `grad`'s values now (a float32 tensor with data: a parameter's .grad or its bucket view);
  // written at once on cpu and sim devices, at the next emit() on a GPU.
  void take(const Device& device, int param, ValuesWhen when, const Tensor& grad) {
    if (device.tracer() == nullptr) return;
    pending_.push_back({.device = device,
                        .param = param,
                        .when = when,
                        .ts_ns = device.clock_ns(StreamKind::kCompute),
                        .snapshot = kernels::snapshot_values(grad, kTracedGradValues)});
    if (device.kind() != DeviceKind::kCuda) emit();
  }

  // Writes every pending event (on a GPU: waits for the snapshots, which a step's end has reached).
  void emit() {
    for (Pending& p : pending_) {
      TraceSink* tracer = p.device.tracer();
      if (tracer == nullptr) continue;  // detached since: nothing to write to
      p.snapshot.read();
      tracer->values(p.device, p.ts_ns,
                     {.name = EventName::kGrad,
                      .param = p.param,
                      .when = p.when,
                      .values = p.snapshot.values,
                      .norm = p.snapshot.norm});
    }
    pending_.clear();
  }

 private:
  struct Pending {
    Device device;
    int param = -1;
    ValuesWhen when = ValuesWhen::kLocal;
    int64_t ts_ns = 0;
    kernels::ValuesSnapshot snapshot;
  };
  std::vector<Pending> pending_;
};

}  // namespace dpscope::detail
