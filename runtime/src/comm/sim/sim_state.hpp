// Private state of the `sim` backend: the world's lock, groups, rendezvous points and plans.
//
// Execution model (docs/collectives.md): the rank threads of a group meet at each collective
// (a Rendezvous keyed by the group's sequence number). The last to arrive — the leader — checks
// the fingerprints, builds the algorithm's Schedule, times it with simulate_schedule() and writes
// the trace, then publishes a Plan. Every rank then executes the data steps of the plan in which
// it receives (reading peers' buffers, writing its own), with a barrier after each step, and
// finally applies the plan's times to its own streams. In timing-only mode (meta tensors) there
// are no data steps: the leader's work is all there is.
//
// Locking: one mutex per world (WorldState::mutex) guards everything marked "guarded" below, with
// one condition variable for all waits; data steps use the plan's own StepBarrier. A rank thread
// only ever touches its own Device's clocks; the leader reads peers' devices (rank, step, phase,
// tracer) only while those peers are blocked inside the same collective.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "../api/fingerprint.hpp"
#include "dpscope/comm/schedule.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/types.hpp"
#include "dpscope/comm/work.hpp"
#include "dpscope/core/tensor.hpp"

namespace dpscope::detail {

using Clock = std::chrono::steady_clock;

class SimWork;

struct Failure {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  // The simulated time the failure was found, when the collective knows it: the leader's check of
  // a complete rendezvous fails when the last rank arrives (a mismatch). -1: no simulated time
  // (an abort, a timeout: wall-clock events), and the rank's clocks stay where they were.
  int64_t found_ns = -1;
};

// Bytes a collective of `n` ranks is named by in traces and benchmarks (nccl-tests' "size": the
// full buffer of all ranks for all_gather, reduce_scatter, scatter and gather; 0 for barrier and
// new_group). sim_plan.cpp; the mpi backend's schedules name theirs alike.
uint64_t collective_bytes(const Signature& sig, int n);

// One rank's logical buffer (schedule.hpp layouts): blocks of block_elems elements; empty
// blocks in timing-only mode.
struct RankBuffer {
  std::vector<std::byte*> blocks;
  int64_t block_elems = 0;
  std::byte* at(int64_t offset_elems, size_t elem_size) const;
};

struct Arrival {
  Signature signature;
  int64_t ready_ns = 0;  // max(comm clock, compute clock) at the call
  RankBuffer buffer;
  // Out of place (all_reduce_into, broadcast_into, reduce_into): the send buffer, laid out like
  // `buffer`; no blocks: in place (the data starts in `buffer`). An element of `buffer` the
  // schedule has not written yet is read here instead (the plan's source table).
  RankBuffer input;
  // Out of place: elements of `buffer` the schedule never writes are copied from `input` at the
  // end (a broadcast's root, a group of one), so `buffer` holds the whole result.
  bool complete_output = false;
  int slices = 0;
  Milliseconds new_group_timeout{0};  // new_group: the sub-group's timeout (0 = the parent's)
};

class StepBarrier {
 public:
  explicit StepBarrier(int parties) : parties_(parties) {}
  // False when `deadline` passed before every party arrived (a stuck peer: a bug).
  bool arrive_and_wait(Clock::time_point deadline);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int parties_;
  int count_ = 0;
  int64_t generation_ = 0;
};

struct GroupState;

// Out of place, where an op's operands live (bits of Plan::op_sources). A rank's buffer element
// that no op has written yet still holds nothing: its value is in the rank's input (NCCL's first
// step reads the send buffer). Ranks in place have all their data in `buffers` from the start.
enum OpSource : uint8_t {
  kFromSrcInput = 1,  // `from` is read from the sender's input
  kSeedDstInput = 2,  // a reduce whose `to` was never written: to = op(dst's input, from)
};

struct Plan {
  Signature signature;  // rank 0's (every rank's, once checked)
  int64_t seq = 0;
  int group_id = 0;
  Schedule schedule;
  ScheduleTiming timing;
  ReduceOp reduce_op = ReduceOp::kSum;
  DType dtype = DType::kF32;
  bool with_data = true;
  std::vector<int64_t> start_ns;  // per group rank
  std::vector<int64_t> end_ns;
  std::vector<RankBuffer> buffers;
  std::vector<RankBuffer> inputs;  // per group rank: Arrival::input (no blocks: in place)
  // Out of place, per op of the schedule (empty when every rank is in place): where its data
  // comes from (sim_plan.cpp's source table, see OpSource).
  std::vector<uint8_t> op_sources;
  // Out of place, per group rank: the segments copied from the input after the last step.
  std::vector<std::vector<Segment>> fill_from_input;
  std::vector<Device> devices;      // per group rank
  std::vector<int32_t> exec_order;  // op indices sorted by (step, dst)
  std::vector<int32_t> exec_begin;  // (step * ranks + dst) -> offset into exec_order; + 1 sentinel
  std::shared_ptr<GroupState> new_group;
};

struct Rendezvous {
  Rendezvous(int64_t seq_, OpType op_, int ranks) : seq(seq_), op(op_), arrivals(ranks), barrier(ranks) {}
  const int64_t seq;
  const OpType op;
  Clock::time_point opened = Clock::now();
  // guarded:
  std::vector<std::optional<Arrival>> arrivals;
  int arrived = 0;
  bool complete = false;   // everyone arrived; the leader is working
  bool published = false;  // plan or failure available
  std::optional<Failure> failure;
  std::shared_ptr<const Plan> plan;
  // not guarded (has its own lock):
  StepBarrier barrier;
};

// A posted send waiting for its recv.
struct Message {
  int src = 0;
  int dst = 0;
  int tag = 0;
  int64_t seq = 0;
  Tensor tensor;
  int64_t ready_ns = 0;
  std::weak_ptr<SimWork> work;  // weak: a mailbox must not keep its world alive through a Work
};

struct GroupState {
  SimWorld* world = nullptr;
  int id = 0;
  std::vector<int> global_ranks;  // group rank -> world rank
  std::vector<int> gpus;          // group rank -> GPU index in the network
  std::vector<int> ring;          // ring order, in group ranks
  Milliseconds timeout{0};        // default for the group's members
  // guarded:
  std::map<int64_t, std::shared_ptr<Rendezvous>> pending;
  std::optional<Failure> aborted;
  std::map<std::tuple<int, int, int>, std::deque<std::shared_ptr<Message>>> mailbox;
};

struct WorldState {
  std::shared_ptr<GroupState> default_group;  // set at creation, then immutable but for guarded parts
  std::mutex mutex;
  std::condition_variable cv;
  // guarded:
  std::optional<RankFailure> failure;
  std::vector<bool> finished;
  int next_group_id = 1;
};

// The Work of the sim backend. Collectives are created completed; a send completes when matched.
class SimWork final : public Work {
 public:
  SimWork(std::shared_ptr<SimWorld> world, Device device, OpType op, int64_t seq, int rank,
          Milliseconds timeout)
      : world_(std::move(world)),
        device_(std::move(device)),
        op_(op),
        seq_(seq),
        rank_(rank),
        timeout_(timeout) {}

