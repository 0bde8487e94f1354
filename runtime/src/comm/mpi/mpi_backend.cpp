// MpiBackend's operations (mpi_backend.hpp): each one maps its tensors onto one nonblocking MPI
// call and lets run() fingerprint, issue, wait and time it.
//
// Sections: Work; helpers; run() and tracing; collectives; point to point; groups and failures.
#include "mpi_backend.hpp"

#include <array>
#include <climits>
#include <cstring>

#include "../sim_backend.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "dpscope/trace/recorder.hpp"

namespace dpscope::detail {
namespace {

using Clock = std::chrono::steady_clock;

// ---- Work ----

// A collective's or receive's Work is finished when created; a send's completes in wait(), which
// runs `pending` (polling its request) once.
class MpiWork final : public Work {
 public:
  MpiWork(OpType op, int64_t seq) : op_(op), seq_(seq) {}

  void complete(int64_t start_ns, int64_t end_ns) {
    std::lock_guard lock(mutex_);
    start_ns_ = start_ns;
    end_ns_ = end_ns;
    done_ = true;
  }
  void fail(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
    done_ = true;
  }
  void set_pending(std::function<void()> pending) { pending_ = std::move(pending); }

  void wait() override {
    std::function<void()> pending;
    {
      std::lock_guard lock(mutex_);
      pending.swap(pending_);
    }
    if (pending) pending();  // completes or fails this Work
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }
  bool is_completed() const override {
    std::lock_guard lock(mutex_);
    return done_;
  }
  bool is_success() const override {
    std::lock_guard lock(mutex_);
    return done_ && error_ == nullptr;
  }
  std::exception_ptr exception() const override {
    std::lock_guard lock(mutex_);
    return error_;
  }
  OpType op_type() const override { return op_; }
  int64_t sequence_number() const override { return seq_; }
  int64_t start_ns() const override {
    std::lock_guard lock(mutex_);
    return start_ns_;
  }
  int64_t end_ns() const override {
    std::lock_guard lock(mutex_);
    return end_ns_;
  }

 private:
  const OpType op_;
  const int64_t seq_;
  mutable std::mutex mutex_;
  bool done_ = false;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  std::exception_ptr error_;
  std::function<void()> pending_;
};

// ---- helpers ----

MPI_Datatype mpi_type(DType dtype) { return dtype == DType::kI64 ? MPI_INT64_T : MPI_FLOAT; }

// kAvg is a sum followed by a division (finish of the collective), as on every backend.
MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kProduct: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
  }
  return MPI_SUM;
}

// MPI counts are ints.
int count_of(int64_t numel, OpType op) {
  DPS_CHECK(numel <= INT_MAX, ErrorKind::kUnsupported,
            "{} on backend 'mpi': {} elements is more than MPI's int count can hold ({})", api_name(op),
            numel, INT_MAX);
  return static_cast<int>(numel);
}

// A flat scratch tensor of `blocks` blocks shaped like `like` (list forms of all_gather, ...).
Tensor flat_buffer(const Tensor& like, int blocks, const Device& device) {
  return Tensor::empty({like.numel() * blocks}, device, MemoryCategory::kBuffers, like.dtype());
}

// Copies `bytes` from src to dst (either may be null when bytes is 0).
void copy_bytes(std::byte* dst, const std::byte* src, uint64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

// Bytes a collective is named by in traces (nccl-tests' size: all ranks' buffers for
// all_gather, reduce_scatter, scatter and gather), as the sim backend names them.
uint64_t traced_bytes(const Signature& sig, int n) {
  if (sig.op == OpType::kBarrier || sig.op == OpType::kNewGroup) return 0;
  const uint64_t bytes = static_cast<uint64_t>(shape_numel(sig.shape)) * element_size(sig.dtype);
  switch (sig.op) {
    case OpType::kAllGather:
    case OpType::kReduceScatter:
    case OpType::kScatter:
    case OpType::kGather: return bytes * static_cast<uint64_t>(n);
    default: return bytes;
  }
}

constexpr size_t kFingerprintBytes = 384;
using FingerprintBuffer = std::array<char, kFingerprintBytes>;

FingerprintBuffer to_buffer(const std::string& text) {
  FingerprintBuffer buffer{};
  std::memcpy(buffer.data(), text.data(), std::min(text.size(), buffer.size() - 1));
  return buffer;
}

}  // namespace

