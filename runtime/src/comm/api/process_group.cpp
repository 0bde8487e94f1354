// ProcessGroup: backend-independent argument checks, then the Backend (init: init_process_group.cpp).
#include "dpscope/comm/process_group.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "dpscope/base/error.hpp"

namespace dpscope {
namespace {

void check_same_kind(const Tensor& a, const Tensor& b, OpType op, int rank, const char* what) {
  DPS_CHECK(a.dtype() == b.dtype(), ErrorKind::kInvalidArgument, "{} on rank {}: {} is {}, expected {}",
            api_name(op), rank, what, to_string(b.dtype()), to_string(a.dtype()));
  DPS_CHECK(a.has_data() == b.has_data(), ErrorKind::kInvalidArgument,
            "{} on rank {}: tensors must all have data or all be timing-only (meta); {} differs",
            api_name(op), rank, what);
}

void check_avg_dtype(ReduceOp op, const Tensor& t, OpType type) {
  // The backends average float32 data. A meta tensor (timing-only) may be of any element type, as
  // NCCL's ncclAvg takes integers too (their sum divided by the ranks).
  DPS_CHECK(op != ReduceOp::kAvg || t.dtype() == DType::kF32 || !t.has_data(), ErrorKind::kInvalidArgument,
            "{}: ReduceOp avg needs float32 tensors, got {}", api_name(type), to_string(t.dtype()));
}

// The bytes a tensor's data occupies, [first, last); empty for meta and empty tensors.
std::pair<uintptr_t, uintptr_t> data_range(const Tensor& t) {
  if (!t.has_data() || t.numel() == 0) return {0, 0};
  const void* p =
      t.dtype() == DType::kF32 ? static_cast<const void*>(t.f32()) : static_cast<const void*>(t.i64());
  const auto first = reinterpret_cast<uintptr_t>(p);
  return {first, first + t.nbytes()};
}

// An out-of-place call's `output` and `input` (all_reduce_into, ...): same numel and kind; true
// when they are one buffer (the call is then the in-place form), false when they do not overlap;
// a partial overlap is refused (NCCL's results are undefined there).
bool same_buffer(const Tensor& output, const Tensor& input, OpType op, int rank, const char* call) {
  check_same_kind(output, input, op, rank, "the input");
  DPS_CHECK(output.numel() == input.numel(), ErrorKind::kInvalidArgument,
            "{} on rank {}: output has {} elements, input {}; they must hold the same number", call, rank,
            output.numel(), input.numel());
  const auto [out_first, out_last] = data_range(output);
  const auto [in_first, in_last] = data_range(input);
  if (out_first == in_first && out_last == in_last) return out_first != 0;
  DPS_CHECK(out_last <= in_first || in_last <= out_first, ErrorKind::kInvalidArgument,
            "{} on rank {}: output and input overlap in part; pass one tensor (in place) or two that do "
            "not overlap (out of place)",
            call, rank);
  return false;
}

}  // namespace

ProcessGroup::ProcessGroup(std::unique_ptr<Backend> backend) : backend_(std::move(backend)) {
  DPS_ASSERT(backend_ != nullptr, "a ProcessGroup needs a backend");
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::check_tensor(const Tensor& tensor, OpType op, const char* what) const {
  DPS_CHECK(tensor.defined(), ErrorKind::kInvalidArgument, "{} on rank {}: {} is undefined", api_name(op),
            rank(), what);
  DPS_CHECK(tensor.device() == device(), ErrorKind::kDevice,
            "{} on rank {}: {} is on {}, but this rank's device is {}", api_name(op), rank(), what,
            tensor.device().name(), device().name());
}

void ProcessGroup::check_root(int root, OpType op) const {
  DPS_CHECK(root >= 0 && root < size(), ErrorKind::kInvalidArgument,
            "{}: root {} out of range for a group of {} ranks (expected 0..{})", api_name(op), root, size(),
            size() - 1);
}

void ProcessGroup::check_peer(int peer, OpType op) const {
  DPS_CHECK(peer >= 0 && peer < size(), ErrorKind::kInvalidArgument,
            "{} on rank {}: peer rank {} out of range for a group of {} ranks", api_name(op), rank(), peer,
            size());
  DPS_CHECK(peer != rank(), ErrorKind::kInvalidArgument, "{} on rank {}: a rank cannot {} itself",
            api_name(op), rank(), op == OpType::kSend ? "send to" : "receive from");
}

std::shared_ptr<Work> ProcessGroup::all_reduce(Tensor& tensor, const AllreduceOptions& options) {
  check_tensor(tensor, OpType::kAllReduce, "tensor");
  check_avg_dtype(options.op, tensor, OpType::kAllReduce);
  return backend_->all_reduce(tensor, options);
}

std::shared_ptr<Work> ProcessGroup::broadcast(Tensor& tensor, const BroadcastOptions& options) {
  check_tensor(tensor, OpType::kBroadcast, "tensor");
  check_root(options.root, OpType::kBroadcast);
  return backend_->broadcast(tensor, options);
}

std::shared_ptr<Work> ProcessGroup::reduce(Tensor& tensor, const ReduceOptions& options) {
  check_tensor(tensor, OpType::kReduce, "tensor");
  check_root(options.root, OpType::kReduce);
  check_avg_dtype(options.op, tensor, OpType::kReduce);
  return backend_->reduce(tensor, options);
}

std::shared_ptr<Work> ProcessGroup::all_reduce_into(Tensor& output, const Tensor& input,
                                                    const AllreduceOptions& options) {
  check_tensor(output, OpType::kAllReduce, "output");
  check_tensor(input, OpType::kAllReduce, "input");
  check_avg_dtype(options.op, output, OpType::kAllReduce);
  if (same_buffer(output, input, OpType::kAllReduce, rank(), "all_reduce_into"))
    return backend_->all_reduce(output, options);
  return backend_->all_reduce_into(output, input, options);
}

std::shared_ptr<Work> ProcessGroup::broadcast_into(Tensor& output, const Tensor& input,
                                                   const BroadcastOptions& options) {
  check_tensor(output, OpType::kBroadcast, "output");
  check_tensor(input, OpType::kBroadcast, "input");
  check_root(options.root, OpType::kBroadcast);
  if (same_buffer(output, input, OpType::kBroadcast, rank(), "broadcast_into"))
    return backend_->broadcast(output, options);
  return backend_->broadcast_into(output, input, options);
}

std::shared_ptr<Work> ProcessGroup::reduce_into(Tensor& output, const Tensor& input,
                                                const ReduceOptions& options) {
  check_tensor(output, OpType::kReduce, "output");
  check_tensor(input, OpType::kReduce, "input");
  check_root(options.root, OpType::kReduce);
  check_avg_dtype(options.op, output, OpType::kReduce);
  if (same_buffer(output, input, OpType::kReduce, rank(), "reduce_into"))
    return backend_->reduce(output, options);
  return backend_->reduce_into(output, input, options);
}

std::shared_ptr<Work> ProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                               const AllgatherOptions& options) {
  const OpType op = OpType::kAllGather;
  check_tensor(input, op, "input");
  DPS_CHECK(static_cast<int>(outputs.size()) == size(), ErrorKind::kInvalidArgument,
            "all_gather on rank {}: expected {} output tensors (one per rank), got {}", rank(), size(),
            outputs.size());
  for (const Tensor& out : outputs) {
    check_tensor(out, op, "an output");
    check_same_kind(input, out, op, rank(), "an output");
    check_shape(out, input.shape(), "all_gather", "every output");
  }
  return backend_->all_gather(outputs, input, false, options);
}

std::shared_ptr<Work> ProcessGroup::all_gather_into_tensor(Tensor& output, const Tensor& input,
                                                           const AllgatherOptions& options) {
  const OpType op = OpType::kAllGather;
  check_tensor(input, op, "input");
  check_tensor(output, op, "output");
  check_same_kind(input, output, op, rank(), "the output");
  DPS_CHECK(output.numel() == input.numel() * size(), ErrorKind::kInvalidArgument,
            "all_gather_into_tensor on rank {}: output has {} elements, expected {} ranks x {} = {}", rank(),
            output.numel(), size(), input.numel(), input.numel() * size());
  std::vector<Tensor> outputs{output};
  return backend_->all_gather(outputs, input, true, options);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                                   const ReduceScatterOptions& options) {
  const OpType op = OpType::kReduceScatter;
  check_tensor(output, op, "output");
  check_avg_dtype(options.op, output, op);
  DPS_CHECK(static_cast<int>(inputs.size()) == size(), ErrorKind::kInvalidArgument,
            "reduce_scatter on rank {}: expected {} input tensors (one per rank), got {}", rank(), size(),
            inputs.size());
  for (const Tensor& in : inputs) {
    check_tensor(in, op, "an input");
    check_same_kind(output, in, op, rank(), "an input");
    check_shape(in, output.shape(), "reduce_scatter", "every input");
  }
  return backend_->reduce_scatter(output, inputs, false, options);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                                          const ReduceScatterOptions& options) {
  const OpType op = OpType::kReduceScatter;
  check_tensor(output, op, "output");
  check_tensor(input, op, "input");
  check_same_kind(output, input, op, rank(), "the input");
  check_avg_dtype(options.op, output, op);
  DPS_CHECK(input.numel() % size() == 0, ErrorKind::kInvalidArgument,
            "reduce_scatter_tensor on rank {}: input has {} elements, not divisible by the group size {}",
            rank(), input.numel(), size());
  DPS_CHECK(output.numel() * size() == input.numel(), ErrorKind::kInvalidArgument,
            "reduce_scatter_tensor on rank {}: output has {} elements, expected {} / {} = {}", rank(),
            output.numel(), input.numel(), size(), input.numel() / size());
  return backend_->reduce_scatter(output, {input}, true, options);
}

std::shared_ptr<Work> ProcessGroup::scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                            const ScatterOptions& options) {
  const OpType op = OpType::kScatter;
  check_tensor(output, op, "output");
  check_root(options.root, op);
  if (rank() == options.root) {
    DPS_CHECK(static_cast<int>(inputs.size()) == size(), ErrorKind::kInvalidArgument,
              "scatter on root rank {}: expected {} input tensors (one per rank), got {}", rank(), size(),
              inputs.size());
    for (const Tensor& in : inputs) {
      check_tensor(in, op, "an input");
      check_same_kind(output, in, op, rank(), "an input");
      check_shape(in, output.shape(), "scatter", "every input");
    }
  } else {
    DPS_CHECK(inputs.empty(), ErrorKind::kInvalidArgument,
              "scatter on rank {}: only the root (rank {}) passes inputs, got {}", rank(), options.root,
              inputs.size());
  }
  return backend_->scatter(output, inputs, options);
}

