// The `nccl` process-group backend: NCCL on one physical GPU per rank: rank threads of one
// process, over a world made by make_cuda_world(world_size), or one process per rank (`dpscope
// launch`), each over a world of its own one device (make_cuda_world(1, ..., local_rank)). Rank 0's
// ncclUniqueId reaches the others through the init Store (a TCPStore across processes); each rank sets its
// GPU and joins a non-blocking communicator. Every collective is enqueued on the rank's comm stream after it
// waited for the compute stream, then the rank polls cudaStreamQuery and ncclCommGetAsyncError until the work
// is done: on the timeout, an async error or a failed peer it calls ncclCommAbort and fails the Work naming
// the rank and the collective, so nothing ever hangs. Times are measured with CUDA events around the call.
// NCCL matches collectives by call order only; with DPSCOPE_DISTRIBUTED_DEBUG=DETAIL the factory wraps
// the backend in FingerprintCheck (api/fingerprint_check.hpp): ranks that call different collectives
// then fail with one kMismatch line instead of hanging.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string_view>
#include <thread>

#include "../api/fingerprint_check.hpp"
#include "cuda_check.hpp"
#include "dpscope/comm/gpu_backends.hpp"
#include "dpscope/comm/store.hpp"
#include "factories.hpp"

namespace dpscope::detail {
namespace {

// The table behind nccl_reduce_op_name / nccl_dtype_name (comm/gpu_backends.hpp).
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
  }
  return ncclSum;
}

ncclDataType_t nccl_type(DType dtype) { return dtype == DType::kI64 ? ncclInt64 : ncclFloat32; }

std::byte* data_of(const Tensor& t) { return raw_data(t); }

// The Work of the nccl backend. Collectives and receives are waited for before the call returns
// (with the timeout), so their Work is created finished. A send is *pending* until it is issued:
// with the next receive (in one NCCL group, so a ring of send-then-recv cannot deadlock on the
// ordered comm stream), before the next collective, or by its own wait().
class NcclWork final : public Work {
 public:
  NcclWork(OpType op, int64_t seq) : op_(op), seq_(seq) {}
  void complete(int64_t start_ns, int64_t end_ns) {
    start_ns_ = start_ns;
    end_ns_ = end_ns;
    issue_ = nullptr;
  }
  void fail(const Error& error) {
    error_ = std::make_exception_ptr(error);
    issue_ = nullptr;
  }
  // Pending until `issue` ran (it completes or fails this work).
  void set_pending(std::function<void()> issue) { issue_ = std::move(issue); }

  void wait() override {
    if (issue_) {
      const std::function<void()> issue = issue_;  // issue_ is cleared when it completes
      issue();
    }
    if (error_) std::rethrow_exception(error_);
  }
  bool is_completed() const override { return issue_ == nullptr; }
  bool is_success() const override { return issue_ == nullptr && error_ == nullptr; }
  std::exception_ptr exception() const override { return error_; }
  OpType op_type() const override { return op_; }
  int64_t sequence_number() const override { return seq_; }
  int64_t start_ns() const override { return start_ns_; }
  int64_t end_ns() const override { return end_ns_; }

 private:
  OpType op_;
  int64_t seq_;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  std::exception_ptr error_;
  std::function<void()> issue_;
};

// A send waiting to be issued (NcclWork).
struct PendingSend {
  Tensor tensor;
  int dst = 0;
  std::shared_ptr<NcclWork> work;
};

class NcclBackend final : public Backend {
 public:
  // Rank `rank` of the world group, joining the communicator of `id`.
  NcclBackend(std::shared_ptr<SimWorld> world, int rank, Milliseconds timeout, const ncclUniqueId& id)
      : NcclBackend(world, all_ranks(world->size()), rank, timeout) {
    cuda::make_current(device_.impl());
    ncclConfig_t config = non_blocking();
    check_nccl(ncclCommInitRankConfig(&comm_, size(), id, rank_, &config), "ncclCommInitRankConfig", device_,
               comm_);
    settle("init (ncclCommInitRankConfig)");
  }

