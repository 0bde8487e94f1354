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

Tensor& own_tensor(Buffers& b) { return b.tensor; }
Tensor& flat_tensor(Buffers& b) { return b.flat; }
const Tensor& own_tensor_checked(const Buffers& b) { return b.tensor; }
const Tensor& flat_tensor_checked(const Buffers& b) { return b.flat; }

const CollectiveDescriptor kAllReduce{
    .op = OpType::kAllReduce,
    .reduces = true,
    .input = own_tensor,
    .checked = own_tensor_checked,
    .expected = [](const BenchOptions& o, const Buffers&, int, int n,
                   int64_t i) { return reduced_value(o.op, n, i); },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          return pg.all_reduce(b.tensor, {.op = o.op, .algorithm = o.algorithm, .slices = o.slices});
        }};

const CollectiveDescriptor kBroadcast{
    .op = OpType::kBroadcast,
    .input = own_tensor,
    .checked = own_tensor_checked,
    .expected = [](const BenchOptions& o, const Buffers&, int, int,
                   int64_t i) { return input_value(o.op, o.root, i); },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          return pg.broadcast(b.tensor, {.root = o.root, .algorithm = o.algorithm, .slices = o.slices});
        }};

// The root holds the reduction; every other rank keeps its inputs.
const CollectiveDescriptor kReduce{
    .op = OpType::kReduce,
    .reduces = true,
    .input = own_tensor,
    .checked = own_tensor_checked,
    .expected =
        [](const BenchOptions& o, const Buffers&, int rank, int n, int64_t i) {
          return rank == o.root ? reduced_value(o.op, n, i) : input_value(o.op, rank, i);
        },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          return pg.reduce(b.tensor,
                           {.root = o.root, .op = o.op, .algorithm = o.algorithm, .slices = o.slices});
        }};

// Block r of the output is rank r's input.
const CollectiveDescriptor kAllGather{
    .op = OpType::kAllGather,
    .ring_only = true,
    .splits_size = true,
    .input = own_tensor,
    .checked = flat_tensor_checked,
    .expected =
        [](const BenchOptions& o, const Buffers& b, int, int, int64_t i) {
          const int64_t block = b.tensor.numel();
          return input_value(o.op, static_cast<int>(i / block), i % block);
        },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          return pg.all_gather_into_tensor(b.flat, b.tensor, {.algorithm = o.algorithm, .slices = o.slices});
        }};

// Rank r's output is block r of the reduction of every rank's input.
const CollectiveDescriptor kReduceScatter{
    .op = OpType::kReduceScatter,
    .reduces = true,
    .ring_only = true,
    .splits_size = true,
    .input = flat_tensor,
    .checked = own_tensor_checked,
    .expected = [](const BenchOptions& o, const Buffers& b, int rank, int n,
                   int64_t i) { return reduced_value(o.op, n, rank * b.tensor.numel() + i); },
    .run =
        [](const BenchOptions& o, ProcessGroup& pg, Buffers& b) {
          return pg.reduce_scatter_tensor(b.tensor, b.flat,
                                          {.op = o.op, .algorithm = o.algorithm, .slices = o.slices});
        }};

// Output block j (of total/n elements) is rank j's input block for this rank: nccl-tests' alltoall
// (src/alltoall.cu: send and receive counts (count/nranks)*nranks, bus factor (n-1)/n).
const CollectiveDescriptor kAllToAll{
    .op = OpType::kAllToAll,
    .exchanges = true,
    .one_schedule = true,
    .input = own_tensor,
    .checked = flat_tensor_checked,
    .expected =
        [](const BenchOptions& o, const Buffers& b, int rank, int n, int64_t i) {
          const int64_t block = b.flat.numel() / n;
          return input_value(o.op, static_cast<int>(i / block), rank * block + i % block);
        },
    .run = [](const BenchOptions&, ProcessGroup& pg,
              Buffers& b) { return pg.all_to_all_single(b.flat, b.tensor); }};

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

Counts counts_for(const CollectiveDescriptor& d, uint64_t bytes, int ranks) {
  const int64_t elems = static_cast<int64_t>(bytes / sizeof(float));
  if (d.splits_size) return {elems / ranks, elems / ranks * ranks};
  if (d.exchanges) return {elems / ranks * ranks, elems / ranks * ranks};
  return {elems, elems};
}

Buffers make_buffers(const CollectiveDescriptor& d, Counts counts, const Device& device, bool meta) {
  auto make = [&](int64_t numel) {
    return meta ? Tensor::meta({numel}, device, MemoryCategory::kBuffers)
                : Tensor::zeros({numel}, device, MemoryCategory::kBuffers);
  };
  Buffers b;
  b.tensor = make(counts.per_rank);
  if (d.splits_size || d.exchanges) b.flat = make(counts.total);
  return b;
}

}  // namespace dpscope::bench
