// CommWorker, IssuedEventScope and AsyncBackend (async_backend.hpp).
#include "async_backend.hpp"

#include <utility>

#include "dpscope/core/cuda.hpp"

namespace dpscope::detail {

// ---- CommWorker ----

CommWorker::CommWorker() : thread_([this] { loop(); }) {}

CommWorker::~CommWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

void CommWorker::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  ready_.notify_one();
}

void CommWorker::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and everything submitted has run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

// ---- IssuedEventScope ----

namespace {
thread_local const DeviceImpl* t_issued_device = nullptr;
thread_local const Event* t_issued_event = nullptr;
}  // namespace

IssuedEventScope::IssuedEventScope(const Device& device, const Event& issued)
    : saved_device_(t_issued_device), saved_event_(t_issued_event) {
  t_issued_device = &device.impl();
  t_issued_event = &issued;
}

IssuedEventScope::~IssuedEventScope() {
  t_issued_device = saved_device_;
  t_issued_event = saved_event_;
}

const Event* IssuedEventScope::current(const Device& device) {
  return t_issued_device == &device.impl() ? t_issued_event : nullptr;
}

// ---- AsyncWork ----

namespace {

// The Work of a queued call: done once the worker has run the call; then it forwards to the inner
// backend's Work, or holds the exception the call threw.
class AsyncWork final : public Work {
 public:
  explicit AsyncWork(OpType op) : op_(op) {}

  void finish(std::shared_ptr<Work> inner, std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      inner_ = std::move(inner);
      error_ = std::move(error);
      done_ = true;
    }
    finished_.notify_all();
  }

  // Blocks until the worker ran the call; the inner Work (nullptr after an exception).
  std::shared_ptr<Work> await() const {
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [this] { return done_; });
    if (error_) std::rethrow_exception(error_);
    return inner_;
  }

  void wait() override {
    if (const std::shared_ptr<Work> inner = await()) inner->wait();
  }
  bool is_completed() const override {
    std::lock_guard lock(mutex_);
    return done_ && (error_ != nullptr || inner_ == nullptr || inner_->is_completed());
  }
  bool is_success() const override {
    std::lock_guard lock(mutex_);
    return done_ && error_ == nullptr && (inner_ == nullptr || inner_->is_success());
  }
  std::exception_ptr exception() const override {
    std::lock_guard lock(mutex_);
    if (error_) return error_;
    return inner_ != nullptr ? inner_->exception() : nullptr;
  }
  OpType op_type() const override { return op_; }
  int64_t sequence_number() const override {
    return finished_work() ? finished_work()->sequence_number() : -1;
  }
  int64_t start_ns() const override { return finished_work() ? finished_work()->start_ns() : 0; }
  int64_t end_ns() const override { return finished_work() ? finished_work()->end_ns() : 0; }

 private:
  std::shared_ptr<Work> finished_work() const {
    std::lock_guard lock(mutex_);
    return done_ ? inner_ : nullptr;
  }

  const OpType op_;
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  bool done_ = false;
  std::shared_ptr<Work> inner_;
  std::exception_ptr error_;
};

}  // namespace

// ---- AsyncBackend ----

AsyncBackend::AsyncBackend(std::unique_ptr<Backend> inner, std::shared_ptr<CommWorker> worker)
    : inner_(std::move(inner)), worker_(std::move(worker)) {}

AsyncBackend::~AsyncBackend() {
  try {
    queue_and_wait(OpType::kBarrier, [] { return std::shared_ptr<Work>(); });
  } catch (...) {
    // Nothing can fail in an empty call; a queued call's failure belongs to its own Work.
  }
}

std::shared_ptr<Work> AsyncBackend::queue(OpType op, std::function<std::shared_ptr<Work>()> call) {
  const Device& device = inner_->device();
  auto work = std::make_shared<AsyncWork>(op);
  // What the call's inputs are: the compute stream's work issued so far, and the rank's step and
  // phase as they are now.
  Event issued = device.record(StreamKind::kCompute);
  const TraceContext* context = device.impl().trace_context();
  TraceContext snapshot = context != nullptr ? *context : TraceContext{};
  worker_->submit([this, work, issued = std::move(issued), snapshot, call = std::move(call)] {
    const Device& dev = inner_->device();
    const cuda::TraceContextScope traced_as_issued(dev.impl(), snapshot);
    const IssuedEventScope inputs_ready(dev, issued);
    try {
      work->finish(call(), nullptr);
    } catch (...) {
      work->finish(nullptr, std::current_exception());
    }
  });
  return work;
}