MpiBackend::MpiBackend(std::unique_ptr<MpiChannel> channel, Device device, Milliseconds timeout, int group_id)
    : channel_(std::move(channel)), device_(std::move(device)), timeout_(timeout), group_id_(group_id) {
  DPS_ASSERT(timeout_.count() > 0, "MpiBackend needs a positive timeout");
}

// ---- run() and tracing ----

Signature MpiBackend::signature_for(OpType op, const Tensor& sizing, Algorithm algorithm) const {
  DPS_CHECK(algorithm == Algorithm::kDefault || algorithm == Algorithm::kAuto, ErrorKind::kInvalidArgument,
            "{}: algorithm '{}' is not available on backend 'mpi' (available: auto, MPI's own collectives)",
            api_name(op), to_string(algorithm));
  Signature sig{.op = op};
  if (op != OpType::kBarrier && op != OpType::kNewGroup) {
    DPS_CHECK(
        sizing.has_data(), ErrorKind::kUnsupported,
        "{} on backend 'mpi': timing-only (meta) tensors are not supported: an mpi rank moves real data",
        api_name(op));
    sig.dtype = sizing.dtype();
    sig.shape = sizing.shape();
  }
  return sig;
}

std::shared_ptr<Work> MpiBackend::run(const Signature& sig, Milliseconds timeout, std::vector<Tensor> buffers,
                                      const Issue& issue, const std::function<void()>& finish) {
  const int64_t seq = channel_->next_seq();
  auto work = std::make_shared<MpiWork>(sig.op, seq);
  const WaitFor what{.op = sig.op, .seq = seq};
  const Milliseconds wait_limit = limit(timeout);
  const int n = size();
  // Mine (sent right) and the left neighbour's (received): heap buffers, kept on failure.
  auto fingerprints = std::make_shared<std::pair<FingerprintBuffer, FingerprintBuffer>>();
  try {
    channel_->throw_if_failed(what);
    const auto begun = Clock::now();
    const Event begin = device_.record(StreamKind::kComm);
    const std::string context = channel_->failure_message(what, "issuing it");
    FingerprintBuffer& mine = fingerprints->first;
    FingerprintBuffer& theirs = fingerprints->second;
    mine = to_buffer(fingerprint(sig, seq));
    std::vector<MPI_Request> exchange;
    if (n > 1) {
      exchange.assign(2, MPI_REQUEST_NULL);
      check_mpi(MPI_Isend(mine.data(), kFingerprintBytes, MPI_CHAR, (rank() + 1) % n, kFingerprintTag,
                          channel_->comm(), &exchange[0]),
                "MPI_Isend (fingerprint)", context);
      check_mpi(MPI_Irecv(theirs.data(), kFingerprintBytes, MPI_CHAR, (rank() + n - 1) % n, kFingerprintTag,
                          channel_->comm(), &exchange[1]),
                "MPI_Irecv (fingerprint)", context);
    }
    std::vector<MPI_Request> collective(1, MPI_REQUEST_NULL);
    check_mpi(issue(&collective[0]), "the nonblocking MPI call", context);
    channel_->wait(exchange, what, wait_limit, nullptr, begun);
    if (n > 1 && mine != theirs) {
      const std::string message = fmt::format(
          "Detected mismatch between collectives on ranks. Rank {} is running collective: {}, but "
          "Rank {} is running collective: {}",
          (rank() + n - 1) % n, theirs.data(), rank(), mine.data());
      channel_->fail_and_notify({ErrorKind::kMismatch, message});
      throw Error(ErrorKind::kMismatch, message);
    }
    channel_->wait(collective, what, wait_limit, nullptr, begun);
    channel_->completed(seq);
    if (finish) finish();
    const Event end = device_.record(StreamKind::kComm);
    work->complete(begin.ts_ns, end.ts_ns);
    trace(sig, seq, begin.ts_ns, end.ts_ns);
  } catch (const Error&) {
    keep_forever(std::make_shared<std::vector<Tensor>>(std::move(buffers)));
    keep_forever(fingerprints);
    work->fail(std::current_exception());
  }
  return work;
}