std::shared_ptr<Work> ProcessGroup::gather(const Tensor& input, std::vector<Tensor>& outputs,
                                           const GatherOptions& options) {
  const OpType op = OpType::kGather;
  check_tensor(input, op, "input");
  check_root(options.root, op);
  if (rank() == options.root) {
    DPS_CHECK(static_cast<int>(outputs.size()) == size(), ErrorKind::kInvalidArgument,
              "gather on root rank {}: expected {} output tensors (one per rank), got {}", rank(), size(),
              outputs.size());
    for (const Tensor& out : outputs) {
      check_tensor(out, op, "an output");
      check_same_kind(input, out, op, rank(), "an output");
      check_shape(out, input.shape(), "gather", "every output");
    }
  } else {
    DPS_CHECK(outputs.empty(), ErrorKind::kInvalidArgument,
              "gather on rank {}: only the root (rank {}) passes outputs, got {}", rank(), options.root,
              outputs.size());
  }
  return backend_->gather(input, outputs, options);
}

std::shared_ptr<Work> ProcessGroup::all_to_all_single(Tensor& output, const Tensor& input,
                                                      const AllToAllOptions& options) {
  const OpType op = OpType::kAllToAll;
  check_tensor(output, op, "output");
  check_tensor(input, op, "input");
  check_same_kind(input, output, op, rank(), "the output");
  // c10d's checkSplitSizes wording for equal splits: "Tensor's dim 0 does not divide equally
  // across group size".
  for (const auto& [what, t] :
       {std::pair<const char*, const Tensor*>{"input", &input}, {"output", &output}}) {
    DPS_CHECK(t->dim() >= 1, ErrorKind::kInvalidArgument,
              "all_to_all_single on rank {}: the {} is a scalar; it needs a first dimension to split", rank(),
              what);
    DPS_CHECK(t->shape()[0] % size() == 0, ErrorKind::kInvalidArgument,
              "all_to_all_single on rank {}: Tensor's dim 0 does not divide equally across group size ({} "
              "dim 0 is {}, group size {})",
              rank(), what, t->shape()[0], size());
  }
  DPS_CHECK(output.numel() == input.numel(), ErrorKind::kInvalidArgument,
            "all_to_all_single on rank {}: output has {} elements but input has {} (equal splits send "
            "and receive the same amount)",
            rank(), output.numel(), input.numel());
  return backend_->all_to_all_single(output, input, options);
}

