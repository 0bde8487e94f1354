// The comm worker and AsyncBackend: a thread per rank that runs the rank's collectives, so that the
// rank's own thread goes on issuing backward while a bucket's all-reduce runs: buckets are
// all-reduced on the comm stream while backward continues on the compute stream, as in PyTorch.
//
// The schedules (SimBackend with the cuda DataPath) fence and meet their peers on the host after
// every step; run on the rank's thread, that kept DDP's backward waiting for each bucket. AsyncBackend
// wraps such a backend: all_reduce, broadcast and reduce are queued to the worker and return at
// once; every other call is queued too (so one rank's calls keep their order) and waits for its
// turn. Like a NCCL call, a queued collective starts on the comm stream once the compute stream
// has reached the point where it was called (an event recorded then, IssuedEventScope), and
// Work::wait() makes the compute stream wait for it.
//
// The worker stamps its trace events with the rank's trace context as it was at the call
// (cuda::TraceContextScope), never with the one the rank's thread is changing.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "dpscope/comm/backend.hpp"
#include "dpscope/comm/work.hpp"

namespace dpscope::detail {

// One thread running submitted jobs in order. Shared by a rank's backend and its sub-groups.
class CommWorker {
 public:
  CommWorker();
  // Runs what was submitted, then joins.
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  // Runs `job` after every job submitted before it; `job` must not throw.
  void submit(std::function<void()> job);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

// The comm stream event a queued collective waits for (recorded on the compute stream when the
// rank called it), for the data path's prepare() on this thread: see CudaDataPath.
class IssuedEventScope {
 public:
  IssuedEventScope(const Device& device, const Event& issued);
  ~IssuedEventScope();
  IssuedEventScope(const IssuedEventScope&) = delete;
  IssuedEventScope& operator=(const IssuedEventScope&) = delete;
  // The event set on this thread for `device`, or nullptr.
  static const Event* current(const Device& device);

 private:
  const DeviceImpl* saved_device_;
  const Event* saved_event_;
};

// A backend whose calls run on a CommWorker (header comment).
class AsyncBackend final : public Backend {
 public:
  AsyncBackend(std::unique_ptr<Backend> inner, std::shared_ptr<CommWorker> worker);
  // Waits for the calls still queued: they use the inner backend.
  ~AsyncBackend() override;

  const char* name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const Device& device() const override { return inner_->device(); }
  Milliseconds timeout() const override { return inner_->timeout(); }

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
  std::shared_ptr<Work> gather(const Tensor& input, std::vector<Tensor>& outputs,
                               const GatherOptions& options) override;
  std::shared_ptr<Work> all_to_all_single(Tensor& output, const Tensor& input,
                                          const AllToAllOptions& options) override;
  std::shared_ptr<Work> barrier(const BarrierOptions& options) override;
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, const PointToPointOptions& options) override;
  std::shared_ptr<Work> recv(Tensor& tensor, int src, const PointToPointOptions& options) override;
  std::unique_ptr<Backend> new_group(const std::vector<int>& ranks, const NewGroupOptions& options) override;
  // Straight to the inner backend, from any thread: it ends what the worker is stuck in.
  void abort(ErrorKind kind, const std::string& message) override { inner_->abort(kind, message); }
  void rank_finished() override;

 private:
  // Queues `call` (returning the inner backend's Work) and returns its Work at once.
  std::shared_ptr<Work> queue(OpType op, std::function<std::shared_ptr<Work>()> call);
  // Queues `call` and waits until the worker has run it (not for the Work it returns).
  std::shared_ptr<Work> queue_and_wait(OpType op, std::function<std::shared_ptr<Work>()> call);

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<CommWorker> worker_;
};

}  // namespace dpscope::detail