  // Group rank `rank` of a sub-group of `parent` (ncclCommSplit, which every parent rank calls).
  NcclBackend(const NcclBackend& parent, std::vector<int> global_ranks, int rank, Milliseconds timeout,
              ncclComm_t comm)
      : NcclBackend(parent.world_, std::move(global_ranks), rank, timeout) {
    comm_ = comm;
    settle("new_group (ncclCommSplit)");
  }

  NcclBackend(const NcclBackend&) = delete;  // owns its communicator
  NcclBackend& operator=(const NcclBackend&) = delete;

  ~NcclBackend() override {
    for (PendingSend& p : pending_)
      p.work->fail(
          Error(ErrorKind::kMismatch,
                fmt::format("[Rank {}] nccl SEND (SequenceNumber={}) to rank {} was never issued: its "
                            "group was destroyed first",
                            rank_, p.work->sequence_number(), p.dst)));
    if (comm_ == nullptr || aborted_) return;  // ncclCommAbort freed it
    try {
      cuda::make_current(device_.impl());
    } catch (const Error&) {
      // A destructor cannot report it; NCCL calls below name the communicator, not the device.
    }
    // Finalizing flushes outstanding work; a communicator that cannot flush within the timeout
    // is aborted instead of waited on.
    ncclResult_t state = ncclCommFinalize(comm_);
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess) {
      static_cast<void>(ncclCommDestroy(comm_));
    } else {
      static_cast<void>(ncclCommAbort(comm_));
    }
  }

  const char* name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(global_ranks_.size()); }
  const Device& device() const override { return device_; }
  Milliseconds timeout() const override { return timeout_; }

  std::shared_ptr<Work> all_reduce(Tensor& t, const AllreduceOptions& o) override {
    return run(OpType::kAllReduce, o.timeout, [&](cudaStream_t s) {
      return ncclAllReduce(data_of(t), data_of(t), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                           nccl_op(o.op), comm_, s);
    });
  }
  std::shared_ptr<Work> broadcast(Tensor& t, const BroadcastOptions& o) override {
    return run(OpType::kBroadcast, o.timeout, [&](cudaStream_t s) {
      return ncclBroadcast(data_of(t), data_of(t), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                           o.root, comm_, s);
    });
  }
  std::shared_ptr<Work> reduce(Tensor& t, const ReduceOptions& o) override {
    // Non-roots keep their tensor (as on sim): NCCL writes only the root's receive buffer.
    return run(OpType::kReduce, o.timeout, [&](cudaStream_t s) {
      return ncclReduce(data_of(t), data_of(t), static_cast<size_t>(t.numel()), nccl_type(t.dtype()),
                        nccl_op(o.op), o.root, comm_, s);
    });
  }
  // Out of place: NCCL's own form (sendbuff != recvbuff), nothing copied first.
  std::shared_ptr<Work> all_reduce_into(Tensor& out, const Tensor& in, const AllreduceOptions& o) override {
    return run(OpType::kAllReduce, o.timeout, [&](cudaStream_t s) {
      return ncclAllReduce(data_of(in), data_of(out), static_cast<size_t>(out.numel()),
                           nccl_type(out.dtype()), nccl_op(o.op), comm_, s);
    });
  }
  std::shared_ptr<Work> broadcast_into(Tensor& out, const Tensor& in, const BroadcastOptions& o) override {
    return run(OpType::kBroadcast, o.timeout, [&](cudaStream_t s) {
      return ncclBroadcast(data_of(in), data_of(out), static_cast<size_t>(out.numel()),
                           nccl_type(out.dtype()), o.root, comm_, s);
    });
  }
  std::shared_ptr<Work> reduce_into(Tensor& out, const Tensor& in, const ReduceOptions& o) override {
    return run(OpType::kReduce, o.timeout, [&](cudaStream_t s) {
      return ncclReduce(data_of(in), data_of(out), static_cast<size_t>(out.numel()), nccl_type(out.dtype()),
                        nccl_op(o.op), o.root, comm_, s);
    });
  }
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input, bool flat_output,
                                   const AllgatherOptions& o) override {
    const uint64_t block = input.nbytes();
    Tensor flat = flat_output ? outputs[0]
                              : Tensor::empty({input.numel() * size()}, device_, MemoryCategory::kBuffers,
                                              input.dtype());
    return run(OpType::kAllGather, o.timeout, [&](cudaStream_t s) {
      ncclResult_t r = ncclAllGather(data_of(input), data_of(flat), static_cast<size_t>(input.numel()),
                                     nccl_type(input.dtype()), comm_, s);
      if (!flat_output && block > 0)
        for (int k = 0; k < size() && (r == ncclSuccess || r == ncclInProgress); ++k)
          check_cuda(cudaMemcpyAsync(data_of(outputs[k]), data_of(flat) + block * k, block,
                                     cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpyAsync (all_gather output)", device_);
      return r;
    });
  }
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, bool flat_input,
                                       const ReduceScatterOptions& o) override {
    const uint64_t block = output.nbytes();
    Tensor flat = flat_input ? inputs[0]
                             : Tensor::empty({output.numel() * size()}, device_, MemoryCategory::kBuffers,
                                             output.dtype());
    return run(OpType::kReduceScatter, o.timeout, [&](cudaStream_t s) {
      if (!flat_input && block > 0)
        for (int k = 0; k < size(); ++k)
          check_cuda(cudaMemcpyAsync(data_of(flat) + block * k, data_of(inputs[k]), block,
                                     cudaMemcpyDeviceToDevice, s),
                     "cudaMemcpyAsync (reduce_scatter input)", device_);
      return ncclReduceScatter(data_of(flat), data_of(output), static_cast<size_t>(output.numel()),
                               nccl_type(output.dtype()), nccl_op(o.op), comm_, s);
    });
  }
  std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& o) override {
    return run(OpType::kScatter, o.timeout, [&](cudaStream_t s) {
      const size_t count = static_cast<size_t>(output.numel());
      return grouped([&]() -> ncclResult_t {
        if (rank_ == o.root) {
          for (int k = 0; k < size(); ++k) {
            if (k == rank_) {
              if (count > 0)
                check_cuda(cudaMemcpyAsync(data_of(output), data_of(inputs[k]), output.nbytes(),
                                           cudaMemcpyDeviceToDevice, s),
                           "cudaMemcpyAsync (scatter)", device_);
              continue;
            }
            const ncclResult_t r =
                ncclSend(data_of(inputs[k]), count, nccl_type(output.dtype()), k, comm_, s);
            if (r != ncclSuccess && r != ncclInProgress) return r;
          }
          return ncclSuccess;
        }
        return ncclRecv(data_of(output), count, nccl_type(output.dtype()), o.root, comm_, s);
      });
    });
  }
  // As NCCL's own alltoall is written: in one group, a send of block k to rank k and a receive of
  // rank k's block into output block k, for every peer; this rank's own block is a local copy.
  std::shared_ptr<Work> all_to_all_single(Tensor& output, const Tensor& input,
                                          const AllToAllOptions& o) override {
    const size_t count = static_cast<size_t>(input.numel() / size());
    const uint64_t block = count * element_size(input.dtype());
    // NCCL would read blocks of an output that it is overwriting: work from a copy then.
    const bool in_place = data_of(output) == data_of(input);
    Tensor from = in_place && block > 0
                      ? Tensor::empty({input.numel()}, device_, MemoryCategory::kBuffers, input.dtype())
                      : input;
    return run(OpType::kAllToAll, o.timeout, [&](cudaStream_t s) {
      if (in_place && block > 0)
        check_cuda(
            cudaMemcpyAsync(data_of(from), data_of(input), block * size(), cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync (all_to_all input)", device_);
      if (block > 0)
        check_cuda(cudaMemcpyAsync(data_of(output) + block * rank_, data_of(from) + block * rank_, block,
                                   cudaMemcpyDeviceToDevice, s),
                   "cudaMemcpyAsync (all_to_all own block)", device_);
      return grouped([&]() -> ncclResult_t {
        for (int k = 0; k < size(); ++k) {
          if (k == rank_) continue;
          ncclResult_t r = ncclSend(data_of(from) + block * k, count, nccl_type(input.dtype()), k, comm_, s);
          if (r != ncclSuccess && r != ncclInProgress) return r;
          r = ncclRecv(data_of(output) + block * k, count, nccl_type(output.dtype()), k, comm_, s);
          if (r != ncclSuccess && r != ncclInProgress) return r;
        }
        return ncclSuccess;
      });
    });
  }
  std::shared_ptr<Work> gather(const Tensor& input, std::vector<Tensor>& outputs,
                               const GatherOptions& o) override {
    return run(OpType::kGather, o.timeout, [&](cudaStream_t s) {
      const size_t count = static_cast<size_t>(input.numel());
      return grouped([&]() -> ncclResult_t {
        if (rank_ == o.root) {
          for (int k = 0; k < size(); ++k) {
            if (k == rank_) {
              if (count > 0)
                check_cuda(cudaMemcpyAsync(data_of(outputs[k]), data_of(input), input.nbytes(),
                                           cudaMemcpyDeviceToDevice, s),
                           "cudaMemcpyAsync (gather)", device_);
              continue;
            }
            const ncclResult_t r =
                ncclRecv(data_of(outputs[k]), count, nccl_type(input.dtype()), k, comm_, s);
            if (r != ncclSuccess && r != ncclInProgress) return r;
          }
          return ncclSuccess;
        }
        return ncclSend(data_of(input), count, nccl_type(input.dtype()), o.root, comm_, s);
      });
    });
  }
  std::shared_ptr<Work> barrier(const BarrierOptions& o) override {
    // NCCL has no barrier: an all-reduce of one element is one.
    Tensor token = Tensor::zeros({1}, device_, MemoryCategory::kBuffers);
    return run(OpType::kBarrier, o.timeout, [&](cudaStream_t s) {
      return ncclAllReduce(data_of(token), data_of(token), 1, ncclFloat32, ncclSum, comm_, s);
    });
  }
  // Tags are not matched: NCCL orders messages per peer, as the sim backend does per (peer, tag).
  std::shared_ptr<Work> send(const Tensor& t, int dst, const PointToPointOptions& o) override {
    auto work = std::make_shared<NcclWork>(OpType::kSend, p2p_sent_[dst]++);
    work->set_pending([this, timeout = o.timeout] { flush_sends(timeout); });
    pending_.push_back({t, dst, work});
    return work;
  }
  std::shared_ptr<Work> recv(Tensor& t, int src, const PointToPointOptions& o) override {
    return run(
        OpType::kRecv, o.timeout,
        [&](cudaStream_t s) {
          return ncclRecv(data_of(t), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), src, comm_, s);
        },
        p2p_received_[src]++, /*with_sends=*/true);
  }

  std::unique_ptr<Backend> new_group(const std::vector<int>& ranks, const NewGroupOptions& options) override {
    const auto it = std::find(ranks.begin(), ranks.end(), rank_);
    const bool member = it != ranks.end();
    DPS_CHECK(!aborted_, ErrorKind::kDevice,
              "[Rank {}] nccl new_group failed: the communicator was aborted by an "
              "earlier failure",
              rank_);
    cuda::make_current(device_.impl());
    ncclConfig_t config = non_blocking();
    ncclComm_t sub = nullptr;
    check_nccl(ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, rank_, &sub, &config), "ncclCommSplit",
               device_, comm_);
    wait_for("new_group (ncclCommSplit)", nullptr, timeout_);  // the parent's side of the split
    if (!member) return nullptr;
    std::vector<int> global;
    for (int r : ranks) global.push_back(global_ranks_[r]);
    return std::make_unique<NcclBackend>(*this, std::move(global), static_cast<int>(it - ranks.begin()),
                                         options.timeout.count() > 0 ? options.timeout : timeout_, sub);
  }

  void abort(ErrorKind kind, const std::string& message) override {
    world_->abort(slot_of(global_ranks_[rank_]), kind, message);
    abort_comm();
  }
  void rank_finished() override { world_->rank_finished(slot_of(global_ranks_[rank_])); }

 private:
  NcclBackend(std::shared_ptr<SimWorld> world, std::vector<int> global_ranks, int rank, Milliseconds timeout)
      : world_(std::move(world)),
        global_ranks_(std::move(global_ranks)),
        rank_(rank),
        device_(world_->device(slot_of(global_ranks_[rank]))),
        timeout_(timeout.count() > 0 ? timeout : world_->timeout()) {}

  // Where world rank `r` lives in world_: its own slot when the world holds every rank (rank
  // threads), slot 0 when it holds this process's rank alone (one process per rank; a peer's
  // failure then reaches this rank through NCCL's async error or the timeout, not through world_).
  int slot_of(int r) const { return world_->size() == 1 ? 0 : r; }

  static std::vector<int> all_ranks(int n) {
    std::vector<int> ranks(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) ranks[static_cast<size_t>(r)] = r;
    return ranks;
  }

  // Non-blocking communicators: init and collectives return at once, and wait_for() bounds every
  // wait, so nothing here can block past the timeout.
  static ncclConfig_t non_blocking() {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    return config;
  }

  // Waits for the communicator's creation; on failure aborts it before the error leaves the
  // constructor (the destructor does not run then).
  void settle(const std::string& what) {
    try {
      wait_for(what, nullptr, timeout_);
    } catch (...) {
      abort_comm();
      throw;
    }
  }
  // Runs `issue` inside ncclGroupStart/End (several sends and receives as one operation).
  ncclResult_t grouped(const std::function<ncclResult_t()>& issue) {
    check_nccl(ncclGroupStart(), "ncclGroupStart", device_, comm_);
    const ncclResult_t issued = issue();
    const ncclResult_t ended = ncclGroupEnd();
    return issued != ncclSuccess && issued != ncclInProgress ? issued : ended;
  }

  void abort_comm() {
    if (aborted_ || comm_ == nullptr) return;
    aborted_ = true;
    static_cast<void>(ncclCommAbort(comm_));
  }

  // Throws the failure of `what` (the collective and its sequence number) on this rank, aborting
  // the communicator: "[Rank 1] nccl ALLREDUCE (SequenceNumber=3) failed: <why>".
  [[noreturn]] void fail(const std::string& what, ErrorKind kind, const std::string& why) {
    abort_comm();
    throw Error(kind, fmt::format("[Rank {}] nccl {} failed: {}", rank_, what, why));
  }

  // Polls until `stream` (null: the communicator's init) has finished, failing on an async NCCL
  // error, a failed peer (the world was aborted) or `limit`.
  void wait_for(const std::string& what, cudaStream_t stream, Milliseconds limit) {
    const auto begun = std::chrono::steady_clock::now();
    for (;;) {
      ncclResult_t async = ncclSuccess;
      const ncclResult_t got = ncclCommGetAsyncError(comm_, &async);
      if (got != ncclSuccess)
        fail(what, ErrorKind::kDevice, fmt::format("ncclCommGetAsyncError: {}", ncclGetErrorString(got)));
      if (async != ncclSuccess && async != ncclInProgress)
        fail(what, ErrorKind::kDevice,
             fmt::format("NCCL reported {}: {}", ncclGetErrorString(async), ncclGetLastError(comm_)));
      if (async == ncclSuccess) {
        if (stream == nullptr) return;
        const cudaError_t query = cudaStreamQuery(stream);
        if (query == cudaSuccess) return;
        if (query != cudaErrorNotReady)
          fail(what, ErrorKind::kDevice,
               fmt::format("cudaStreamQuery on {}: {} ({})", device_.name(), cudaGetErrorString(query),
                           cudaGetErrorName(query)));
      }
      if (const std::optional<RankFailure> failure = world_->first_failure();
          failure && failure->rank != slot_of(global_ranks_[rank_]))
        fail(what, failure->kind,
             fmt::format("aborted because rank {} failed: {}", failure->rank, failure->message));
      const auto elapsed = std::chrono::duration_cast<Milliseconds>(std::chrono::steady_clock::now() - begun);
      if (elapsed >= limit)
        fail(what, ErrorKind::kTimeout,
             fmt::format("Watchdog caught collective operation timeout: it ran for {} milliseconds "
                         "(Timeout(ms)={})",
                         elapsed.count(), limit.count()));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Enqueues `issue` on the comm stream (after the compute stream's work), waits for it and
  // returns a completed Work holding the measured interval or the failure.
  // Issues the pending sends alone (a send's wait(), or before a collective).
  void flush_sends(Milliseconds timeout) {
    if (!pending_.empty())
      run(OpType::kSend, timeout, nullptr, pending_.front().work->sequence_number(), true);
  }

  // Enqueues `issue` on the comm stream (after the compute stream's work), waits for it and
  // returns a completed Work holding the measured interval or the failure. `with_sends`: the
  // pending sends go in the same NCCL group and share the outcome; otherwise they are issued
  // first. `seq` < 0: the group's next collective sequence number.
  std::shared_ptr<Work> run(OpType op, Milliseconds timeout,
                            const std::function<ncclResult_t(cudaStream_t)>& issue, int64_t seq = -1,
                            bool with_sends = false) {
    if (!with_sends) flush_sends(timeout);
    std::vector<PendingSend> sends;
    if (with_sends) sends.swap(pending_);
    auto work = issue ? std::make_shared<NcclWork>(op, seq >= 0 ? seq : next_seq_++) : nullptr;
    const std::string what =
        fmt::format("{} (SequenceNumber={})", to_string(op),
                    work ? work->sequence_number() : sends.front().work->sequence_number());
    auto fail_all = [&](const Error& e) {
      if (work) work->fail(e);
      for (PendingSend& p : sends) p.work->fail(e);
    };
    try {
      if (aborted_)
        throw Error(ErrorKind::kDevice,
                    fmt::format("[Rank {}] nccl {} failed: the communicator was aborted by "
                                "an earlier failure",
                                rank_, what));
      comm_waits_for_compute(device_);
      const cudaStream_t stream = comm_stream(device_);
      const Event begin = device_.record(StreamKind::kComm);
      const ncclResult_t issued = sends.empty() ? issue(stream) : grouped([&]() -> ncclResult_t {
        for (const PendingSend& p : sends) {
          const ncclResult_t r = ncclSend(data_of(p.tensor), static_cast<size_t>(p.tensor.numel()),
                                          nccl_type(p.tensor.dtype()), p.dst, comm_, stream);
          if (r != ncclSuccess && r != ncclInProgress) return r;
        }
        return issue ? issue(stream) : ncclSuccess;
      });
      if (issued != ncclSuccess && issued != ncclInProgress)
        fail(what, ErrorKind::kDevice, fmt::format("issuing it: {}", ncclGetErrorString(issued)));
      wait_for(what, stream, timeout.count() > 0 ? timeout : timeout_);
      const Event end = device_.record(StreamKind::kComm);
      const int64_t end_ns = begin.ts_ns + device_.elapsed_ns(begin, end);
      if (work) work->complete(begin.ts_ns, end_ns);
      for (PendingSend& p : sends) p.work->complete(begin.ts_ns, end_ns);
    } catch (const Error& e) {
      fail_all(e);
    }
    return work;
  }

  std::shared_ptr<SimWorld> world_;
  std::vector<int> global_ranks_;  // group rank -> world rank
  int rank_;
  Device device_;
  Milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  int64_t next_seq_ = 0;
  std::vector<PendingSend> pending_;     // sends not issued yet, in call order
  std::map<int, int64_t> p2p_sent_;      // peer -> next send sequence number
  std::map<int, int64_t> p2p_received_;  // peer -> next recv sequence number
};

constexpr const char* kUniqueIdKey = "dpscope/nccl/unique_id/";

}  // namespace

BackendFactory nccl_backend_factory() {
  return [](const InitOptions& options) -> std::unique_ptr<Backend> {
    cuda::require_available("init_process_group(\"nccl\")");
    // Rank threads share a world of every rank's device; a process of one rank has a world of its
    // own device (its peers' GPUs may be on other machines, so only NCCL can check them).
    const bool one_process_per_rank =
        options.world != nullptr && options.world->size() == 1 && options.world_size > 1;
    if (!one_process_per_rank) {
      const std::string problem = nccl_world_size_problem(options.world_size, cuda::physical_device_count());
      DPS_CHECK(problem.empty(), ErrorKind::kInvalidArgument, "{}", problem);
    }
    DPS_CHECK(
        options.world != nullptr && (options.world->size() == options.world_size || one_process_per_rank),
        ErrorKind::kInvalidArgument,
        "init_process_group(\"nccl\"): options.world must hold the {} ranks' cuda devices "
        "(make_cuda_world(world_size)), or this process's one device when each rank is a process",
        options.world_size);
    DPS_CHECK(options.store != nullptr, ErrorKind::kInvalidArgument,
              "init_process_group(\"nccl\"): options.store is required (rank 0 shares its ncclUniqueId "
              "through it)");
    const Device& device = options.world->device(one_process_per_rank ? 0 : options.rank);
    DPS_CHECK(device.kind() == DeviceKind::kCuda, ErrorKind::kInvalidArgument,
              "init_process_group(\"nccl\"): rank {} is on {}, not a cuda device", options.rank,
              device.name());
    Store& store = *options.store;
    const Milliseconds timeout = options.timeout.count() > 0 ? options.timeout : store.timeout();
    // One id per init round (ranks that init again on the same store get a fresh one).
    const int64_t round = store.add(fmt::format("{}rank{}/rounds", kUniqueIdKey, options.rank), 1);
    const std::string key = fmt::format("{}round{}", kUniqueIdKey, round);
    ncclUniqueId id;
    if (options.rank == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", device);
      StoreBytes bytes(sizeof(id.internal));
      std::memcpy(bytes.data(), id.internal, sizeof(id.internal));
      store.set(key, bytes);
    } else {
      const StoreBytes bytes = store.get(key, timeout);
      DPS_CHECK(bytes.size() == sizeof(id.internal), ErrorKind::kMismatch,
                "init_process_group(\"nccl\"): rank {} read a ncclUniqueId of {} bytes, expected {}",
                options.rank, bytes.size(), sizeof(id.internal));
      std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
    }
    device.set_rank(options.rank);
    auto backend = std::make_unique<NcclBackend>(options.world, options.rank, options.timeout, id);
    // NCCL matches calls by order only. Comparing each collective first, through the store, makes
    // every call wait for all ranks on the host (NCCL's own calls do not), so it is asked for, as
    // PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL asks for its wrapper.
    if (const char* debug = std::getenv("DPSCOPE_DISTRIBUTED_DEBUG");
        debug != nullptr && std::string_view(debug) == "DETAIL") {
      return with_fingerprint_check(std::move(backend), options.store,
                                    fmt::format("dpscope/nccl/fingerprint/round{}/", round));
    }
    return backend;
  };
}

}  // namespace dpscope::detail
