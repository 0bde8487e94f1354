// Data movement of the sim and cuda backends: each rank executes the ops of each step in which it
// receives (copy or reduce from a peer's buffer into its own) through the backend's DataPath,
// fences, then waits at the step barrier. Every element sees its operations in the order the
// schedule fixes, so results do not depend on which thread runs first — nor on the data path.
// Also the host DataPath of the sim backend.
#include <cstring>

#include "dpscope/core/cuda.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "sim_backend.hpp"

namespace dpscope::detail {

kernels::Reduction reduction_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return kernels::Reduction::kSum;
    case ReduceOp::kProduct: return kernels::Reduction::kProduct;
    case ReduceOp::kMin: return kernels::Reduction::kMin;
    case ReduceOp::kMax: return kernels::Reduction::kMax;
  }
  return kernels::Reduction::kSum;
}

namespace {

// Buffers of simulated devices are host memory: every op completes before its call returns.
class HostDataPath final : public DataPath {
 public:
  bool measured() const override { return false; }
  std::shared_ptr<std::byte> scratch(const Device&, uint64_t bytes) override {
    return std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
  }
  void prepare(const Device&) override {}
  void copy(const Device&, std::byte* dst, const Device&, const std::byte* src, uint64_t bytes) override {
    if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
  }
  void reduce(const Device&, std::byte* dst, const Device&, const std::byte* src, int64_t count, ReduceOp op,
              DType dtype) override {
    kernels::reduce_into(DeviceKind::kSim, dst, src, count, reduction_of(op), dtype);
  }
  void divide(const Device&, std::byte* data, int64_t count, int divisor) override {
    kernels::divide(DeviceKind::kSim, data, count, static_cast<float>(divisor));
  }
  void fence(const Device&) override {}
};

}  // namespace

std::shared_ptr<DataPath> host_data_path() {
  static const std::shared_ptr<DataPath> path = std::make_shared<HostDataPath>();  // stateless
  return path;
}

std::vector<int64_t> execute_steps(const Plan& plan, Rendezvous& rendezvous, int rank, Milliseconds timeout,
                                   DataPath& path) {
  const int n = static_cast<int>(plan.buffers.size());
  const size_t elem = element_size(plan.dtype);
  const Schedule& s = plan.schedule;
  const Device& self = plan.devices[rank];
  std::vector<int64_t> step_end_ns;
  std::optional<Event> begin;
  if (path.measured()) begin = self.record(StreamKind::kComm);
  std::optional<int64_t> begin_ns;  // when the GPU reached `begin` (asked once its work is fenced)
  auto begin_time = [&] {
    if (!begin_ns) begin_ns = event_time(self, *begin);
    return *begin_ns;
  };
  for (int step = 0; step < s.steps; ++step) {
    const int32_t first = plan.exec_begin[static_cast<size_t>(step) * n + rank];
    const int32_t last = plan.exec_begin[static_cast<size_t>(step) * n + rank + 1];
    for (int32_t i = first; i < last; ++i) {
      const CommOp& op = s.ops[plan.exec_order[i]];
      const int64_t count = op.to.count_elems;
      if (count == 0) continue;
      const uint8_t source = plan.op_sources.empty() ? 0 : plan.op_sources[plan.exec_order[i]];
      std::byte* dst = plan.buffers[op.dst].at(op.to.offset_elems, elem);
      const RankBuffer& from = source & kFromSrcInput ? plan.inputs[op.src] : plan.buffers[op.src];
      const std::byte* src = from.at(op.from.offset_elems, elem);
      // Out of place, the first reduction into a chunk combines the rank's own input with the
      // peer's chunk (the host path's copy costs no simulated time: the plan's times are the
      // schedule's; on a measured device it is one local copy NCCL fuses into the reduction).
      if (source & kSeedDstInput)
        path.copy(self, dst, self, plan.inputs[op.dst].at(op.to.offset_elems, elem),
                  static_cast<uint64_t>(count) * elem);
      if (op.reduce) {
        path.reduce(self, dst, plan.devices[op.src], src, count, plan.reduce_op, plan.dtype);
      } else {
        path.copy(self, dst, plan.devices[op.src], src, static_cast<uint64_t>(count) * elem);
      }
    }
    // A step with no op anywhere needs no barrier (every rank sees the same plan).
    if (plan.exec_begin[static_cast<size_t>(step + 1) * n] ==
        plan.exec_begin[static_cast<size_t>(step) * n]) {
      if (begin) step_end_ns.push_back(step_end_ns.empty() ? begin_time() : step_end_ns.back());
      continue;
    }
    path.fence(self);
    DPS_CHECK(rendezvous.barrier.arrive_and_wait(Clock::now() + timeout), ErrorKind::kTimeout,
              "[Rank {}] step {} of {} (SequenceNumber={}) timed out waiting for its peers", rank, step,
              s.algorithm, rendezvous.seq);
    if (begin) {
      // After the barrier: the step ended for every rank, senders included (their own comm
      // stream idles while peers receive from them).
      const Event end = self.record(StreamKind::kComm);
      step_end_ns.push_back(begin_time() + self.elapsed_ns(*begin, end));
    }
  }
  // Out of place: what the schedule never wrote here (a broadcast's root, a group of one) is the
  // input itself.
  if (!plan.fill_from_input.empty())
    for (const Segment& seg : plan.fill_from_input[rank])
      path.copy(self, plan.buffers[rank].at(seg.offset_elems, elem), self,
                plan.inputs[rank].at(seg.offset_elems, elem), static_cast<uint64_t>(seg.count_elems) * elem);
  return step_end_ns;
}

int64_t event_time(const Device& device, const Event& event) {
  return device.kind() == DeviceKind::kCuda ? cuda::event_time_ns(device.impl(), event) : event.ts_ns;
}

}  // namespace dpscope::detail
