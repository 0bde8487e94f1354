// Point to point on the sim backend. send() posts a message into the group's mailbox and returns
// at once; recv() waits for the oldest message from (src, tag), checks it matches, copies the data,
// times the transfer (an uncontended flow along the route, starting when both sides are ready),
// traces it, and completes both Works. The sender's streams move when it calls wait().
#include <algorithm>
#include <optional>

#include "dpscope/core/trace_sink.hpp"
#include "sim_backend.hpp"

namespace dpscope::detail {

std::shared_ptr<Work> SimBackend::send(const Tensor& tensor, int dst, const PointToPointOptions& options) {
  const int64_t seq = p2p_sent_[dst]++;
  // The receiver reads the tensor from its own thread: it must be complete before it is posted.
  path_->prepare(device_);
  path_->fence(device_);
  const Milliseconds timeout = timeout_or_default(options.timeout);
  auto work = std::make_shared<SimWork>(world_, device_, OpType::kSend, seq, rank_, timeout);
  work->set_peer(group_->global_ranks[dst]);
  auto message = std::make_shared<Message>();
  message->src = rank_;
  message->dst = dst;
  message->tag = options.tag;
  message->seq = seq;
  message->tensor = tensor;
  message->ready_ns = std::max(device_.clock_ns(StreamKind::kComm), device_.clock_ns(StreamKind::kCompute));
  message->work = work;
  WorldState& state = world_->state();
  {
    std::lock_guard lock(state.mutex);
    if (state.failure) {
      work->fail_locked(state.failure->kind,
                        fmt::format("[Rank {}] SEND (SequenceNumber={}) aborted because rank {} failed: {}",
                                    rank_, seq, state.failure->rank, state.failure->message));
    } else {
      group_->mailbox[{rank_, dst, options.tag}].push_back(std::move(message));
    }
  }
  state.cv.notify_all();
  return work;
}

std::shared_ptr<Work> SimBackend::recv(Tensor& tensor, int src, const PointToPointOptions& options) {
  const int64_t seq = p2p_received_[src]++;
  const Milliseconds timeout = timeout_or_default(options.timeout);
  auto work = std::make_shared<SimWork>(world_, device_, OpType::kRecv, seq, rank_, timeout);
  const int64_t ready_ns =
      std::max(device_.clock_ns(StreamKind::kComm), device_.clock_ns(StreamKind::kCompute));
  const std::string what =
      fmt::format("[Rank {}] RECV (SequenceNumber={}) from rank {} (tag {})", rank_, seq, src, options.tag);
  WorldState& state = world_->state();
  std::shared_ptr<Message> message;
  {
    std::unique_lock lock(state.mutex);
    auto& queue = group_->mailbox[{src, rank_, options.tag}];
    const Clock::time_point begun = Clock::now();
    const int src_world = group_->global_ranks[src];
    state.cv.wait_until(lock, begun + timeout, [&] {
      return !queue.empty() || state.failure.has_value() || state.finished[src_world];
    });
    if (!queue.empty()) {
      message = queue.front();
      queue.pop_front();
    } else if (state.failure) {
      work->fail_locked(state.failure->kind, fmt::format("{} aborted because rank {} failed: {}", what,
                                                         state.failure->rank, state.failure->message));
    } else if (state.finished[src_world]) {
      work->fail_locked(
          ErrorKind::kMismatch,
          fmt::format("{} can never complete: rank {} returned from its function without sending it", what,
                      src));
    } else {
      const auto elapsed = std::chrono::duration_cast<Milliseconds>(Clock::now() - begun).count();
      work->fail_locked(
          ErrorKind::kTimeout,
          fmt::format("[Rank {}] Watchdog caught collective operation timeout: WorkSim(SequenceNumber={}, "
                      "OpType=RECV, NumelIn=0, NumelOut={}, Timeout(ms)={}) ran for {} milliseconds "
                      "before timing out (waiting for rank {}, tag {})",
                      rank_, seq, tensor.numel(), timeout.count(), elapsed, src, options.tag));
    }
  }
  if (!message) return work;

  const Tensor& sent = message->tensor;
  if (sent.dtype() != tensor.dtype() || sent.numel() != tensor.numel() ||
      sent.has_data() != tensor.has_data()) {
    const std::string text = fmt::format(
        "{} expected {} {} elements{}, but rank {} sent {} {} elements{} (SEND SequenceNumber={})", what,
        tensor.numel(), to_string(tensor.dtype()), tensor.has_data() ? "" : " (timing-only)", src,
        sent.numel(), to_string(sent.dtype()), sent.has_data() ? "" : " (timing-only)", message->seq);
    if (auto sender = message->work.lock()) sender->fail(ErrorKind::kMismatch, text);
    work->fail(ErrorKind::kMismatch, text);
    return work;
  }
  const uint64_t bytes = tensor.nbytes();
  int64_t start = 0, end = 0;
  try {
    path_->prepare(device_);
    const std::optional<Event> begun_event =
        path_->measured() ? std::optional<Event>(device_.record(StreamKind::kComm)) : std::nullopt;
    if (tensor.has_data() && bytes > 0)
      path_->copy(device_, raw_data(tensor), sent.device(), raw_data(sent), bytes);
    path_->fence(device_);  // the sender may reuse its tensor once its Work completes
    if (begun_event) {
      start = event_time(device_, *begun_event);
      end = start + device_.elapsed_ns(*begun_event, device_.record(StreamKind::kComm));
    }
  } catch (const Error& e) {
    if (auto sender = message->work.lock()) sender->fail(e.kind(), e.what());
    work->fail(e.kind(), e.what());
    return work;
  }
  if (!path_->measured()) {
    const int src_gpu = group_->gpus[src], dst_gpu = group_->gpus[rank_];
    start = std::max(message->ready_ns, ready_ns);
    end = start + world_->network().uncontended_transfer_ns(src_gpu, dst_gpu, bytes);
    device_.wait_until(StreamKind::kComm, end);
  }
  if (TraceSink* tracer = device_.tracer()) {
    const Device& src_device = world_->device(group_->global_ranks[src]);
    tracer->transfer(device_, {.src = src_device.trace_id(),
                               .dst = device_.trace_id(),
                               .bytes = bytes,
                               .ts_ns = start,
                               .dur_ns = end - start,
                               .stream = StreamKind::kComm,
                               .name = to_string(EventName::kSendRecv)});
  }
  if (auto sender = message->work.lock()) sender->complete(start, end, /*comm_on_wait=*/true);
  work->complete(start, end, false);
  return work;
}

}  // namespace dpscope::detail
