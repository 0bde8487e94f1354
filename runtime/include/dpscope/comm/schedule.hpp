// Schedules: the collectives' algorithms written out as lists of point-to-point operations, and
// their simulated timing (docs/collectives.md explains each algorithm with a picture).
//
// A Schedule is pure data a lesson can print: op k moves elements `from` of rank src's buffer to
// rank dst, where they either replace or are reduced into elements `to` (reduce: to = op(to, from)).
// Every rank has one logical buffer, laid out per collective:
//   all_reduce, broadcast, reduce ..... `count` elements (the tensor, or a scratch copy)
//   all_gather, reduce_scatter ........ n blocks of `block` elements; block i belongs to rank i
//   scatter, gather ................... the root: n blocks; every other rank: 1 block at offset 0
//   all_to_all ........................ 2n blocks of `block` elements: blocks 0..n-1 the input
//                                       (block j is for rank j), n..2n-1 the output (block n+i
//                                       comes from rank i)
// Two orders are recorded, one per consumer:
//  * `step` orders the *data*: ops of one step touch disjoint elements (or are executed by the
//    same receiving rank, in list order), and every dependency lies in an earlier step. The sim
//    backend runs a step on all ranks in parallel, then a barrier. Since every element sees its
//    operations in a fixed order, results are bit-identical on every run and every rank.
//  * `deps` and `channel` order the *time*: an op starts when the ops it depends on are done and
//    the previous op its sender issued on the same channel has left the sender.
//
// simulate_schedule() times a schedule on a NetworkModel (a flow-level model): an op is a flow
// that starts when its dependencies are done and both ranks have started the collective; a link
// splits its bandwidth equally among the flows crossing it, and a flow moves at the rate of its
// most-shared link (rates change only when a flow starts or ends; event times are whole ns). It
// arrives `route latency` after its last byte left, then (reduce ops) waits for the receiving
// GPU's reduction unit, which works one reduction at a time.
//
// Thread semantics: pure functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dpscope/comm/network.hpp"
#include "dpscope/comm/types.hpp"

namespace dpscope {

struct Segment {
  int64_t offset_elems = 0;
  int64_t count_elems = 0;
};

// [offset, count) of part `index` when `count` elements are split into `parts` near-equal parts
// (sizes differ by at most one; the first parts are the smaller ones).
Segment split_segment(int64_t count, int parts, int index);

struct CommOp {
  int src = 0;  // group ranks
  int dst = 0;
  Segment from;         // read on src's buffer
  Segment to;           // written on dst's buffer (same count)
  bool reduce = false;  // to = op(to, from); else to = from
  bool signal = false;  // a zero-byte synchronisation message (barrier): costs the route latency
  int step = 0;         // data step (see header)
  int algo_step = 0;    // the algorithm's own step number (trace `algo_step`)
  int chunk = 0;        // data chunk x slices + slice (trace `chunk`)
  int channel = 0;      // sends of one rank on one channel leave one after another
  int phase = 0;        // index into Schedule::phases
  int32_t dep_begin = 0;
  int32_t dep_count = 0;
};

struct Schedule {
  const char* algorithm = "";       // "ring", "tree", "naive", "dissemination"
  std::vector<std::string> phases;  // "reduce-scatter", "all-gather", ...
  std::vector<CommOp> ops;          // in an order where every dependency comes first
  std::vector<int32_t> deps;        // op indices, referenced by CommOp::dep_begin/dep_count
  int steps = 0;                    // number of data steps
  int slices = 1;                   // pipeline slices per chunk

  std::span<const int32_t> deps_of(const CommOp& op) const {
    return {deps.data() + op.dep_begin, static_cast<size_t>(op.dep_count)};
  }
};

// Slices per chunk for a pipelined algorithm: `requested` when > 0, else one per MiB of chunk
// (at least 1, at most 16).
int pipeline_slices(int requested, uint64_t chunk_bytes);

// ---- all_reduce (buffer: `count` elements) ----
// Ring over `ring` (group ranks in ring order): n-1 reduce-scatter stages then n-1 all-gather
// stages; at stage s the rank at ring position i sends chunk (i - s) mod n, in `slices` slices.
Schedule ring_all_reduce(const std::vector<int>& ring, int64_t count, int slices);
// Double binary tree: tree 0 is the heap over ranks 0..n-1 (parent of i is (i-1)/2), tree 1 its
// mirror (rank n-1-i at heap index i), so a leaf of one is interior in the other; each tree
// reduces half of the data up to its root and broadcasts it back down, pipelined in slices.
Schedule tree_all_reduce(int ranks, int64_t count, int slices);
// Ranks 1..n-1 send everything to rank 0, which reduces them in rank order, then sends the
// result back to each.
Schedule naive_all_reduce(int ranks, int64_t count);

// ---- broadcast / reduce (buffer: `count` elements; reduce: non-roots work on a copy) ----
Schedule tree_broadcast(int ranks, int root, int64_t count);  // binomial: round k doubles the holders
Schedule ring_broadcast(const std::vector<int>& ring, int root, int64_t count,
                        int slices);                           // pipelined chain
Schedule naive_broadcast(int ranks, int root, int64_t count);  // the root sends to each rank
Schedule tree_reduce(int ranks, int root, int64_t count);      // binomial, the reverse of broadcast
Schedule ring_reduce(const std::vector<int>& ring, int root, int64_t count, int slices);
Schedule naive_reduce(int ranks, int root, int64_t count);  // each rank sends to the root

// ---- all_gather / reduce_scatter (buffer: n blocks of `block` elements) ----
Schedule ring_all_gather(const std::vector<int>& ring, int64_t block, int slices);
Schedule ring_reduce_scatter(const std::vector<int>& ring, int64_t block, int slices);

// ---- scatter / gather (root: n blocks; others: 1 block) ----
Schedule naive_scatter(int ranks, int root, int64_t block);
Schedule naive_gather(int ranks, int root, int64_t block);

// ---- all_to_all (2n blocks, above) ----
// Pairwise exchange: n-1 rounds; in round k (1..n-1) rank r sends its input block (r+k) mod n to
// rank (r+k) mod n, which writes it to its output block n+r. Every rank sends once and receives
// once per round; its own block n+r is copied locally, outside the schedule.
Schedule pairwise_all_to_all(int ranks, int64_t block);

// ---- barrier: ceil(log2 n) rounds; in round k rank r signals rank (r + 2^k) mod n ----
Schedule dissemination_barrier(int ranks);

// ---- timing ----
struct OpTime {
  int64_t start_ns = 0;         // first byte leaves the sender
  int64_t arrival_ns = 0;       // last byte has arrived
  int64_t reduce_start_ns = 0;  // reduce ops: when the receiver's reduction began
  int64_t done_ns = 0;          // the result is usable (after the reduction, for reduce ops)
  bool empty = false;           // moved zero bytes (not a signal): took no time, not traced
};

struct ScheduleTiming {
  std::vector<OpTime> ops;           // parallel to Schedule::ops
  std::vector<int64_t> rank_end_ns;  // when each rank's part is over (>= its start)
};

// Times `schedule` for elements of `elem_bytes` bytes; group rank r lives on GPU gpu_of_rank[r]
// and starts the collective at rank_start_ns[r].
ScheduleTiming simulate_schedule(const Schedule& schedule, const NetworkModel& network,
                                 std::span<const int> gpu_of_rank, std::span<const int64_t> rank_start_ns,
                                 uint64_t elem_bytes);

}  // namespace dpscope
