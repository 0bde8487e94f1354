// ZeroRedundancyOptimizer: ZeRO stage 1 — each rank keeps optimizer state only for its shard of the
// parameters — as torch.distributed.optim.ZeroRedundancyOptimizer (PyTorch 1.13) does it
// (torch/distributed/optim/zero_redundancy_optimizer.py; docs/parallel.md). Used with
// DistributedDataParallel, which has already averaged the gradients when step() runs; the examples'
// DDP + checkpoint program and `dpscope train --zero` use it, and per-device memory bars show the
// saving.
//
//   ZeroRedundancyOptimizer zero(model->parameters(), group,
//                                [](std::vector<Parameter*> shard) {
//                                  return std::make_unique<Adam>(shard, AdamOptions{.lr = 1e-3});
//                                });
//   ... ddp.backward(...); zero.step();          // every rank ends with the same parameters
//
// Partition (sorted-greedy, PyTorch's `_partition_parameters`): parameters sorted by numel, largest
// first (stable: equal sizes keep their list order), each given whole to the rank with the smallest
// total numel so far (ties: the lowest rank). Each rank's local optimizer — built by the factory
// over that rank's shard, like PyTorch's optimizer_class(**defaults) — holds state only for the
// shard, so MemoryCategory::kOptimizerState on a rank's device is that shard's state (Adam: 2 × the
// shard's parameter bytes, instead of 2 × the model's).
//
// step(): the local optimizer updates the shard; then, for owner rank r = 0 .. n-1 in order, rank r's
// shard is coalesced into one flat buffer (in partition order) and broadcast from r (PyTorch 1.13
// broadcasts the same data tensor by tensor; one collective per rank here, as its
// parameters_as_bucket_view=True does). All ranks then hold bit-identical parameters. The
// broadcasts are traced by the comm layer; the whole sync is marked by a span
// "optimizer.sync_params" (category `phase`) on the compute stream, in phase `optimizer`.
//
// It is an Optimizer (optim/optimizer.hpp): a training loop drives it exactly like SGD or Adam —
// zero_grad(), step(), and for a checkpoint consolidate_state_dict(0) on every rank then
// state_tensors() on rank 0 — so `dpscope train --zero` needs no branch of its own.
//
// Checkpoints: consolidate_state_dict(to) (collective) gathers every shard's state on rank `to`,
// kept on the cpu as PyTorch does; state_dict() there returns it keyed like a plain optimizer's
// state_tensors() ("0.weight.exp_avg", ...), in the same order, so rank 0's checkpoint loads into a
// non-sharded optimizer. load_state_dict(full state) on every rank keeps only its shard's entries.
// state_tensors() and load_state_tensors(), the Optimizer names, are state_dict() and load_state_dict().
//
// Thread semantics: one object per rank thread; every rank must construct it and call step() and
// consolidate_state_dict() in the same order (they are collective). A rank whose shard is empty
// (more ranks than parameters) has no local optimizer but still takes part in every collective.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpscope/comm/process_group.hpp"
#include "dpscope/optim/optimizer.hpp"

namespace dpscope {

// Builds the wrapped optimizer (SGD, Adam, AdamW, ...) over exactly the parameters it is given.
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<Parameter*> shard)>;

// PyTorch's sorted-greedy partition of parameters with `numels` elements over `world_size` ranks:
// result[r] lists the parameter indices rank r owns, in the order they were assigned (largest
// first). Throws kInvalidArgument when world_size < 1 or a numel is negative.
std::vector<std::vector<int>> partition_parameters_sorted_greedy(const std::vector<int64_t>& numels,
                                                                 int world_size);

class ZeroRedundancyOptimizer final : public Optimizer {
 public:
  // Every parameter must live on group.device(). Throws kInvalidArgument on an empty list
  // ("ZeroRedundancyOptimizer got an empty parameter list", as PyTorch), a null or repeated parameter, a
  // parameter on another device, an empty factory, or a factory whose optimizer is null or holds other
  // parameters than its shard. A rank with an empty shard calls the factory once with all parameters to learn
  // the optimizer's type and slot names (an optimizer holds no state before its first step) and drops it.
  ZeroRedundancyOptimizer(std::vector<Parameter*> params, ProcessGroup& group,
                          OptimizerFactory make_local_optimizer);
  ~ZeroRedundancyOptimizer() override;

  const char* type_name() const override { return "ZeroRedundancyOptimizer"; }
  // The local optimizer's step on this rank's shard, then the owners' broadcasts (collective).
  // zero_grad() (inherited) clears the gradients of ALL parameters, as PyTorch's does.
  void step() override;
  // The wrapped optimizer's slot names.
  std::vector<std::string> slot_names() const override { return slot_names_; }

  // Collective: every rank must call it with the same `to`. Afterwards state_dict() on rank `to`
  // returns the full state as of this call; on other ranks any earlier consolidation is dropped.
  // Throws kInvalidArgument when `to` is not a rank of the group.
  void consolidate_state_dict(int to = 0) override;
  // The consolidated full state, in a plain optimizer's state_tensors() order and key format
  // (tensors on the cpu). Throws kInvalidArgument with PyTorch's words when this rank holds no
  // consolidated state: "Optimizer state has not been consolidated on this rank. Please call
  // `consolidate_state_dict(to=<this rank>)` on all ranks beforehand if you meant to save the
  // global state."
  StateDict state_dict() const;
  // Loads the entries of a full state (keys "<param name>.<slot>") that belong to this rank's shard
  // into the local optimizer (replacing its state); other entries are checked and skipped. Throws
  // kInvalidArgument on a key that names no parameter or slot, and whatever the local optimizer's
  // load_state_tensors() throws for this shard's entries.
  void load_state_dict(const StateDict& full_state);
  StateDict state_tensors() const override { return state_dict(); }
  void load_state_tensors(const StateDict& full_state) override { load_state_dict(full_state); }

  // ---- introspection (params(), all of them, is the Optimizer's) ----
  // partition()[r]: indices into params() owned by rank r, in assignment order.
  const std::vector<std::vector<int>>& partition() const { return partition_; }
  // The rank that owns params()[index]; throws kInvalidArgument for an index out of range.
  int rank_of(int index) const;
  // This rank's shard (params() entries, in partition order).
  const std::vector<Parameter*>& local_params() const { return local_params_; }
  // The wrapped optimizer over local_params(), or nullptr when the shard is empty.
  Optimizer* local_optimizer() { return local_optimizer_.get(); }
  const Optimizer* local_optimizer() const { return local_optimizer_.get(); }
  const std::string& optimizer_type() const { return optimizer_type_; }  // "SGD", "Adam", ...
  ProcessGroup& group() { return group_; }

 private:
  void sync_params();

  ProcessGroup& group_;
  const std::vector<Parameter*>& params_;    // Optimizer::params(): every parameter, in the caller's order
  std::vector<std::vector<int>> partition_;  // [rank] -> indices into params_
  std::vector<int> owner_;                   // [param index] -> rank
  std::vector<Parameter*> local_params_;
  std::unique_ptr<Optimizer> local_optimizer_;
  std::string optimizer_type_;
  std::vector<std::string> slot_names_;
  StateDict consolidated_;  // the last consolidation received by this rank (cpu tensors)
  bool has_consolidated_ = false;
};

}  // namespace dpscope