std::shared_ptr<Work> AsyncBackend::queue_and_wait(OpType op, std::function<std::shared_ptr<Work>()> call) {
  const std::shared_ptr<Work> work = queue(op, std::move(call));
  // Throws what the call threw (a usage error, a mismatch); the inner Work's own failure stays
  // with it, for wait().
  static_cast<AsyncWork&>(*work).await();
  return work;
}

std::shared_ptr<Work> AsyncBackend::all_reduce(Tensor& tensor, const AllreduceOptions& options) {
  return queue(OpType::kAllReduce,
               [this, tensor, options]() mutable { return inner_->all_reduce(tensor, options); });
}

std::shared_ptr<Work> AsyncBackend::broadcast(Tensor& tensor, const BroadcastOptions& options) {
  return queue(OpType::kBroadcast,
               [this, tensor, options]() mutable { return inner_->broadcast(tensor, options); });
}

std::shared_ptr<Work> AsyncBackend::reduce(Tensor& tensor, const ReduceOptions& options) {
  return queue(OpType::kReduce,
               [this, tensor, options]() mutable { return inner_->reduce(tensor, options); });
}

std::shared_ptr<Work> AsyncBackend::all_reduce_into(Tensor& output, const Tensor& input,
                                                    const AllreduceOptions& options) {
  return queue(OpType::kAllReduce, [this, output, input, options]() mutable {
    return inner_->all_reduce_into(output, input, options);
  });
}

std::shared_ptr<Work> AsyncBackend::broadcast_into(Tensor& output, const Tensor& input,
                                                   const BroadcastOptions& options) {
  return queue(OpType::kBroadcast, [this, output, input, options]() mutable {
    return inner_->broadcast_into(output, input, options);
  });
}

std::shared_ptr<Work> AsyncBackend::reduce_into(Tensor& output, const Tensor& input,
                                                const ReduceOptions& options) {
  return queue(OpType::kReduce, [this, output, input, options]() mutable {
    return inner_->reduce_into(output, input, options);
  });
}

// The calls below take or fill caller-owned vectors: each waits for its turn on the worker.

std::shared_ptr<Work> AsyncBackend::all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                               bool flat_output, const AllgatherOptions& options) {
  return queue_and_wait(OpType::kAllGather,
                        [&] { return inner_->all_gather(outputs, input, flat_output, options); });
}

std::shared_ptr<Work> AsyncBackend::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                                   bool flat_input, const ReduceScatterOptions& options) {
  return queue_and_wait(OpType::kReduceScatter,
                        [&] { return inner_->reduce_scatter(output, inputs, flat_input, options); });
}

std::shared_ptr<Work> AsyncBackend::scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                            const ScatterOptions& options) {
  return queue_and_wait(OpType::kScatter, [&] { return inner_->scatter(output, inputs, options); });
}

std::shared_ptr<Work> AsyncBackend::gather(const Tensor& input, std::vector<Tensor>& outputs,
                                           const GatherOptions& options) {
  return queue_and_wait(OpType::kGather, [&] { return inner_->gather(input, outputs, options); });
}

std::shared_ptr<Work> AsyncBackend::all_to_all_single(Tensor& output, const Tensor& input,
                                                      const AllToAllOptions& options) {
  return queue_and_wait(OpType::kAllToAll, [&] { return inner_->all_to_all_single(output, input, options); });
}

std::shared_ptr<Work> AsyncBackend::barrier(const BarrierOptions& options) {
  return queue_and_wait(OpType::kBarrier, [&] { return inner_->barrier(options); });
}

std::shared_ptr<Work> AsyncBackend::send(const Tensor& tensor, int dst, const PointToPointOptions& options) {
  return queue_and_wait(OpType::kSend, [&] { return inner_->send(tensor, dst, options); });
}

std::shared_ptr<Work> AsyncBackend::recv(Tensor& tensor, int src, const PointToPointOptions& options) {
  return queue_and_wait(OpType::kRecv, [&] { return inner_->recv(tensor, src, options); });
}

std::unique_ptr<Backend> AsyncBackend::new_group(const std::vector<int>& ranks,
                                                 const NewGroupOptions& options) {
  std::unique_ptr<Backend> sub;
  queue_and_wait(OpType::kNewGroup, [&] {
    sub = inner_->new_group(ranks, options);
    return std::shared_ptr<Work>();
  });
  if (sub == nullptr) return nullptr;  // this rank is not a member
  return std::make_unique<AsyncBackend>(std::move(sub), worker_);
}

void AsyncBackend::rank_finished() {
  queue_and_wait(OpType::kBarrier, [this] {
    inner_->rank_finished();
    return std::shared_ptr<Work>();
  });
}

}  // namespace dpscope::detail
