// MpiBackend: one rank of the `mpi` backend (comm/mpi_backend.hpp) — a process whose tensors live
// on the cpu device and whose collectives are MPI's own (MPI_Iallreduce, MPI_Ibcast, ...).
//
// Every operation goes through run(): check for an earlier failure, send this collective's
// fingerprint (comm/src/sim_state.hpp's, with the group's sequence number) to the right-hand
// neighbour and receive the left-hand one's, issue the nonblocking MPI call, then wait
// (MpiChannel::wait: polling with the timeout, peers' failures). Ranks whose neighbours disagree
// fail with kMismatch naming both fingerprints and tell every peer, so all ranks fail fast; as the
// ring of neighbours connects everyone, any disagreement is seen by at least one rank. The
// fingerprints travel while the collective runs, so the check costs one small message per
// collective, not a round trip before it.
//
// The factory (mpi_factory.cpp) wraps each MpiBackend in an AsyncBackend (async_backend.hpp):
// all_reduce, broadcast and reduce return at once and run on the rank's comm worker, which is how
// DDP's bucket all-reduces overlap backward; every other call also runs there, in call order. So
// every method here runs on the comm worker, except abort() (any thread) and the wait() of a
// send's Work (the rank's thread).
//
// Works: collectives and receives complete before run() returns (their Work is created finished,
// with the host times measured around the MPI call on the comm "stream", i.e. the cpu clock); a
// send's Work completes when MPI_Isend's request does (wait() polls it, with the timeout).
//
// Not yet: explicit algorithms (kRing, kTree, kNaive: our schedules over MPI point-to-point) are
// refused with kInvalidArgument; timing-only (meta) tensors are refused with kUnsupported.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "../sim_state.hpp"
#include "dpscope/comm/backend.hpp"
#include "mpi_channel.hpp"

namespace dpscope::detail {

class MpiBackend final : public Backend {
 public:
  // Rank channel->rank() of the group of `channel`, on `device` (a cpu device); `timeout` > 0.
  // `group_id` names the group in traces (0: the world).
  MpiBackend(std::unique_ptr<MpiChannel> channel, Device device, Milliseconds timeout, int group_id);

  const char* name() const override { return "mpi"; }
  int rank() const override { return channel_->rank(); }
  int size() const override { return channel_->size(); }
  const Device& device() const override { return device_; }
  Milliseconds timeout() const override { return timeout_; }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, const AllreduceOptions& options) override;
  std::shared_ptr<Work> broadcast(Tensor& tensor, const BroadcastOptions& options) override;
  std::shared_ptr<Work> reduce(Tensor& tensor, const ReduceOptions& options) override;
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input, bool flat_output,
                                   const AllgatherOptions& options) override;
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, bool flat_input,
                                       const ReduceScatterOptions& options) override;
  std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& options) override;
  std::shared_ptr<Work> gather(const Tensor& input, std::vector<Tensor>& outputs,
                               const GatherOptions& options) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& options) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, const PointToPointOptions& options) override;
  std::shared_ptr<Work> recv(Tensor& tensor, int src, const PointToPointOptions& options) override;
  std::unique_ptr<Backend> new_group(const std::vector<int>& ranks, const NewGroupOptions& options) override;
  void abort(ErrorKind kind, const std::string& message) override;
  void rank_finished() override;

 private:
  // Issues this rank's part of a collective into `request`; returns MPI's error code.
  using Issue = std::function<int(MPI_Request* request)>;
  // Runs one collective (class comment); `finish` runs after it completed (copy-out, kAvg's
  // division). Failures end up in the returned Work, and `buffers` (every tensor the MPI call
  // reads or writes) are then kept alive for good (keep_forever, mpi_channel.hpp).
  std::shared_ptr<Work> run(const Signature& signature, Milliseconds timeout, std::vector<Tensor> buffers,
                            const Issue& issue, const std::function<void()>& finish = {});
  // The fingerprint fields of `op` on `sizing`; refuses meta tensors and explicit algorithms.
  Signature signature_for(OpType op, const Tensor& sizing, Algorithm algorithm) const;
  Milliseconds limit(Milliseconds timeout) const { return timeout.count() > 0 ? timeout : timeout_; }
  // The collective span and work_completed instant, when the device is traced.
  void trace(const Signature& signature, int64_t seq, int64_t begin_ns, int64_t end_ns) const;

  std::unique_ptr<MpiChannel> channel_;
  Device device_;
  Milliseconds timeout_;
  int group_id_;
  int next_group_id_ = 1;
  std::map<int, int64_t> p2p_sent_;      // peer -> next send sequence number
  std::map<int, int64_t> p2p_received_;  // peer -> next recv sequence number
};

}  // namespace dpscope::detail
