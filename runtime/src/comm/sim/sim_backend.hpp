// SimBackend: the `sim` Backend — one rank of a group of threads sharing a SimWorld — and, with
// the cuda DataPath, the `cuda` backend (the same schedules on device buffers, comm/cuda/).
//
// Every collective goes through run(): fingerprint and buffers are prepared locally, the rank
// joins the group's rendezvous (sim_rendezvous.cpp), the leader plans and traces (sim_plan.cpp),
// every rank executes its data steps (sim_execute.cpp) through the DataPath (data_path.hpp), then
// applies the simulated times to its own streams — or, on a measured data path, the times its
// comm stream's events measured, and traces them itself. Point-to-point ops live in sim_p2p.cpp.
// See sim_state.hpp for the locking rules.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "data_path.hpp"
#include "dpscope/comm/backend.hpp"
#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "sim_state.hpp"

namespace dpscope::detail {

// What one rank brings to a collective.
struct Call {
  OpType op = OpType::kAllReduce;
  Signature signature;
  RankBuffer buffer;
  int slices = 0;
  Milliseconds timeout{0};
  Milliseconds new_group_timeout{0};
  std::shared_ptr<std::byte> scratch;  // reduce (non-roots), reduce_scatter, all_to_all: working copy
  RankBuffer input;                    // out of place: Arrival::input
  bool complete_output = false;        // out of place: Arrival::complete_output
};

struct CallResult {
  std::shared_ptr<SimWork> work;
  std::shared_ptr<const Plan> plan;  // nullptr when the collective failed
};

// ---- sim_rendezvous.cpp ----
// Joins the rendezvous for `seq`; returns the published plan, or the failure this rank reports.
// The last rank to arrive builds the plan (build_plan) before returning.
struct JoinResult {
  std::shared_ptr<Rendezvous> rendezvous;
  std::shared_ptr<const Plan> plan;
  std::optional<Failure> failure;
};
JoinResult join_collective(SimWorld& world, GroupState& group, int rank, int64_t seq, Arrival arrival,
                           Milliseconds timeout);

// ---- sim_plan.cpp ----
// The leader's work: fingerprints agree (else throws kMismatch), build the schedule, time it,
// write the trace (simulated devices only: measured ranks trace themselves, write_measured_trace).
// `arrivals` is complete.
std::shared_ptr<const Plan> build_plan(SimWorld& world, GroupState& group, int64_t seq,
                                       const std::vector<std::optional<Arrival>>& arrivals);
// The trace of a collective whose complete rendezvous failed the leader's check (a mismatch):
// on every rank, a `collective` span from its arrival to `found_ns` (when the last rank arrived
// and the check ran) with `args.error` = `message`, and nothing else: no chunk moved. Each rank's
// span describes its own call (op, bytes, reduce op), so both sides of a mismatch are on the
// timeline (lesson 13). Simulated devices only, like build_plan's trace.
void write_failed_trace(const SimWorld& world, const GroupState& group, int64_t seq,
                        const std::vector<std::optional<Arrival>>& arrivals, int64_t found_ns,
                        const std::string& message);
// A measured rank's trace of one collective: the same events as the simulated trace (collective
// span, a transfer per chunk it received, reduce spans, avg_scale, work_completed), timed by its
// comm stream's events: the collective over [begin_ns, end_ns], each op over its step
// (step_end_ns from execute_steps), the kAvg division over [last step's end, end_ns].
void write_measured_trace(const Plan& plan, int rank, int64_t begin_ns,
                          const std::vector<int64_t>& step_end_ns, int64_t end_ns);

// ---- sim_execute.cpp ----
// Runs this rank's data steps of `plan` (ops it receives) through `path`, a fence and a barrier
// after each step. On a measured path, returns when each step ended on the rank's comm stream
// (one entry per step); else nothing.
std::vector<int64_t> execute_steps(const Plan& plan, Rendezvous& rendezvous, int rank, Milliseconds timeout,
                                   DataPath& path);
// The kernel that combines two chunks for `op`; kAvg sums, and the caller divides at the end.
kernels::Reduction reduction_of(ReduceOp op);

class SimBackend final : public Backend {
 public:
  // `timeout` 0: the group's. `name` is the registry's ("sim", "cuda"); `path` moves the data
  // (null: host memory, the sim backend's).
  SimBackend(std::shared_ptr<SimWorld> world, std::shared_ptr<GroupState> group, int rank,
             Milliseconds timeout = Milliseconds(0), const char* name = "sim",
             std::shared_ptr<DataPath> path = nullptr);

