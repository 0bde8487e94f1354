// Traced gradient values: values sampled across a gradient and its L2 norm as a `values` trace
// event, so lessons can show averaging with numbers. DataParallel (local / after reduce-add) and
// DDP (before / after all-reduce) use it. Costs one pointer test when no tracer is attached.
//
// On a GPU the numbers are snapshotted in stream order (kernels::snapshot_values) and the events
// written later, at emit(): reading them at once would make the host wait for the GPU in the
// middle of every traced step (a measured trace must not change the step it measures: docs/gpu.md).
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

#include "dpscope/core/trace_sink.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::detail {

// Elements sampled across the whole gradient (about every numel/32-th), so the viewer can show the
// largest-magnitude ones instead of whatever the first few are (often exact zeros after a ReLU).
inline constexpr size_t kTracedGradValues = 32;

// The stride that spreads kTracedGradValues samples over a gradient of `shape`: about numel / 32,
// and for a matrix prime to its row length, so that the samples fall in as many columns as they
// can. A stride that is a multiple of the row length (numel / 32 of a 1024 x 1024 weight is 32
// rows) samples one column only: the weights of one input unit, all exact zeros when that unit is
// a dead ReLU, though the gradient is not.
inline int64_t traced_values_stride(const Shape& shape) {
  const int64_t numel = shape_numel(shape);
  int64_t stride = std::max<int64_t>(1, numel / static_cast<int64_t>(kTracedGradValues));
  const int64_t row = shape.empty() ? numel : shape.back();
  if (row > 1 && row < numel)
    while (stride > 1 && std::gcd(stride, row) != 1) --stride;
  return stride;
}

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
    const int64_t stride = traced_values_stride(grad.shape());
    pending_.push_back({.device = device,
                        .param = param,
                        .when = when,
                        .ts_ns = device.clock_ns(StreamKind::kCompute),
                        .stride = stride,
                        .snapshot = kernels::snapshot_values(grad, kTracedGradValues, stride)});
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
                      .norm = p.snapshot.norm,
                      .stride = p.stride});
    }
    pending_.clear();
  }

 private:
  struct Pending {
    Device device;
    int param = -1;
    ValuesWhen when = ValuesWhen::kLocal;
    int64_t ts_ns = 0;
    int64_t stride = 1;
    kernels::ValuesSnapshot snapshot;
  };
  std::vector<Pending> pending_;
};

}  // namespace dpscope::detail
