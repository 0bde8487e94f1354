// What the collective benchmark needs to know of each collective, one descriptor per collective, in
// the spirit of nccl-tests' per-collective files (src/all_reduce.cu: its testColl struct of
// getCollByteCount, initData, getBw, runColl) driven by one shared harness (collective_bench.cpp).
//
// A descriptor says how a size becomes buffers, which buffer takes the inputs, what each element
// of the checked buffer must hold afterwards, and how the collective is run on a ProcessGroup.
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

// One rank's buffers for one size.
struct Buffers {
  Tensor tensor;  // all_reduce, broadcast, reduce: in place; all_gather: input; reduce_scatter: output;
                  // all_to_all: input
  Tensor flat;    // all ranks' data: all_gather's output, reduce_scatter's input, all_to_all's output;
                  // empty otherwise
};

// Element counts for one size: the collective's own tensor per rank, and all ranks' data.
struct Counts {
  int64_t per_rank = 0;
  int64_t total = 0;
};

struct CollectiveDescriptor {
  OpType op = OpType::kAllReduce;
  bool reduces = false;       // takes a reduction operator (-o)
  bool ring_only = false;     // every backend's schedule is a ring: --algo ring or auto only
  bool splits_size = false;   // the size is all ranks' data (nccl-tests' all_gather/reduce_scatter)
  bool exchanges = false;     // alltoall: input and output each hold the whole size, rounded down to
                              // a multiple of the ranks (nccl-tests' alltoall.cu byte counts)
  bool one_schedule = false;  // no algorithm to choose: --algo auto only
  // The buffer that takes the inputs and the one checked after the collective.
  Tensor& (*input)(Buffers&) = nullptr;
  const Tensor& (*checked)(const Buffers&) = nullptr;
  // What element `i` of the checked buffer of `rank` holds after a correct run over `ranks` ranks
  // (`b`: that rank's buffers, for the block sizes).
  float (*expected)(const BenchOptions&, const Buffers& b, int rank, int ranks, int64_t i) = nullptr;
  std::shared_ptr<Work> (*run)(const BenchOptions&, ProcessGroup&, Buffers&) = nullptr;
};

// The descriptor of `op`; throws kUsage for a collective the benchmark does not run.
const CollectiveDescriptor& descriptor(OpType op);

// What rank `rank` puts at element `i` (the exactly predictable inputs above).
float input_value(ReduceOp op, int rank, int64_t i);

// Element counts of `bytes` of floats for `d` over `ranks` ranks.
Counts counts_for(const CollectiveDescriptor& d, uint64_t bytes, int ranks);

// Tensors of `counts` on `device` (meta: shapes without data, for timing-only runs).
Buffers make_buffers(const CollectiveDescriptor& d, Counts counts, const Device& device, bool meta);

}  // namespace dpscope::bench
