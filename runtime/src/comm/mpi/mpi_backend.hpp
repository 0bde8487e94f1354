// MpiBackend: one rank of the `mpi` backend (comm/mpi_backend.hpp) — a process whose tensors live
// on the cpu device and whose collectives are MPI's own (MPI_Iallreduce, MPI_Ibcast, ...), or, when
// a call or the group's default asks for ring, tree or naive, our own schedules over MPI
// point-to-point (mpi_schedule.hpp): the sim backend's algorithms, with bit-identical results.
//
// Every operation goes through run() (MPI's collective) or run_schedule() (ours): check for an
// earlier failure, send this collective's fingerprint (comm/src/sim_state.hpp's, with the group's
// sequence number) to the right-hand neighbour and receive the left-hand one's, then issue the
// nonblocking MPI call (or the schedule's first step) and wait (MpiChannel::wait: polling with the
// timeout, peers' failures). Ranks whose neighbours disagree fail with kMismatch naming both
// fingerprints and tell every peer, so all ranks fail fast; as the ring of neighbours connects
// everyone, any disagreement is seen by at least one rank. MPI's own collective is issued only once
// the left-hand fingerprint matched (one small message's latency per collective): collectives of
// different sizes matched inside OpenMPI fail there and print OpenMPI's own lines to stderr. A
// schedule's fingerprints travel with its first step (it applies no received data before its check
// passed, and its tags differ per fingerprint).
//
// Which algorithm runs (algorithm_for: collective_choice.hpp's resolve_algorithm, the sim
// backend's rule): the call's, when it names ring, tree or naive (refused, kInvalidArgument, where
// the sim backend has no such schedule: all_gather and reduce_scatter are rings only); else the
// group's default, $DPSCOPE_ALGO read at init (as SimWorld reads it), where the op offers it —
// scatter and gather then run the naive schedule, their only one; else (kAuto, no default) MPI's
// own collective. barrier, new_group and all_to_all_single (MPI_Ialltoall; it offers no algorithm
// to choose) always use MPI's.
//
// The factory (mpi_factory.cpp) wraps each MpiBackend in an AsyncBackend (async/async_backend.hpp):
// all_reduce, broadcast and reduce return at once and run on the rank's comm worker, which is how
// DDP's bucket all-reduces overlap backward; every other call also runs there, in call order. So
// every method here runs on the comm worker, except abort() (any thread) and the wait() of a
// send's Work (the rank's thread).
//
// Works: collectives and receives complete before run() returns (their Work is created finished,
// with the host times measured around the MPI call on the comm "stream", i.e. the cpu clock); a
// send's Work completes when MPI_Isend's request does (wait() polls it, with the timeout).
//
// Traces (a tracer on the device): MPI's collectives get one `collective` span (algorithm `auto`)
// and a `work_completed` instant; schedules get the sim's events — the span, a `transfer` per op
// this rank sends (timed over the step it moved in, carrying src_rank/dst_rank: the peers' process
// ranks, whose files hold their devices), a `reduce` span per reduction, `avg_scale`, the instant.
//
// Not yet: timing-only (meta) tensors are refused with kUnsupported.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "../sim/sim_state.hpp"
#include "dpscope/comm/backend.hpp"
#include "mpi_channel.hpp"
#include "mpi_schedule.hpp"

namespace dpscope::detail {

class MpiBackend final : public Backend {
 public:
  // Rank channel->rank() of the group of `channel`, on `device` (a cpu device); `timeout` > 0.
  // `group_id` names the group in traces (0: the world). `default_algorithm`: what calls that leave
  // the algorithm at kDefault run (kAuto: MPI's own collectives; class comment).
  MpiBackend(std::unique_ptr<MpiChannel> channel, Device device, Milliseconds timeout, int group_id,
             Algorithm default_algorithm = Algorithm::kAuto);