void MpiBackend::trace(const Signature& sig, int64_t seq, int64_t begin_ns, int64_t end_ns) const {
  TraceSink* t = device_.tracer();
  if (t == nullptr || sig.op == OpType::kNewGroup) return;  // as on sim: new_group is not traced
  const uint64_t bytes = traced_bytes(sig, size());
  const std::string name = sig.op == OpType::kBarrier ? std::string(to_string(EventName::kBarrier))
                                                      : collective_span_name(api_name(sig.op), "auto", bytes);
  t->span(device_, {.stream = StreamKind::kComm,
                    .cat = SpanCategory::kCollective,
                    .name = name,
                    .ts_ns = begin_ns,
                    .dur_ns = end_ns - begin_ns,
                    .args = CollectiveArgs{.coll = seq,
                                           .group = group_id_,
                                           .op = api_name(sig.op),
                                           .algo = "auto",
                                           .bytes = bytes,
                                           .count = sig.op == OpType::kBarrier ? 0 : shape_numel(sig.shape),
                                           .dtype = to_string(sig.dtype),
                                           .redop = sig.reduce_op ? to_string(*sig.reduce_op) : "none",
                                           .root = sig.root,
                                           .ranks = size(),
                                           .slices = 1,
                                           .steps = 1}});
  t->instant(device_, end_ns, WorkCompleted{.coll = seq, .op = api_name(sig.op), .group = group_id_});
}

// ---- collectives ----

std::shared_ptr<Work> MpiBackend::all_reduce(Tensor& tensor, const AllreduceOptions& o) {
  Signature sig = signature_for(OpType::kAllReduce, tensor, o.algorithm);
  sig.reduce_op = o.op;
  const int count = count_of(tensor.numel(), sig.op);
  std::byte* data = raw_data(tensor);
  return run(
      sig, o.timeout, {tensor},
      [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, data, count, mpi_type(tensor.dtype()), mpi_op(o.op),
                              channel_->comm(), r);
      },
      [&] {
        if (o.op == ReduceOp::kAvg) kernels::divide(DeviceKind::kCpu, data, tensor.numel(), size());
      });
}

std::shared_ptr<Work> MpiBackend::broadcast(Tensor& tensor, const BroadcastOptions& o) {
  Signature sig = signature_for(OpType::kBroadcast, tensor, o.algorithm);
  sig.root = o.root;
  const int count = count_of(tensor.numel(), sig.op);
  return run(sig, o.timeout, {tensor}, [&](MPI_Request* r) {
    return MPI_Ibcast(raw_data(tensor), count, mpi_type(tensor.dtype()), o.root, channel_->comm(), r);
  });
}

std::shared_ptr<Work> MpiBackend::reduce(Tensor& tensor, const ReduceOptions& o) {
  Signature sig = signature_for(OpType::kReduce, tensor, o.algorithm);
  sig.root = o.root;
  sig.reduce_op = o.op;
  const int count = count_of(tensor.numel(), sig.op);
  std::byte* data = raw_data(tensor);
  const bool root = rank() == o.root;
  // Non-roots keep their tensor: MPI writes only the root's receive buffer.
  return run(
      sig, o.timeout, {tensor},
      [&](MPI_Request* r) {
        return MPI_Ireduce(root ? MPI_IN_PLACE : data, root ? data : nullptr, count, mpi_type(tensor.dtype()),
                           mpi_op(o.op), o.root, channel_->comm(), r);
      },
      [&] {
        if (root && o.op == ReduceOp::kAvg) kernels::divide(DeviceKind::kCpu, data, tensor.numel(), size());
      });
}

std::shared_ptr<Work> MpiBackend::all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                             bool flat_output, const AllgatherOptions& o) {
  const Signature sig = signature_for(OpType::kAllGather, input, o.algorithm);
  const int count = count_of(input.numel() * size(), sig.op) / size();
  const Tensor flat = flat_output ? outputs[0] : flat_buffer(input, size(), device_);
  return run(
      sig, o.timeout, {input, flat},
      [&](MPI_Request* r) {
        return MPI_Iallgather(raw_data(input), count, mpi_type(input.dtype()), raw_data(flat), count,
                              mpi_type(input.dtype()), channel_->comm(), r);
      },
      [&] {
        if (flat_output) return;
        const uint64_t block = input.nbytes();
        for (int k = 0; k < size(); ++k) copy_bytes(raw_data(outputs[k]), raw_data(flat) + block * k, block);
      });
}

