// What the collective benchmark needs to know of each collective, one descriptor per collective, in
// the spirit of nccl-tests' per-collective files (src/all_reduce.cu: its testColl struct of
// getCollByteCount, initData, getBw, runColl) driven by one shared harness (collective_bench.cpp).
//
// A descriptor says how a size becomes send and receive buffers, what each element of the receive
// buffer must hold afterwards, and how the collective is run on a ProcessGroup, out of place (two
// buffers) or in place (one, laid out as nccl-tests lays it out).
// Inputs are built so results are exactly predictable: rank r, element i holds r + 1 + i % 7
// (prod: 1 + (r + i) % 2), so every sum, min, max and product is exact in float.
#pragma once

#include <cstdint>
#include <memory>

#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/types.hpp"
#include "dpscope/comm/work.hpp"
#include "dpscope/core/tensor.hpp"
#include "dpscope_bench/collective_bench.hpp"

namespace dpscope::bench {

// One rank's buffers for one size and placement. In place, `send` and `recv` share storage:
// all_reduce, broadcast, reduce, alltoall: the same tensor; all_gather: send is block `rank` of
// recv (all_gather.cu: sendInplaceOffset = count); reduce_scatter: recv is block `rank` of send
// (reduce_scatter.cu: recvInplaceOffset = count).
struct Buffers {
  Placement placement = Placement::kOutOfPlace;
  Tensor send;  // (Counts::send elements) the collective's input, filled with input_value()
  Tensor recv;  // (Counts::recv elements) its output, checked against `expected`
};

// Element counts for one size: the send and receive buffers per rank, and nccl-tests' count column
// (all ranks' data for all_gather/reduce_scatter/alltoall).
struct Counts {
  int64_t send = 0;
  int64_t recv = 0;
  int64_t total = 0;
  int64_t param = 0;  // the count the collective is called with (nccl-tests' `count` column): per
                      // rank for all_gather, reduce_scatter and alltoall, the whole buffer otherwise
};

struct CollectiveDescriptor {
  OpType op = OpType::kAllReduce;
  bool reduces = false;       // takes a reduction operator (-o)
  bool rooted = false;        // has a root rank (-r; nccl-tests prints -1 for the others)
  bool ring_only = false;     // every backend's schedule is a ring: --algo ring or auto only
  bool splits_size = false;   // the size is all ranks' data (nccl-tests' all_gather/reduce_scatter)
  bool exchanges = false;     // alltoall: input and output each hold the whole size, rounded down to
                              // a multiple of the ranks (nccl-tests' alltoall.cu byte counts)
  bool one_schedule = false;  // no algorithm to choose: --algo auto only
  // What element `i` of the receive buffer of `rank` holds after a correct run over `ranks` ranks
  // (`b`: that rank's buffers, for the block sizes).
  float (*expected)(const BenchOptions&, const Buffers& b, int rank, int ranks, int64_t i) = nullptr;
  std::shared_ptr<Work> (*run)(const BenchOptions&, ProcessGroup&, Buffers&) = nullptr;
};

// The descriptor of `op`; throws kUsage for a collective the benchmark does not run.
const CollectiveDescriptor& descriptor(OpType op);

// What rank `rank` puts at element `i` (the exactly predictable inputs above).
float input_value(ReduceOp op, int rank, int64_t i);

// Element counts of a `bytes` row of `dtype` elements for `d` over `ranks` ranks.
Counts counts_for(const CollectiveDescriptor& d, uint64_t bytes, int ranks, DType dtype);

// Zeroed float32 tensors of `counts` on `device` laid out for `placement` on rank `rank`; with
// `meta`, shapes of `dtype` without data (timing-only runs).
Buffers make_buffers(const CollectiveDescriptor& d, Counts counts, Placement placement, int rank,
                     const Device& device, bool meta, DType dtype);

}  // namespace dpscope::bench