  const char* name() const override { return "mpi"; }
  int rank() const override { return channel_->rank(); }
  int size() const override { return channel_->size(); }
  const Device& device() const override { return device_; }
  Milliseconds timeout() const override { return timeout_; }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, const AllreduceOptions& options) override;
  std::shared_ptr<Work> broadcast(Tensor& tensor, const BroadcastOptions& options) override;
  std::shared_ptr<Work> reduce(Tensor& tensor, const ReduceOptions& options) override;
  // Out of place: MPI's own collectives only (kUnsupported with one of our schedules).
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
  std::shared_ptr<Work> gather(const Tensor& input, std::vector<Tensor>& outputs,
                               const GatherOptions& options) override;
  std::shared_ptr<Work> all_to_all_single(Tensor& output, const Tensor& input,
                                          const AllToAllOptions& options) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& options) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, const PointToPointOptions& options) override;
  std::shared_ptr<Work> recv(Tensor& tensor, int src, const PointToPointOptions& options) override;
  std::unique_ptr<Backend> new_group(const std::vector<int>& ranks, const NewGroupOptions& options) override;
  void abort(ErrorKind kind, const std::string& message) override;
  void rank_finished() override;

 private:
  // Issues this rank's part of a collective into `request`; returns MPI's error code.
  using Issue = std::function<int(MPI_Request* request)>;
  // This collective's fingerprint and its left-hand neighbour's (heap buffers: kept on failure).
  struct Fingerprints;
  // Runs one collective (class comment); `finish` runs after it completed (copy-out, kAvg's
  // division). Failures end up in the returned Work, and `buffers` (every tensor the MPI call
  // reads or writes) are then kept alive for good (keep_forever, mpi_channel.hpp).
  std::shared_ptr<Work> run(const Signature& signature, Milliseconds timeout, std::vector<Tensor> buffers,
                            const Issue& issue, const std::function<void()>& finish = {});
  // The same for our schedule of signature.algorithm (mpi_schedule.hpp) on this rank's logical
  // buffer `buffer` (schedule.hpp's layout over `buffers`), `slices` pipeline slices requested.
  std::shared_ptr<Work> run_schedule(const Signature& signature, Milliseconds timeout, int slices,
                                     std::vector<Tensor> buffers, const RankBuffer& buffer,
                                     const std::function<void()>& finish = {});
  // Posts the exchange of `f` with the neighbours; returns its requests (none in a world of one).
  std::vector<MPI_Request> exchange_fingerprints(Fingerprints& f, const std::string& context);
  // Throws kMismatch, telling every peer, when the left-hand neighbour runs another collective.
  void check_fingerprints(const Fingerprints& f);
  // The fingerprint fields of `op` on `sizing`, with the algorithm that runs it
  // (algorithm_for; nullopt: MPI's own); refuses meta tensors.
  Signature signature_for(OpType op, const Tensor& sizing, Algorithm algorithm) const;
  // The schedule `op` runs for a call asking for `requested` (class comment), or nullopt for MPI's
  // own collective (resolve_algorithm's kAuto); throws kInvalidArgument for an algorithm the op
  // does not offer.
  std::optional<Algorithm> algorithm_for(OpType op, Algorithm requested) const;
  Milliseconds limit(Milliseconds timeout) const { return timeout.count() > 0 ? timeout : timeout_; }
  // The collective span, when the device is traced (algorithm `algo`, `slices` and `steps`).
  void trace_collective(const Signature& signature, int64_t seq, const char* algo, int slices, int steps,
                        int64_t begin_ns, int64_t end_ns) const;
  // The events of an MPI collective (span and work_completed instant), when the device is traced.
  void trace(const Signature& signature, int64_t seq, int64_t begin_ns, int64_t end_ns) const;
  // The process rank of each rank of `sub`, a sub-communicator of this group's (new_group).
  std::vector<int> process_ranks_of(MPI_Comm sub) const;
  // The events of schedule `s` on this rank (class comment), when the device is traced.
  void trace_schedule(const Signature& signature, int64_t seq, const Schedule& s, const ScheduleTimes& times,
                      int64_t begin_ns, int64_t end_ns) const;

  std::unique_ptr<MpiChannel> channel_;
  Device device_;
  Milliseconds timeout_;
  int group_id_;
  Algorithm default_algorithm_;
  std::vector<int> ring_;  // our rings' order: the group's ranks in order (no topology to follow)
  int next_group_id_ = 1;
  std::map<int, int64_t> p2p_sent_;      // peer -> next send sequence number
  std::map<int, int64_t> p2p_received_;  // peer -> next recv sequence number
};

}  // namespace dpscope::detail