  // Marks the work done over [start_ns, end_ns]; `comm_on_wait`: wait() also advances the comm
  // stream (sends, whose simulated time is only known once matched). Takes the world lock.
  void complete(int64_t start_ns, int64_t end_ns, bool comm_on_wait);
  // Marks the work failed; `found_ns` >= 0: wait() first advances the compute stream to that
  // simulated time (the rank learns of the failure no earlier than it was found). Takes the world lock.
  void fail(ErrorKind kind, const std::string& message, int64_t found_ns = -1);
  // Same, for callers already holding the world lock.
  void complete_locked(int64_t start_ns, int64_t end_ns, bool comm_on_wait);
  // A send: the world rank whose return means this work can never complete.
  void set_peer(int world_rank) { peer_ = world_rank; }
  void fail_locked(ErrorKind kind, const std::string& message);

  void wait() override;
  bool is_completed() const override;
  bool is_success() const override;
  std::exception_ptr exception() const override;
  OpType op_type() const override { return op_; }
  int64_t sequence_number() const override { return seq_; }
  int64_t start_ns() const override;
  int64_t end_ns() const override;

 private:
  std::shared_ptr<SimWorld> world_;
  Device device_;
  OpType op_;
  int64_t seq_;
  int rank_;
  Milliseconds timeout_;
  int peer_ = -1;
  // guarded by the world lock:
  bool completed_ = false;
  bool comm_on_wait_ = false;
  // The failure as plain data: every wait() and exception() builds its own Error from it, so no
  // exception object is shared between the rank threads (one of which may drop the last reference
  // to this Work while another still reads its error).
  std::optional<Failure> error_;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
};

}  // namespace dpscope::detail