std::shared_ptr<Work> MpiBackend::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                                 bool flat_input, const ReduceScatterOptions& o) {
  Signature sig = signature_for(OpType::kReduceScatter, output, o.algorithm);
  sig.reduce_op = o.op;
  const int count = count_of(output.numel() * size(), sig.op) / size();
  Tensor flat = flat_input ? inputs[0] : flat_buffer(output, size(), device_);
  if (!flat_input) {
    const uint64_t block = output.nbytes();
    for (int k = 0; k < size(); ++k) copy_bytes(raw_data(flat) + block * k, raw_data(inputs[k]), block);
  }
  return run(
      sig, o.timeout, {flat, output},
      [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(raw_data(flat), raw_data(output), count, mpi_type(output.dtype()),
                                         mpi_op(o.op), channel_->comm(), r);
      },
      [&] {
        if (o.op == ReduceOp::kAvg)
          kernels::divide(DeviceKind::kCpu, raw_data(output), output.numel(), size());
      });
}

std::shared_ptr<Work> MpiBackend::scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                          const ScatterOptions& o) {
  Signature sig = signature_for(OpType::kScatter, output, Algorithm::kDefault);
  sig.root = o.root;
  const int count = count_of(output.numel() * size(), sig.op) / size();
  const bool root = rank() == o.root;
  Tensor flat;
  if (root) {
    flat = flat_buffer(output, size(), device_);
    const uint64_t block = output.nbytes();
    for (int k = 0; k < size(); ++k) copy_bytes(raw_data(flat) + block * k, raw_data(inputs[k]), block);
  }
  return run(sig, o.timeout, {flat, output}, [&](MPI_Request* r) {
    return MPI_Iscatter(root ? raw_data(flat) : nullptr, count, mpi_type(output.dtype()), raw_data(output),
                        count, mpi_type(output.dtype()), o.root, channel_->comm(), r);
  });
}

std::shared_ptr<Work> MpiBackend::gather(const Tensor& input, std::vector<Tensor>& outputs,
                                         const GatherOptions& o) {
  Signature sig = signature_for(OpType::kGather, input, Algorithm::kDefault);
  sig.root = o.root;
  const int count = count_of(input.numel() * size(), sig.op) / size();
  const bool root = rank() == o.root;
  const Tensor flat = root ? flat_buffer(input, size(), device_) : Tensor();
  return run(
      sig, o.timeout, {input, flat},
      [&](MPI_Request* r) {
        return MPI_Igather(raw_data(input), count, mpi_type(input.dtype()), root ? raw_data(flat) : nullptr,
                           count, mpi_type(input.dtype()), o.root, channel_->comm(), r);
      },
      [&] {
        if (!root) return;
        const uint64_t block = input.nbytes();
        for (int k = 0; k < size(); ++k) copy_bytes(raw_data(outputs[k]), raw_data(flat) + block * k, block);
      });
}

std::shared_ptr<Work> MpiBackend::barrier(const BarrierOptions& o) {
  const Signature sig = signature_for(OpType::kBarrier, Tensor(), Algorithm::kDefault);
  return run(sig, o.timeout, {}, [&](MPI_Request* r) { return MPI_Ibarrier(channel_->comm(), r); });
}

// ---- point to point ----

namespace {

void check_tag(int tag, OpType op) {
  DPS_CHECK(tag >= 0 && tag < kFirstReservedTag, ErrorKind::kInvalidArgument,
            "{} on backend 'mpi': tag {} out of range (0..{}; higher tags are the backend's own)",
            api_name(op), tag, kFirstReservedTag - 1);
}

}  // namespace

