// MpiBackend's operations (mpi_backend.hpp): each one maps its tensors onto one nonblocking MPI
// call and lets run() fingerprint, issue, wait and time it, or onto our schedule's logical buffer
// (schedule.hpp's layout, as the sim backend lays it out) and lets run_schedule() do the same.
//
// Sections: Work; helpers; the algorithm; run(), run_schedule() and tracing; collectives; point to
// point; groups and failures.
#include "mpi_backend.hpp"

#include <array>
#include <climits>
#include <cstring>
#include <numeric>

#include "../algorithms/collective_choice.hpp"

#include "../sim/sim_backend.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "dpscope/kernels/kernels.hpp"

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

// Copies `bytes` from src to dst (either may be null when bytes is 0; they may overlap: an
// all_gather_into_tensor's input may be its own block of the output).
void copy_bytes(std::byte* dst, const std::byte* src, uint64_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

// Bytes this rank divides for ReduceOp::kAvg (the sim's avg_scale span): the reduce's root only.
uint64_t avg_bytes(const Signature& sig, int rank) {
  if (!sig.reduce_op || *sig.reduce_op != ReduceOp::kAvg) return 0;
  if (sig.op == OpType::kReduce && rank != sig.root) return 0;
  return static_cast<uint64_t>(shape_numel(sig.shape)) * element_size(sig.dtype);
}

// The schedule's buffer of one tensor: a single block (all_reduce, broadcast, reduce; a
// non-root's part of scatter and gather).
RankBuffer single_block(const Tensor& t) { return {{raw_data(t)}, t.numel()}; }

// A copy of `t` on its device, for a rank that must not change `t` (reduce's non-roots).
Tensor copy_of(const Tensor& t) {
  Tensor copy = Tensor::empty(t.shape(), t.device(), MemoryCategory::kBuffers, t.dtype());
  if (t.nbytes() > 0) std::memcpy(raw_data(copy), raw_data(t), t.nbytes());
  return copy;
}

constexpr size_t kFingerprintBytes = 384;
using FingerprintBuffer = std::array<char, kFingerprintBytes>;

FingerprintBuffer to_buffer(const std::string& text) {
  FingerprintBuffer buffer{};
  std::memcpy(buffer.data(), text.data(), std::min(text.size(), buffer.size() - 1));
  return buffer;
}

}  // namespace

struct MpiBackend::Fingerprints {
  FingerprintBuffer mine{};    // sent to the right-hand neighbour
  FingerprintBuffer theirs{};  // the left-hand neighbour's
};

MpiBackend::MpiBackend(std::unique_ptr<MpiChannel> channel, Device device, Milliseconds timeout, int group_id,
                       Algorithm default_algorithm)
    : channel_(std::move(channel)),
      device_(std::move(device)),
      timeout_(timeout),
      group_id_(group_id),
      default_algorithm_(default_algorithm),
      ring_(static_cast<size_t>(channel_->size())) {
  DPS_ASSERT(timeout_.count() > 0, "MpiBackend needs a positive timeout");
  std::iota(ring_.begin(), ring_.end(), 0);
}

// ---- the algorithm ----

std::optional<Algorithm> MpiBackend::algorithm_for(OpType op, Algorithm requested) const {
  const Algorithm algorithm = resolve_algorithm(op, requested, default_algorithm_, " on backend 'mpi'");
  if (algorithm == Algorithm::kAuto) return std::nullopt;
  return algorithm;
}

// ---- run(), run_schedule() and tracing ----