std::shared_ptr<Work> ProcessGroup::barrier(const BarrierOptions& options) {
  return backend_->barrier(options);
}

std::shared_ptr<Work> ProcessGroup::send(const Tensor& tensor, int dst, const PointToPointOptions& options) {
  check_tensor(tensor, OpType::kSend, "tensor");
  check_peer(dst, OpType::kSend);
  return backend_->send(tensor, dst, options);
}

std::shared_ptr<Work> ProcessGroup::recv(Tensor& tensor, int src, const PointToPointOptions& options) {
  check_tensor(tensor, OpType::kRecv, "tensor");
  check_peer(src, OpType::kRecv);
  return backend_->recv(tensor, src, options);
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(std::vector<int> ranks,
                                                      const NewGroupOptions& options) {
  DPS_CHECK(!ranks.empty(), ErrorKind::kInvalidArgument, "new_group: the list of ranks is empty");
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    DPS_CHECK(ranks[i] >= 0 && ranks[i] < size(), ErrorKind::kInvalidArgument,
              "new_group: rank {} out of range for a group of {} ranks", ranks[i], size());
    DPS_CHECK(i == 0 || ranks[i] != ranks[i - 1], ErrorKind::kInvalidArgument,
              "new_group: rank {} listed twice", ranks[i]);
  }
  std::unique_ptr<Backend> sub = backend_->new_group(ranks, options);
  return sub ? std::make_shared<ProcessGroup>(std::move(sub)) : nullptr;
}

}  // namespace dpscope