  const char* name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_->global_ranks.size()); }
  const Device& device() const override { return device_; }
  Milliseconds timeout() const override { return timeout_; }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, const AllreduceOptions& options) override;
  std::shared_ptr<Work> broadcast(Tensor& tensor, const BroadcastOptions& options) override;
  std::shared_ptr<Work> reduce(Tensor& tensor, const ReduceOptions& options) override;
  std::shared_ptr<Work> all_reduce_into(Tensor& output, const Tensor& input,
                                        const AllreduceOptions& options) override;
  std::shared_ptr<Work> broadcast_into(Tensor& output, const Tensor& input,
                                       const BroadcastOptions& options) override;
  std::shared_ptr<Work> reduce_into(Tensor& output, const Tensor& input,
                                    const ReduceOptions& options) override;
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input, bool flat_output,
                                   const AllgatherOptions& options) override;
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, bool flat_input,
                                       const ReduceScatterOptions& options) override;
  std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& options) override;
  std::shared_ptr<Work> all_to_all_single(Tensor& output, const Tensor& input,
                                          const AllToAllOptions& options) override;
  std::shared_ptr<Work> gather(const Tensor& input, std::vector<Tensor>& outputs,
                               const GatherOptions& options) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& options) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, const PointToPointOptions& options) override;
  std::shared_ptr<Work> recv(Tensor& tensor, int src, const PointToPointOptions& options) override;
  std::unique_ptr<Backend> new_group(const std::vector<int>& ranks, const NewGroupOptions& options) override;
  void abort(ErrorKind kind, const std::string& message) override;
  void rank_finished() override;

 private:
  // Joins, executes and times one collective; `finish` runs on this rank after the data steps
  // (copy-out, kAvg division: their simulated cost is already in the plan).
  CallResult run(Call& call, const std::function<void(const Plan&)>& finish = {});
  // The in-place (`input` null) and out-of-place forms of all_reduce, broadcast and reduce.
  std::shared_ptr<Work> all_reduce_impl(Tensor& tensor, const Tensor* input, const AllreduceOptions& options);
  std::shared_ptr<Work> broadcast_impl(Tensor& tensor, const Tensor* input, const BroadcastOptions& options);
  std::shared_ptr<Work> reduce_impl(Tensor& tensor, const Tensor* input, const ReduceOptions& options);
  Signature signature_for(OpType op, const Tensor& sizing, std::optional<Algorithm> algorithm) const;
  // resolve_algorithm (collective_choice.hpp) with the world's default algorithm.
  Algorithm algorithm_for(OpType op, Algorithm requested) const;
  Milliseconds timeout_or_default(Milliseconds timeout) const;

  std::shared_ptr<SimWorld> world_;
  std::shared_ptr<GroupState> group_;
  const char* name_;
  std::shared_ptr<DataPath> path_;
  int rank_;
  Device device_;
  Milliseconds timeout_;
  int64_t next_seq_ = 0;
  std::map<int, int64_t> p2p_sent_;      // peer -> next send sequence number
  std::map<int, int64_t> p2p_received_;  // peer -> next recv sequence number
};

// The first byte of a tensor's data (nullptr for meta tensors and empty ones).
std::byte* raw_data(const Tensor& tensor);

}  // namespace dpscope::detail