std::shared_ptr<Work> MpiBackend::send(const Tensor& tensor, int dst, const PointToPointOptions& o) {
  check_tag(o.tag, OpType::kSend);
  signature_for(OpType::kSend, tensor, Algorithm::kDefault);  // refuses meta tensors
  const int count = count_of(tensor.numel(), OpType::kSend);
  auto work = std::make_shared<MpiWork>(OpType::kSend, p2p_sent_[dst]++);
  const WaitFor what{.op = OpType::kSend, .seq = work->sequence_number(), .collective = false};
  try {
    channel_->throw_if_failed(what);
    auto request = std::make_shared<std::vector<MPI_Request>>(1, MPI_REQUEST_NULL);
    check_mpi(MPI_Isend(raw_data(tensor), count, mpi_type(tensor.dtype()), dst, o.tag, channel_->comm(),
                        &(*request)[0]),
              "MPI_Isend", channel_->failure_message(what, "issuing it"));
    const int64_t start_ns = device_.record(StreamKind::kComm).ts_ns;
    // The channel outlives the Work as long as the group does: wait() before destroying the group.
    work->set_pending([this, work = work.get(), request, tensor, what, start_ns, timeout = limit(o.timeout)] {
      try {
        channel_->wait(*request, what, timeout);
        work->complete(start_ns, device_.record(StreamKind::kComm).ts_ns);
      } catch (const Error&) {
        keep_forever(std::make_shared<Tensor>(tensor));  // MPI may still read it
        work->fail(std::current_exception());
      }
    });
  } catch (const Error&) {
    work->fail(std::current_exception());
  }
  return work;
}

std::shared_ptr<Work> MpiBackend::recv(Tensor& tensor, int src, const PointToPointOptions& o) {
  check_tag(o.tag, OpType::kRecv);
  signature_for(OpType::kRecv, tensor, Algorithm::kDefault);
  const int count = count_of(tensor.numel(), OpType::kRecv);
  auto work = std::make_shared<MpiWork>(OpType::kRecv, p2p_received_[src]++);
  const WaitFor what{.op = OpType::kRecv, .seq = work->sequence_number(), .collective = false};
  try {
    channel_->throw_if_failed(what);
    const Event begin = device_.record(StreamKind::kComm);
    std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
    check_mpi(MPI_Irecv(raw_data(tensor), count, mpi_type(tensor.dtype()), src, o.tag, channel_->comm(),
                        &request[0]),
              "MPI_Irecv", channel_->failure_message(what, "issuing it"));
    std::vector<MPI_Status> status;
    channel_->wait(request, what, limit(o.timeout), &status);
    int received = 0;
    MPI_Get_count(&status[0], mpi_type(tensor.dtype()), &received);
    DPS_CHECK(received == count, ErrorKind::kMismatch, "{}",
              channel_->failure_message(what, fmt::format("rank {} sent {} elements of {}, but this rank "
                                                          "receives {}",
                                                          src, received, to_string(tensor.dtype()), count)));
    work->complete(begin.ts_ns, device_.record(StreamKind::kComm).ts_ns);
  } catch (const Error&) {
    keep_forever(std::make_shared<Tensor>(tensor));  // MPI may still write it
    work->fail(std::current_exception());
  }
  return work;
}

// ---- groups and failures ----

std::unique_ptr<Backend> MpiBackend::new_group(const std::vector<int>& ranks,
                                               const NewGroupOptions& options) {
  Signature sig = signature_for(OpType::kNewGroup, Tensor(), Algorithm::kDefault);
  sig.ranks = ranks;
  // Every rank of this group arrives (a barrier with the timeout and the fingerprint check) before
  // the blocking MPI_Comm_split, which then cannot wait for a rank that never comes.
  const std::shared_ptr<Work> arrived =
      run(sig, timeout_, {}, [&](MPI_Request* r) { return MPI_Ibarrier(channel_->comm(), r); });
  arrived->wait();
  const bool member = std::find(ranks.begin(), ranks.end(), rank()) != ranks.end();
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(channel_->comm(), member ? 0 : MPI_UNDEFINED, rank(), &sub), "MPI_Comm_split",
            fmt::format("new_group on rank {}", rank()));
  const int id = next_group_id_++;
  if (!member) return nullptr;
  return std::make_unique<MpiBackend>(std::make_unique<MpiChannel>(sub, channel_->state()), device_,
                                      limit(options.timeout), group_id_ * 100 + id);
}

void MpiBackend::abort(ErrorKind kind, const std::string& message) { channel_->abort(kind, message); }

void MpiBackend::rank_finished() { channel_->notify_finished(); }

}  // namespace dpscope::detail
