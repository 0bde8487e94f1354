// DataPath: where a collective's buffers live and how its chunks move, so the `sim` and `cuda`
// backends run one implementation of the schedules (sim_plan.cpp, sim_execute.cpp) and differ
// only here. SimBackend takes one; the sim backend's is host memory (memcpy and the CPU kernels),
// the cuda backend's (comm/cuda/cuda_data_path.cpp) is device memory (peer copies and the CUDA
// kernels on each device's comm stream).
//
// Ordering contract (what makes the results bit-identical for the same schedule): a rank issues
// the ops it receives in a step, then fence() returns only once they are done and visible to its
// peers; the step barrier follows. Every op calls prepare() before touching its buffers and
// fence() before joining its peers, so peers never read a buffer whose producer has not finished.
//
// Thread semantics: one DataPath object is shared by every rank of a world; every call comes from
// the rank thread that drives `device`, and implementations keep no per-call state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "dpscope/comm/types.hpp"
#include "dpscope/core/device.hpp"
#include "dpscope/core/tensor.hpp"

namespace dpscope::detail {

class DataPath {
 public:
  virtual ~DataPath() = default;

  // True when collective times are measured on the device rather than taken from the plan.
  virtual bool measured() const = 0;
  // `bytes` of working memory in `device`'s memory (a reduce's or reduce_scatter's copy of the
  // inputs), freed when the last owner lets go.
  virtual std::shared_ptr<std::byte> scratch(const Device& device, uint64_t bytes) = 0;
  // Before an op touches its buffers: the rank's comm stream waits for the work issued so far on
  // its compute stream (which produced the inputs), as a NCCL call waits on the current stream.
  virtual void prepare(const Device& device) = 0;
  // dst (in dst_device's memory) = src (in src_device's memory); issued by dst_device's rank.
  // The ranges may be the same buffer, never a partial overlap.
  virtual void copy(const Device& dst_device, std::byte* dst, const Device& src_device, const std::byte* src,
                    uint64_t bytes) = 0;
  // dst (in dst_device's memory) = op(dst, src) element-wise, src in src_device's memory (a peer's
  // buffer, or dst_device's own); issued by dst_device's rank.
  virtual void reduce(const Device& dst_device, std::byte* dst, const Device& src_device,
                      const std::byte* src, int64_t count, ReduceOp op, DType dtype) = 0;
  // data /= divisor (ReduceOp::kAvg; float32).
  virtual void divide(const Device& device, std::byte* data, int64_t count, int divisor) = 0;
  // Everything this rank issued is complete and visible to its peers.
  virtual void fence(const Device& device) = 0;
};

// The time an event recorded on `device` happened, on the trace clock: the event's own time on a
// simulated device; on a cuda device the host time the GPU reached it (cuda::event_time_ns, which
// waits for it), not the time the host issued it.
int64_t event_time(const Device& device, const Event& event);

// The sim backend's: buffers are host memory of simulated devices; fence() is a no-op (each op
// completes before its call returns).
std::shared_ptr<DataPath> host_data_path();

}  // namespace dpscope::detail