Signature MpiBackend::signature_for(OpType op, const Tensor& sizing, Algorithm algorithm) const {
  Signature sig{.op = op};
  sig.algorithm = algorithm_for(op, algorithm);
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

std::vector<MPI_Request> MpiBackend::exchange_fingerprints(Fingerprints& f, const std::string& context) {
  const int n = size();
  if (n == 1) return {};
  std::vector<MPI_Request> exchange(2, MPI_REQUEST_NULL);
  check_mpi(MPI_Isend(f.mine.data(), kFingerprintBytes, MPI_CHAR, (rank() + 1) % n, kFingerprintTag,
                      channel_->comm(), &exchange[0]),
            "MPI_Isend (fingerprint)", context);
  check_mpi(MPI_Irecv(f.theirs.data(), kFingerprintBytes, MPI_CHAR, (rank() + n - 1) % n, kFingerprintTag,
                      channel_->comm(), &exchange[1]),
            "MPI_Irecv (fingerprint)", context);
  return exchange;
}

void MpiBackend::check_fingerprints(const Fingerprints& f) {
  const int n = size();
  if (n == 1 || f.mine == f.theirs) return;
  const std::string message =
      mismatch_with_neighbour((rank() + n - 1) % n, f.theirs.data(), rank(), f.mine.data());
  channel_->fail_and_notify({ErrorKind::kMismatch, message});
  throw Error(ErrorKind::kMismatch, message);
}

std::shared_ptr<Work> MpiBackend::run(const Signature& sig, Milliseconds timeout, std::vector<Tensor> buffers,
                                      const Issue& issue, const std::function<void()>& finish) {
  const int64_t seq = channel_->next_seq();
  auto work = std::make_shared<MpiWork>(sig.op, seq);
  const WaitFor what{.op = sig.op, .seq = seq};
  const Milliseconds wait_limit = limit(timeout);
  auto fingerprints = std::make_shared<Fingerprints>();
  try {
    channel_->throw_if_failed(what);
    const auto begun = Clock::now();
    const Event begin = device_.record(StreamKind::kComm);
    const std::string context = channel_->failure_message(what, "issuing it");
    fingerprints->mine = to_buffer(fingerprint(sig, seq));
    std::vector<MPI_Request> exchange = exchange_fingerprints(*fingerprints, context);
    // The neighbour's fingerprint is checked before MPI sees the collective: MPI's collectives of
    // different sizes or kinds matched with each other fail inside OpenMPI (MPI_ERR_TRUNCATE),
    // which prints its own lines to stderr ("MPI Error in NBC subrequest ..."). The cost is one
    // small message's latency per collective.
    channel_->wait(exchange, what, wait_limit, nullptr, begun);
    check_fingerprints(*fingerprints);
    std::vector<MPI_Request> collective(1, MPI_REQUEST_NULL);
    check_mpi(issue(&collective[0]), "the nonblocking MPI call", context);
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

std::shared_ptr<Work> MpiBackend::run_schedule(const Signature& sig, Milliseconds timeout, int slices,
                                               std::vector<Tensor> buffers, const RankBuffer& buffer,
                                               const std::function<void()>& finish) {
  const int64_t seq = channel_->next_seq();
  auto work = std::make_shared<MpiWork>(sig.op, seq);
  const WaitFor what{.op = sig.op, .seq = seq};
  auto fingerprints = std::make_shared<Fingerprints>();
  try {
    channel_->throw_if_failed(what);
    const auto begun = Clock::now();
    const Event begin = device_.record(StreamKind::kComm);
    const std::string print = fingerprint(sig, seq);
    fingerprints->mine = to_buffer(print);
    // The sim leader's choice for the same call (collective_choice.hpp), over our ring of ranks.
    const Schedule schedule = build_schedule({.op = sig.op,
                                              .algorithm = *sig.algorithm,
                                              .count = shape_numel(sig.shape),
                                              .root = sig.root,
                                              .slices = slices,
                                              .elem_bytes = element_size(sig.dtype)},
                                             size(), ring_);
    std::vector<MPI_Request> exchange =
        exchange_fingerprints(*fingerprints, channel_->failure_message(what, "issuing it"));
    const ScheduleTimes times = detail::run_schedule(*channel_, device_,
                                                     {.schedule = &schedule,
                                                      .rank = rank(),
                                                      .buffer = buffer,
                                                      .dtype = sig.dtype,
                                                      .reduce_op = sig.reduce_op.value_or(ReduceOp::kSum),
                                                      .tag = channel_->schedule_tag(print)},
                                                     what, limit(timeout), begun, std::move(exchange),
                                                     [&] { check_fingerprints(*fingerprints); });
    channel_->completed(seq);
    if (finish) finish();
    const Event end = device_.record(StreamKind::kComm);
    work->complete(begin.ts_ns, end.ts_ns);
    trace_schedule(sig, seq, schedule, times, begin.ts_ns, end.ts_ns);
  } catch (const Error&) {
    keep_forever(std::make_shared<std::vector<Tensor>>(std::move(buffers)));
    keep_forever(fingerprints);
    work->fail(std::current_exception());
  }
  return work;
}

void MpiBackend::trace_collective(const Signature& sig, int64_t seq, const char* algo, int slices, int steps,
                                  int64_t begin_ns, int64_t end_ns) const {
  TraceSink* t = device_.tracer();
  const uint64_t bytes = collective_bytes(sig, size());
  const std::string name = sig.op == OpType::kBarrier ? std::string(to_string(EventName::kBarrier))
                                                      : collective_span_name(api_name(sig.op), algo, bytes);
  t->span(device_, {.stream = StreamKind::kComm,
                    .cat = SpanCategory::kCollective,
                    .name = name,
                    .ts_ns = begin_ns,
                    .dur_ns = end_ns - begin_ns,
                    .args = CollectiveArgs{.coll = seq,
                                           .group = group_id_,
                                           .op = api_name(sig.op),
                                           .algo = algo,
                                           .bytes = bytes,
                                           .count = sig.op == OpType::kBarrier ? 0 : shape_numel(sig.shape),
                                           .dtype = to_string(sig.dtype),
                                           .redop = sig.reduce_op ? to_string(*sig.reduce_op) : "none",
                                           .root = sig.root,
                                           .ranks = size(),
                                           .slices = slices,
                                           .steps = steps}});
}

void MpiBackend::trace(const Signature& sig, int64_t seq, int64_t begin_ns, int64_t end_ns) const {
  TraceSink* t = device_.tracer();
  if (t == nullptr || sig.op == OpType::kNewGroup) return;  // as on sim: new_group is not traced
  trace_collective(sig, seq, "auto", 1, 1, begin_ns, end_ns);
  t->instant(device_, end_ns, WorkCompleted{.coll = seq, .op = api_name(sig.op), .group = group_id_});
}

void MpiBackend::trace_schedule(const Signature& sig, int64_t seq, const Schedule& s,
                                const ScheduleTimes& times, int64_t begin_ns, int64_t end_ns) const {
  TraceSink* t = device_.tracer();
  if (t == nullptr) return;
  trace_collective(sig, seq, s.algorithm, s.slices, s.steps, begin_ns, end_ns);
  // As on sim, the sender traces a transfer and the receiver its reduction. The peer's device is in
  // the peer's own trace file (its rank-K.jsonl), which every rank writes with the same header
  // layout: its id there is this device's id here, and src_rank/dst_rank say whose file it is.
  const uint64_t elem = element_size(sig.dtype);
  const std::vector<int>& process = channel_->process_ranks();
  for (const CommOp& op : s.ops) {
    if (op.src != rank() || op.from.count_elems == 0) continue;
    const int64_t ts = times.step_begin_ns[static_cast<size_t>(op.step)];
    t->transfer(device_,
                {.src = device_.trace_id(),
                 .dst = device_.trace_id(),
                 .bytes = static_cast<uint64_t>(op.from.count_elems) * elem,
                 .ts_ns = ts,
                 .dur_ns = times.step_end_ns[static_cast<size_t>(op.step)] - ts,
                 .stream = StreamKind::kComm,
                 .name = collective_transfer_name(s.algorithm, s.phases[static_cast<size_t>(op.phase)]),
                 .collective = seq,
                 .algo = s.algorithm,
                 .algo_step = op.algo_step,
                 .chunk = op.chunk,
                 .src_rank = process[static_cast<size_t>(op.src)],
                 .dst_rank = process[static_cast<size_t>(op.dst)]});
  }
  const std::string reduce_name = reduce_span_name(sig.reduce_op ? to_string(*sig.reduce_op) : "");
  for (const ScheduleTimes::Reduction& r : times.reductions) {
    const CommOp& op = s.ops[static_cast<size_t>(r.op)];
    t->span(device_,
            {.stream = StreamKind::kComm,
             .cat = SpanCategory::kReduce,
             .name = reduce_name,
             .ts_ns = r.begin_ns,
             .dur_ns = r.end_ns - r.begin_ns,
             .args = ReduceArgs{.coll = seq, .bytes = op.to.count_elems * elem, .src_rank = op.src}});
  }
  if (const uint64_t avg = avg_bytes(sig, rank()); avg > 0) {
    // The division, and any copy-out before it, after the last step (as the cuda backend's trace).
    const int64_t scale_start = times.step_end_ns.empty() ? begin_ns : times.step_end_ns.back();
    t->span(device_, {.stream = StreamKind::kComm,
                      .cat = SpanCategory::kReduce,
                      .name = to_string(EventName::kAvgScale),
                      .ts_ns = scale_start,
                      .dur_ns = end_ns - scale_start,
                      .args = AvgScaleArgs{.coll = seq, .bytes = avg, .divisor = size()}});
  }
  t->instant(device_, end_ns, WorkCompleted{.coll = seq, .op = api_name(sig.op), .group = group_id_});
}

// ---- collectives ----

std::shared_ptr<Work> MpiBackend::all_reduce(Tensor& tensor, const AllreduceOptions& o) {
  Signature sig = signature_for(OpType::kAllReduce, tensor, o.algorithm);
  sig.reduce_op = o.op;
  const int count = count_of(tensor.numel(), sig.op);
  std::byte* data = raw_data(tensor);
  auto finish = [&] {
    if (o.op == ReduceOp::kAvg) kernels::divide(DeviceKind::kCpu, data, tensor.numel(), size());
  };
  if (sig.algorithm) return run_schedule(sig, o.timeout, o.slices, {tensor}, single_block(tensor), finish);
  return run(
      sig, o.timeout, {tensor},
      [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, data, count, mpi_type(tensor.dtype()), mpi_op(o.op),
                              channel_->comm(), r);
      },
      finish);
}

std::shared_ptr<Work> MpiBackend::broadcast(Tensor& tensor, const BroadcastOptions& o) {
  Signature sig = signature_for(OpType::kBroadcast, tensor, o.algorithm);
  sig.root = o.root;
  const int count = count_of(tensor.numel(), sig.op);
  if (sig.algorithm) return run_schedule(sig, o.timeout, o.slices, {tensor}, single_block(tensor));
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
  auto finish = [&] {
    if (root && o.op == ReduceOp::kAvg) kernels::divide(DeviceKind::kCpu, data, tensor.numel(), size());
  };
  if (sig.algorithm) {
    // As on sim, non-roots accumulate partial results in a copy, so their tensor stays as it was.
    const Tensor partial = root ? tensor : copy_of(tensor);
    return run_schedule(sig, o.timeout, o.slices, {tensor, partial}, single_block(partial), finish);
  }
  // Non-roots keep their tensor: MPI writes only the root's receive buffer.
  return run(
      sig, o.timeout, {tensor},
      [&](MPI_Request* r) {
        return MPI_Ireduce(root ? MPI_IN_PLACE : data, root ? data : nullptr, count, mpi_type(tensor.dtype()),
                           mpi_op(o.op), o.root, channel_->comm(), r);
      },
      finish);
}

// Out of place: MPI's own collectives take a send and a receive buffer (MPI_Bcast excepted: the
// root's output is its input, then broadcast). Our schedules over MPI run in place only.
std::shared_ptr<Work> MpiBackend::all_reduce_into(Tensor& output, const Tensor& input,
                                                  const AllreduceOptions& o) {
  Signature sig = signature_for(OpType::kAllReduce, output, o.algorithm);
  if (sig.algorithm) unsupported_out_of_place(OpType::kAllReduce);
  sig.reduce_op = o.op;
  const int count = count_of(output.numel(), sig.op);
  return run(
      sig, o.timeout, {output, input},
      [&](MPI_Request* r) {
        return MPI_Iallreduce(raw_data(input), raw_data(output), count, mpi_type(output.dtype()),
                              mpi_op(o.op), channel_->comm(), r);
      },
      [&] {
        if (o.op == ReduceOp::kAvg)
          kernels::divide(DeviceKind::kCpu, raw_data(output), output.numel(), size());
      });
}

std::shared_ptr<Work> MpiBackend::broadcast_into(Tensor& output, const Tensor& input,
                                                 const BroadcastOptions& o) {
  Signature sig = signature_for(OpType::kBroadcast, output, o.algorithm);
  if (sig.algorithm) unsupported_out_of_place(OpType::kBroadcast);
  sig.root = o.root;
  const int count = count_of(output.numel(), sig.op);
  if (rank() == o.root) copy_bytes(raw_data(output), raw_data(input), output.nbytes());
  return run(sig, o.timeout, {output, input}, [&](MPI_Request* r) {
    return MPI_Ibcast(raw_data(output), count, mpi_type(output.dtype()), o.root, channel_->comm(), r);
  });
}

std::shared_ptr<Work> MpiBackend::reduce_into(Tensor& output, const Tensor& input, const ReduceOptions& o) {
  Signature sig = signature_for(OpType::kReduce, output, o.algorithm);
  if (sig.algorithm) unsupported_out_of_place(OpType::kReduce);
  sig.root = o.root;
  sig.reduce_op = o.op;
  const int count = count_of(output.numel(), sig.op);
  const bool root = rank() == o.root;
  return run(
      sig, o.timeout, {output, input},
      [&](MPI_Request* r) {
        return MPI_Ireduce(raw_data(input), root ? raw_data(output) : nullptr, count,
                           mpi_type(output.dtype()), mpi_op(o.op), o.root, channel_->comm(), r);
      },
      [&] {
        if (root && o.op == ReduceOp::kAvg)
          kernels::divide(DeviceKind::kCpu, raw_data(output), output.numel(), size());
      });
}

std::shared_ptr<Work> MpiBackend::all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                             bool flat_output, const AllgatherOptions& o) {
  const Signature sig = signature_for(OpType::kAllGather, input, o.algorithm);
  const int count = count_of(input.numel() * size(), sig.op) / size();
  if (sig.algorithm) {
    // Block k of the schedule's buffer is where rank k's input belongs; this rank's own is there
    // from the start.
    const uint64_t block = input.nbytes();
    RankBuffer buffer{.block_elems = input.numel()};
    for (int k = 0; k < size(); ++k)
      buffer.blocks.push_back(flat_output ? raw_data(outputs[0]) + block * k : raw_data(outputs[k]));
    copy_bytes(buffer.blocks[rank()], raw_data(input), block);
    std::vector<Tensor> buffers = outputs;
    buffers.push_back(input);
    return run_schedule(sig, o.timeout, o.slices, std::move(buffers), buffer);
  }
  const Tensor flat = flat_output ? outputs[0] : flat_buffer(input, size(), device_);
  return run(
      sig, o.timeout, {input, flat},
      [&](MPI_Request* r) {
        // In place (input is this rank's block of the output): MPI's in-place form, as the standard
        // forbids overlapping send and receive buffers.
        const bool in_place = raw_data(input) == raw_data(flat) + input.nbytes() * rank();
        return MPI_Iallgather(in_place ? MPI_IN_PLACE : raw_data(input), count, mpi_type(input.dtype()),
                              raw_data(flat), count, mpi_type(input.dtype()), channel_->comm(), r);
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
  auto finish = [&] {
    if (o.op == ReduceOp::kAvg) kernels::divide(DeviceKind::kCpu, raw_data(output), output.numel(), size());
  };
  if (sig.algorithm) {
    // As on sim, the schedule works on a copy of the inputs (they stay unchanged); block k of it
    // ends up holding rank k's result.
    const uint64_t block = output.nbytes();
    const Tensor work = flat_buffer(output, size(), device_);
    RankBuffer buffer{.block_elems = output.numel()};
    for (int k = 0; k < size(); ++k) {
      const std::byte* from = flat_input ? raw_data(inputs[0]) + block * k : raw_data(inputs[k]);
      copy_bytes(raw_data(work) + block * k, from, block);
      buffer.blocks.push_back(raw_data(work) + block * k);
    }
    return run_schedule(sig, o.timeout, o.slices, {work, output}, buffer, [&] {
      copy_bytes(raw_data(output), buffer.blocks[rank()], block);
      finish();
    });
  }
  Tensor flat = flat_input ? inputs[0] : flat_buffer(output, size(), device_);
  if (!flat_input) {
    const uint64_t block = output.nbytes();
    for (int k = 0; k < size(); ++k) copy_bytes(raw_data(flat) + block * k, raw_data(inputs[k]), block);
  }
  // In place (output is this rank's block of the input): MPI forbids overlapping buffers, and its
  // own in-place form leaves the result at the start of the input, so the result is received
  // apart and copied into place.
  const bool overlaps = flat_input && raw_data(output) != nullptr && raw_data(output) >= raw_data(flat) &&
                        raw_data(output) < raw_data(flat) + flat.nbytes();
  const Tensor received = overlaps ? copy_of(output) : output;
  return run(
      sig, o.timeout, {flat, output, received},
      [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(raw_data(flat), raw_data(received), count, mpi_type(output.dtype()),
                                         mpi_op(o.op), channel_->comm(), r);
      },
      [&] {
        if (overlaps) copy_bytes(raw_data(output), raw_data(received), output.nbytes());
        finish();
      });
}

std::shared_ptr<Work> MpiBackend::all_to_all_single(Tensor& output, const Tensor& input,
                                                    const AllToAllOptions& o) {
  // Offers no algorithm (resolve_algorithm): always MPI's own all-to-all, block k to rank k.
  const Signature sig = signature_for(OpType::kAllToAll, input, Algorithm::kDefault);
  const int block = count_of(input.numel(), sig.op) / size();
  const bool in_place = raw_data(output) == raw_data(input);
  return run(sig, o.timeout, {input, output}, [&](MPI_Request* r) {
    return MPI_Ialltoall(in_place ? MPI_IN_PLACE : raw_data(input), block, mpi_type(input.dtype()),
                         raw_data(output), block, mpi_type(output.dtype()), channel_->comm(), r);
  });
}

std::shared_ptr<Work> MpiBackend::scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                          const ScatterOptions& o) {
  Signature sig = signature_for(OpType::kScatter, output, Algorithm::kDefault);
  sig.root = o.root;
  const int count = count_of(output.numel() * size(), sig.op) / size();
  const bool root = rank() == o.root;
  if (sig.algorithm) {
    // The naive schedule: the root sends each rank its block straight from `inputs`.
    RankBuffer buffer = single_block(output);
    std::vector<Tensor> buffers{output};
    if (root) {
      buffer.blocks.clear();
      for (const Tensor& t : inputs) buffer.blocks.push_back(raw_data(t));
      copy_bytes(raw_data(output), raw_data(inputs[rank()]), output.nbytes());
      buffers.insert(buffers.end(), inputs.begin(), inputs.end());
    }
    return run_schedule(sig, o.timeout, 0, std::move(buffers), buffer);
  }
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
  if (sig.algorithm) {
    // The naive schedule: every rank sends its input straight into the root's `outputs`.
    RankBuffer buffer = single_block(input);
    std::vector<Tensor> buffers{input};
    if (root) {
      buffer.blocks.clear();
      for (const Tensor& t : outputs) buffer.blocks.push_back(raw_data(t));
      copy_bytes(raw_data(outputs[rank()]), raw_data(input), input.nbytes());
      buffers.insert(buffers.end(), outputs.begin(), outputs.end());
    }
    return run_schedule(sig, o.timeout, 0, std::move(buffers), buffer);
  }
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
  return std::make_unique<MpiBackend>(
      std::make_unique<MpiChannel>(sub, channel_->state(), process_ranks_of(sub)), device_,
      limit(options.timeout), group_id_ * 100 + id, default_algorithm_);
}

std::vector<int> MpiBackend::process_ranks_of(MPI_Comm sub) const {
  const std::string context = fmt::format("new_group on rank {}", rank());
  MPI_Group theirs = MPI_GROUP_NULL, ours = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(sub, &theirs), "MPI_Comm_group", context);
  check_mpi(MPI_Comm_group(channel_->comm(), &ours), "MPI_Comm_group", context);
  int n = 0;
  MPI_Group_size(theirs, &n);
  std::vector<int> ranks(static_cast<size_t>(n)), in_ours(static_cast<size_t>(n));
  std::iota(ranks.begin(), ranks.end(), 0);
  const int rc = MPI_Group_translate_ranks(theirs, n, ranks.data(), ours, in_ours.data());
  MPI_Group_free(&theirs);
  MPI_Group_free(&ours);
  check_mpi(rc, "MPI_Group_translate_ranks", context);
  for (int& r : in_ours) r = channel_->process_ranks()[static_cast<size_t>(r)];
  return in_ours;
}

void MpiBackend::abort(ErrorKind kind, const std::string& message) { channel_->abort(kind, message); }

void MpiBackend::rank_finished() { channel_->notify_finished(); }

}  // namespace dpscope::detail
