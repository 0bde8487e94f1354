// The benchmark's five collectives, one descriptor each (collectives.hpp).
#include "collectives.hpp"

#include <fmt/format.h>

#include <cmath>

#include "dpscope/base/error.hpp"

namespace dpscope::bench {
namespace {

// The exact reduction over `n` ranks of input_value(op, r, i).
float reduced_value(ReduceOp op, int n, int64_t i) {
  switch (op) {
    case ReduceOp::kSum: return static_cast<float>(n * (n + 1) / 2 + n * (i % 7));
    case ReduceOp::kAvg: return static_cast<float>(n * (n + 1) / 2 + n * (i % 7)) / static_cast<float>(n);
    case ReduceOp::kMin: return static_cast<float>(1 + i % 7);
    case ReduceOp::kMax: return static_cast<float>(n + i % 7);
    case ReduceOp::kProduct: {
      int twos = 0;
      for (int r = 0; r < n; ++r) twos += (r + i) % 2;
      return std::ldexp(1.0f, twos);
    }
  }
  return 0.0f;
}

bool in_place(const Buffers& b) { return b.placement == Placement::kInPlace; }

const CollectiveDescriptor kAllReduce{
    .op = OpType::kAllReduce,
    .reduces = true,
    .expected = [](const BenchOptions& o, const Buffers&, int, int n,
                   int64_t i) { return reduced_value(o.op, n, i); },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          const AllreduceOptions options{.op = o.op, .algorithm = o.algorithm, .slices = o.slices};
          return in_place(b) ? pg.all_reduce(b.recv, options) : pg.all_reduce_into(b.recv, b.send, options);
        }};

const CollectiveDescriptor kBroadcast{
    .op = OpType::kBroadcast,
    .rooted = true,
    .expected = [](const BenchOptions& o, const Buffers&, int, int,
                   int64_t i) { return input_value(o.op, o.root, i); },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          const BroadcastOptions options{.root = o.root, .algorithm = o.algorithm, .slices = o.slices};
          return in_place(b) ? pg.broadcast(b.recv, options) : pg.broadcast_into(b.recv, b.send, options);
        }};

// The root holds the reduction. Every other rank: in place it keeps its inputs, out of place its
// receive buffer is not written (NCCL uses recvbuff on the root only).
const CollectiveDescriptor kReduce{
    .op = OpType::kReduce,
    .reduces = true,
    .rooted = true,
    .expected =
        [](const BenchOptions& o, const Buffers& b, int rank, int n, int64_t i) {
          if (rank == o.root) return reduced_value(o.op, n, i);
          return in_place(b) ? input_value(o.op, rank, i) : 0.0f;
        },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          const ReduceOptions options{
              .root = o.root, .op = o.op, .algorithm = o.algorithm, .slices = o.slices};
          return in_place(b) ? pg.reduce(b.recv, options) : pg.reduce_into(b.recv, b.send, options);
        }};

// Block r of the output is rank r's input.
const CollectiveDescriptor kAllGather{
    .op = OpType::kAllGather,
    .ring_only = true,
    .splits_size = true,
    .expected =
        [](const BenchOptions& o, const Buffers& b, int, int n, int64_t i) {
          const int64_t block = b.recv.numel() / n;
          return input_value(o.op, static_cast<int>(i / block), i % block);
        },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          return pg.all_gather_into_tensor(b.recv, b.send, {.algorithm = o.algorithm, .slices = o.slices});
        }};

// Rank r's output is block r of the reduction of every rank's input.
const CollectiveDescriptor kReduceScatter{
    .op = OpType::kReduceScatter,
    .reduces = true,
    .ring_only = true,
    .splits_size = true,
    .expected = [](const BenchOptions& o, const Buffers& b, int rank, int n,
                   int64_t i) { return reduced_value(o.op, n, rank * b.recv.numel() + i); },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          return pg.reduce_scatter_tensor(b.recv, b.send,
                                          {.op = o.op, .algorithm = o.algorithm, .slices = o.slices});
        }};

// Output block j (of total/n elements) is rank j's input block for this rank: nccl-tests' alltoall
// (src/alltoall.cu: send and receive counts (count/nranks)*nranks, bus factor (n-1)/n).
const CollectiveDescriptor kAllToAll{
    .op = OpType::kAllToAll,
    .exchanges = true,
    .one_schedule = true,
    .expected =
        [](const BenchOptions& o, const Buffers& b, int rank, int n, int64_t i) {
          const int64_t block = b.recv.numel() / n;
          return input_value(o.op, static_cast<int>(i / block), rank * block + i % block);
        },
    .run = [](const BenchOptions&, ProcessGroup& pg,
              Buffers& b) { return pg.all_to_all_single(b.recv, b.send); }};

}  // namespace

float input_value(ReduceOp op, int rank, int64_t i) {
  if (op == ReduceOp::kProduct) return static_cast<float>(1 + (rank + i) % 2);
  return static_cast<float>(rank + 1 + i % 7);
}

const CollectiveDescriptor& descriptor(OpType op) {
  for (const CollectiveDescriptor* d :
       {&kAllReduce, &kAllGather, &kReduceScatter, &kBroadcast, &kReduce, &kAllToAll})
    if (d->op == op) return *d;
  throw Error(ErrorKind::kUsage, fmt::format("dpscope bench does not run {}", api_name(op)));
}

Counts counts_for(const CollectiveDescriptor& d, uint64_t bytes, int ranks, DType dtype) {
  // nccl-tests' rounding (comm/types.hpp)
  const int64_t total = nccl_tests_elements(d.op, bytes, ranks, element_size(dtype));
  const int64_t block = total / ranks;
  if (d.splits_size)
    return d.op == OpType::kAllGather ? Counts{block, total, total, block}
                                      : Counts{total, block, total, block};
  if (d.exchanges) return {total, total, total, block};
  return {total, total, total, total};
}

Buffers make_buffers(const CollectiveDescriptor& d, Counts counts, Placement placement, int rank,
                     const Device& device, bool meta, DType dtype) {
  auto make = [&](int64_t numel) {
    return meta ? Tensor::meta({numel}, device, MemoryCategory::kBuffers, dtype)
                : Tensor::zeros({numel}, device, MemoryCategory::kBuffers);
  };
  Buffers b{.placement = placement};
  if (placement == Placement::kOutOfPlace) {
    b.send = make(counts.send);
    b.recv = make(counts.recv);
  } else if (d.op == OpType::kAllGather) {  // send = recvbuff + rank * count
    b.recv = make(counts.recv);
    b.send = b.recv.rows(rank * counts.send, counts.send);
  } else if (d.op == OpType::kReduceScatter) {  // recv = sendbuff + rank * count
    b.send = make(counts.send);
    b.recv = b.send.rows(rank * counts.recv, counts.recv);
  } else {
    b.recv = make(counts.recv);
    b.send = b.recv;
  }
  return b;
}

}  // namespace dpscope::bench
