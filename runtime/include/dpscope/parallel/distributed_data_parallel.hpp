// DistributedDataParallel: one process (here: one rank thread) per GPU, gradients averaged by
// bucketed all-reduces that overlap the rest of backward — PyTorch 1.13's DDP and c10d Reducer
// (torch/nn/parallel/distributed.py, torch/csrc/distributed/c10d/reducer.cpp; docs/parallel.md).
//
// Construction: every rank checks that all ranks have the same parameter count and shapes (the
// error names the rank), then the parameters are broadcast from rank 0 (coalesced). The initial
// bucket assignment is ONE bucket when find_unused_parameters is false (as in 1.13), or buckets of
// [first_bucket_mb, bucket_cap_mb] in parameters() order, reversed, when it is true.
// Iteration 1 records the order in which gradients become ready; before iteration 2 the buckets
// are rebuilt in that order with limits [first_bucket_mb, bucket_cap_mb] — rank 0's order,
// broadcast — unless find_unused_parameters is set. Every assignment is traced (`buckets` event).
//
// backward(): the module's backward fires a hook per parameter as its gradient becomes ready
// (last layer first; bias before weight). The hook copies the gradient, multiplied by
// 1/world_size, into its bucket; when a bucket's last gradient arrives its all-reduce (SUM) is
// launched on the COMM stream — strictly in bucket order — while backward goes on computing the
// earlier layers on the COMPUTE stream. That overlap is the point of DDP and shows in simulated
// time. When the module's backward returns, the reducer waits for every bucket (the compute stream
// waits for the comm stream) and writes the averaged gradients into .grad.
//
// no_sync(): inside the guard, backward only accumulates local gradients; the first backward
// after it reduces the accumulated sum. find_unused_parameters: parameters not used by the last
// forward are marked ready (zero) with the first hook, so their buckets still complete; without
// it, an unused parameter leaves its bucket pending and the next forward() throws PyTorch's
// "Expected to have finished reduction in the prior iteration ..." naming the parameter indices.
// gradient_as_bucket_view: .grad becomes a view into the bucket (no separate gradient memory;
// use zero_grad(set_to_none = false) to keep the views). Comm hooks: the default all-reduce, or
// fp16 compression (values rounded to fp16 before and after the all-reduce, division by the world
// size applied by the hook, as torch's fp16_compress_hook does).
//
// Thread semantics: a DDP object belongs to one rank thread; every rank must construct it and call
// forward()/backward() in the same order (they are collective). Lessons 04 and 05 show it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dpscope/comm/process_group.hpp"
#include "dpscope/nn/module.hpp"
#include "dpscope/parallel/bucket_assignment.hpp"
#include "dpscope/trace_format/events.hpp"

namespace dpscope {

enum class CommHook : uint8_t { kAllreduce, kFp16Compress };

struct DdpOptions {
  double bucket_cap_mb = kDefaultBucketCapMb;      // MiB, PyTorch's default
  double first_bucket_mb = kDefaultFirstBucketMb;  // MiB, dist._DEFAULT_FIRST_BUCKET_BYTES
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;  // our modules have no buffers: accepted, nothing to do
  bool gradient_as_bucket_view = false;
  CommHook comm_hook = CommHook::kAllreduce;
  // Pitfall switch for lessons: false sums gradients without dividing by the world size, so the
  // effective learning rate grows with the number of GPUs.
  bool average_gradients = true;
  Algorithm algorithm = Algorithm::kDefault;  // for the bucket all-reduces
};

// One gradient bucket: a flat float32 buffer on the rank's device holding its parameters'
// gradients back to back.
struct DdpBucket {
  enum class State : uint8_t { kPending, kReady, kLaunched, kDone };
  int id = 0;                          // 0 is reduced first
  std::vector<int> params;             // parameter indices, in packing order
  std::vector<int64_t> offsets_elems;  // where each parameter starts in `buffer`
  int64_t numel = 0;
  Tensor buffer;    // [numel], MemoryCategory::kBuffers
  int pending = 0;  // gradients not yet ready in this backward
  State state = State::kPending;
  std::shared_ptr<Work> work;  // the launched all-reduce
  uint64_t bytes() const { return static_cast<uint64_t>(numel) * 4; }
};

namespace detail {
class TracedGradValues;
}

class DistributedDataParallel {
 public:
  // `module` must outlive the DDP object and live on group.device().
  DistributedDataParallel(Module& module, ProcessGroup& group, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Tensor forward(const Tensor& input);
  // The module's backward with bucketed, overlapped gradient averaging (see the header comment).
  void backward(const Tensor& grad_output);

  // While a NoSync guard lives, backward() does not synchronize gradients.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), saved_(ddp.require_sync_) {
      ddp_.require_sync_ = false;
    }
    ~NoSync() { ddp_.require_sync_ = saved_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool saved_;
  };
  NoSync no_sync() { return NoSync(*this); }

  Module& module() { return module_; }
  ProcessGroup& group() { return group_; }
  const DdpOptions& options() const { return options_; }
  const std::vector<DdpBucket>& buckets() const { return buckets_; }
  bool buckets_rebuilt() const { return rebuilt_; }
  // Parameter indices in the order their gradients became ready in the first synchronized backward.
  const std::vector<int>& ready_order() const { return ready_order_; }
  // module()'s state with every key prefixed by "module.", as PyTorch saves a DDP model.
  StateDict state_dict() const;

 private:
  void verify_same_model();
  void broadcast_parameters();
  void assign_buckets(const std::vector<std::vector<int>>& assignment, BucketReason reason);
  void rebuild_buckets();
  void ensure_prior_reduction_finished();
  void on_grad_ready(Parameter& param);
  void mark_ready(int index);
  void launch_ready_buckets();
  void finalize();

  Module& module_;
  ProcessGroup& group_;
  DdpOptions options_;
  std::vector<Parameter*> params_;
  std::vector<DdpBucket> buckets_;
  std::vector<std::pair<int, int>> locator_;  // param index → (bucket, slot in bucket)
  std::vector<bool> marked_;                  // param index → ready in this backward
  std::vector<int> ready_order_;
  int64_t hook_id_ = -1;
  // Traced gradient values (before and after the all-reduce); on a GPU written at the next
  // forward(), when the step that took them has ended (parallel/grad_values.hpp).
  std::unique_ptr<detail::TracedGradValues> traced_values_;
  size_t next_bucket_ = 0;
  bool require_sync_ = true;
  bool expect_hooks_ = false;      // a synchronized forward ran; its backward reduces
  bool require_finalize_ = false;  // a reduction started and did not finish
  bool unused_marked_ = false;
  bool rebuilt_ = false;
  int64_t iterations_ = 0;  // synchronized backwards finished
};

}  // namespace dpscope
