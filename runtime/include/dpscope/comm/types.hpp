// Vocabulary of the collectives: reduce ops, op types, algorithms and the per-call options structs
// (the shape of torch.distributed's ReduceOp / AllreduceOptions / BroadcastOptions / ...).
//
// Used by ProcessGroup (comm/process_group.hpp), every Backend, DDP and `dpscope bench`.
// Every options struct is plain data meant for designated initializers:
//   group.all_reduce(grad, {.op = ReduceOp::kAvg, .algorithm = Algorithm::kRing});
// A zero `timeout` means "the group's timeout" (SimWorldOptions::timeout, 30 min by default like
// gloo; tests use milliseconds).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dpscope {

// How elements from different ranks are combined. kAvg is a sum followed by a division by the
// group size (float32 only), as NCCL's ncclAvg.
enum class ReduceOp : uint8_t { kSum, kAvg, kProduct, kMin, kMax };
const char* to_string(ReduceOp op);  // "sum", "avg", "prod", "min", "max" (nccl-tests' names)
// Parses "sum", "avg", "prod"/"product", "min", "max"; throws kInvalidArgument otherwise.
ReduceOp parse_reduce_op(std::string_view text);

// The operation a Work or a collective fingerprint stands for (c10d's OpType).
enum class OpType : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kScatter,
  kGather,
  kBarrier,
  kSend,
  kRecv,
  kNewGroup,
  kAllToAll,
};
const char* to_string(OpType op);  // "ALLREDUCE", "BROADCAST", ... (as PyTorch prints them)
const char* api_name(OpType op);   // "all_reduce", "broadcast", ... (our function names)

// The algorithm that moves the data (NCCL_ALGO's role; here chosen per call, by the DPSCOPE_ALGO
// environment variable read when a SimWorld is created, or automatically):
//  * kRing  — ring (all_reduce: reduce-scatter then all-gather, 2(n-1) steps; broadcast/reduce:
//             a pipelined chain along the ring);
//  * kTree  — all_reduce: double binary tree (reduce up, broadcast down, pipelined);
//             broadcast/reduce: binomial tree;
//  * kNaive — everything through the root (all_reduce: reduce to rank 0, then broadcast; scatter
//             and gather always work this way);
//  * kAuto  — all_reduce: ring or tree, whichever the timing model predicts to finish first;
//             other collectives: their usual algorithm (ring for all_gather/reduce_scatter, tree
//             for broadcast/reduce, naive for scatter/gather).
// kDefault means "not set here": the world's default (DPSCOPE_ALGO), else kAuto.
enum class Algorithm : uint8_t { kDefault, kAuto, kRing, kTree, kNaive };
const char* to_string(Algorithm algo);  // "default", "auto", "ring", "tree", "naive"
// Parses "auto", "ring", "tree", "naive" (case-insensitive); throws kInvalidArgument naming
// `what` (e.g. "--algo" or "DPSCOPE_ALGO") otherwise.
Algorithm parse_algorithm(std::string_view text, std::string_view what = "algorithm");
// What a call that asks for no algorithm runs: $DPSCOPE_ALGO when set and not empty (parsed as
// above, a bad value naming the variable), else kAuto.
Algorithm algorithm_from_env();

using Milliseconds = std::chrono::milliseconds;

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kDefault;
  Milliseconds timeout{0};
  int slices = 0;             // pipeline slices per chunk; 0 = by size, 1 = not pipelined
  bool trace_values = false;  // emit `values` events (first elements, norm) before and after
};

struct BroadcastOptions {
  int root = 0;
  Algorithm algorithm = Algorithm::kDefault;
  Milliseconds timeout{0};
  int slices = 0;
};

struct ReduceOptions {
  int root = 0;
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kDefault;
  Milliseconds timeout{0};
  int slices = 0;
};

struct AllgatherOptions {
  Algorithm algorithm = Algorithm::kDefault;
  Milliseconds timeout{0};
  int slices = 0;
};

struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::kSum;
  Algorithm algorithm = Algorithm::kDefault;
  Milliseconds timeout{0};
  int slices = 0;
};

struct ScatterOptions {
  int root = 0;
  Milliseconds timeout{0};
};

struct GatherOptions {
  int root = 0;
  Milliseconds timeout{0};
};

// all_to_all_single with equal splits (torch.distributed.all_to_all_single without split sizes):
// one schedule (pairwise exchange), so no algorithm to choose, as c10d's AllToAllOptions.
struct AllToAllOptions {
  Milliseconds timeout{0};
};

struct BarrierOptions {
  Milliseconds timeout{0};
};

struct PointToPointOptions {
  int tag = 0;
  Milliseconds timeout{0};
};

struct NewGroupOptions {
  Milliseconds timeout{0};  // the new group's timeout; 0 = the parent group's
};

// nccl-tests' bus-bandwidth factor for `op` over `ranks` ranks (nccl-tests' doc/PERFORMANCE.md): all-reduce
// 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n (src/alltoall.cu's AlltoAllGetBw);
// broadcast, reduce 1; others 1.
double bus_bandwidth_factor(OpType op, int ranks);

// nccl-tests' elements of a `bytes` row of `element_bytes`-byte elements (its -d: 4 for float) over
// `ranks` ranks (>= 1), all ranks' data: bytes / element_bytes, then all_gather.cu and
// reduce_scatter.cu round each rank's block down to a multiple of 4 elements (ALIGN), alltoall.cu
// the buffer down to a whole block per rank; the others take the whole buffer. What `dpscope bench`
// runs and the fidelity report compares for a row of that size.
int64_t nccl_tests_elements(OpType op, uint64_t bytes, int ranks, size_t element_bytes);

}  // namespace dpscope
