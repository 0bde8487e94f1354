// Data movement of the sim backend: each rank executes the ops of each step in which it receives
// (copy or reduce from a peer's buffer into its own), then waits at the step barrier. Every
// element sees its operations in the order the schedule fixes, so results do not depend on which
// thread runs first.
#include <cstring>

#include "sim_backend.hpp"

namespace dpscope::detail {
namespace {

template <typename T, typename Combine>
void combine_loop(T* __restrict dst, const T* __restrict src, int64_t count, Combine combine) {
  for (int64_t i = 0; i < count; ++i) dst[i] = combine(dst[i], src[i]);
}

template <typename T>
void reduce_typed(T* dst, const T* src, int64_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: combine_loop(dst, src, count, [](T a, T b) { return a + b; }); break;
    case ReduceOp::kProduct: combine_loop(dst, src, count, [](T a, T b) { return a * b; }); break;
    case ReduceOp::kMin: combine_loop(dst, src, count, [](T a, T b) { return b < a ? b : a; }); break;
    case ReduceOp::kMax: combine_loop(dst, src, count, [](T a, T b) { return a < b ? b : a; }); break;
  }
}

}  // namespace

void reduce_into(std::byte* dst, const std::byte* src, int64_t count, ReduceOp op, DType dtype) {
  if (dtype == DType::kF32) {
    reduce_typed(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src), count, op);
  } else {
    reduce_typed(reinterpret_cast<int64_t*>(dst), reinterpret_cast<const int64_t*>(src), count, op);
  }
}

void divide(std::byte* data, int64_t count, int divisor) {
  float* p = reinterpret_cast<float*>(data);
  const float d = static_cast<float>(divisor);
  for (int64_t i = 0; i < count; ++i) p[i] /= d;
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
