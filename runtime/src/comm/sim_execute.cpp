// Data movement of the sim backend: each rank executes the ops of each step in which it receives
// (copy or reduce from a peer's buffer into its own), then waits at the step barrier. Every
// element sees its operations in the order the schedule fixes, so results do not depend on which
// thread runs first.
#include <cstring>

#include "dpscope/kernels/kernels.hpp"
#include "sim_backend.hpp"

namespace dpscope::detail {

namespace {

// The kernel that combines two chunks for `op`; kAvg sums, and the caller divides at the end.
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

}  // namespace

// The sim backend's buffers are host memory of simulated devices.
void reduce_into(std::byte* dst, const std::byte* src, int64_t count, ReduceOp op, DType dtype) {
  kernels::reduce_into(DeviceKind::kSim, dst, src, count, reduction_of(op), dtype);
}

void divide(std::byte* data, int64_t count, int divisor) {
  kernels::divide(DeviceKind::kSim, data, count, static_cast<float>(divisor));
}

void execute_steps(const Plan& plan, Rendezvous& rendezvous, int rank, Milliseconds timeout) {
  const int n = static_cast<int>(plan.buffers.size());
  const size_t elem = element_size(plan.dtype);
  const Schedule& s = plan.schedule;
  for (int step = 0; step < s.steps; ++step) {
    const int32_t begin = plan.exec_begin[static_cast<size_t>(step) * n + rank];
    const int32_t end = plan.exec_begin[static_cast<size_t>(step) * n + rank + 1];
    for (int32_t i = begin; i < end; ++i) {
      const CommOp& op = s.ops[plan.exec_order[i]];
      const int64_t count = op.to.count_elems;
      if (count == 0) continue;
      std::byte* dst = plan.buffers[op.dst].at(op.to.offset_elems, elem);
      const std::byte* src = plan.buffers[op.src].at(op.from.offset_elems, elem);
      if (op.reduce) {
        reduce_into(dst, src, count, plan.reduce_op, plan.dtype);
      } else {
        std::memcpy(dst, src, static_cast<size_t>(count) * elem);
      }
    }
    // A step with no op anywhere needs no barrier (every rank sees the same plan).
    if (plan.exec_begin[static_cast<size_t>(step + 1) * n] == plan.exec_begin[static_cast<size_t>(step) * n])
      continue;
    DPS_CHECK(rendezvous.barrier.arrive_and_wait(Clock::now() + timeout), ErrorKind::kTimeout,
              "[Rank {}] step {} of {} (SequenceNumber={}) timed out waiting for its peers", rank, step,
              s.algorithm, rendezvous.seq);
  }
}

}  // namespace dpscope::detail
