// SimBackend's collectives: each op prepares this rank's fingerprint and buffer (the schedule.hpp
// layout), then run() joins the group, executes the data steps and applies the simulated (or, on
// the cuda data path, measured) times. Buffers are only ever touched through the DataPath.
#include "sim_backend.hpp"

#include <algorithm>
#include <cmath>

#include "../algorithms/collective_choice.hpp"
#include "../api/builtin_backends.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope::detail {

std::byte* raw_data(const Tensor& tensor) {
  if (!tensor.has_data() || tensor.numel() == 0) return nullptr;
  const void* p = tensor.dtype() == DType::kF32 ? static_cast<const void*>(tensor.f32())
                                                : static_cast<const void*>(tensor.i64());
  // Collectives write into tensors the caller passed as outputs; const only marks inputs.
  return static_cast<std::byte*>(const_cast<void*>(p));
}

namespace {

RankBuffer single_block(const Tensor& t) { return {{raw_data(t)}, t.numel()}; }

}  // namespace

SimBackend::SimBackend(std::shared_ptr<SimWorld> world, std::shared_ptr<GroupState> group, int rank,
                       Milliseconds timeout, const char* name, std::shared_ptr<DataPath> path)
    : world_(std::move(world)),
      group_(std::move(group)),
      name_(name),
      path_(path ? std::move(path) : host_data_path()),
      rank_(rank),
      device_(world_->device(group_->global_ranks.at(rank))),
      timeout_(timeout.count() > 0 ? timeout : group_->timeout) {}

Milliseconds SimBackend::timeout_or_default(Milliseconds timeout) const {
  return timeout.count() > 0 ? timeout : timeout_;
}

Algorithm SimBackend::algorithm_for(OpType op, Algorithm requested) const {
  return resolve_algorithm(op, requested, world_->default_algorithm());
}

Signature SimBackend::signature_for(OpType op, const Tensor& sizing,
                                    std::optional<Algorithm> algorithm) const {
  Signature s;
  s.op = op;
  s.dtype = sizing.dtype();
  s.shape = sizing.shape();
  s.algorithm = algorithm;
  s.meta = !sizing.has_data();
  return s;
}

CallResult SimBackend::run(Call& call, const std::function<void(const Plan&)>& finish) {
  const int64_t seq = next_seq_++;
  const Milliseconds timeout = timeout_or_default(call.timeout);
  auto work = std::make_shared<SimWork>(world_, device_, call.op, seq, rank_, timeout);
  Arrival arrival;
  arrival.signature = call.signature;
  arrival.ready_ns = std::max(device_.clock_ns(StreamKind::kComm), device_.clock_ns(StreamKind::kCompute));
  arrival.buffer = call.buffer;
  arrival.input = call.input;
  arrival.complete_output = call.complete_output;
  arrival.slices = call.slices;
  arrival.new_group_timeout = call.new_group_timeout;
  if (!call.signature.meta) {
    try {
      path_->fence(device_);  // peers may read this rank's buffers once everyone arrived
    } catch (const Error& e) {
      work->fail(e.kind(), e.what());
      return {work, nullptr};
    }
  }
  JoinResult joined = join_collective(*world_, *group_, rank_, seq, std::move(arrival), timeout);
  if (joined.failure) {
    // A failure found at a simulated time (a mismatch, when the last rank arrived) kept this
    // rank's comm stream busy until then; wait() makes the compute stream learn of it no earlier.
    if (joined.failure->found_ns >= 0 && !path_->measured())
      device_.wait_until(StreamKind::kComm, joined.failure->found_ns);
    work->fail(joined.failure->kind, joined.failure->message,
               path_->measured() ? -1 : joined.failure->found_ns);
    return {work, nullptr};
  }
  const Plan& plan = *joined.plan;
  if (path_->measured()) {
    // Device times: the comm stream's events around this rank's part, traced by the rank itself.
    try {
      const Event begin = device_.record(StreamKind::kComm);
      std::vector<int64_t> step_end_ns;
      if (plan.with_data) step_end_ns = execute_steps(plan, *joined.rendezvous, rank_, timeout, *path_);
      if (plan.with_data && finish) finish(plan);
      path_->fence(device_);
      const Event end = device_.record(StreamKind::kComm);
      const int64_t begin_ns = event_time(device_, begin);
      const int64_t end_ns = begin_ns + device_.elapsed_ns(begin, end);
      write_measured_trace(plan, rank_, begin_ns, step_end_ns, end_ns);
      work->complete(begin_ns, end_ns, false);
    } catch (const Error& e) {
      work->fail(e.kind(), e.what());
      return {work, nullptr};
    }
    return {work, joined.plan};
  }
  if (plan.with_data) {
    try {
      execute_steps(plan, *joined.rendezvous, rank_, timeout, *path_);
      if (finish) finish(plan);
    } catch (const Error& e) {
      work->fail(e.kind(), e.what());
      return {work, nullptr};
    }
  }
  device_.wait_until(StreamKind::kComm, plan.end_ns[rank_]);
  work->complete(plan.start_ns[rank_], plan.end_ns[rank_], false);
  return {work, joined.plan};
}

std::shared_ptr<Work> SimBackend::all_reduce(Tensor& tensor, const AllreduceOptions& options) {
  return all_reduce_impl(tensor, nullptr, options);
}

std::shared_ptr<Work> SimBackend::all_reduce_into(Tensor& output, const Tensor& input,
                                                  const AllreduceOptions& options) {
  return all_reduce_impl(output, &input, options);
}

std::shared_ptr<Work> SimBackend::all_reduce_impl(Tensor& tensor, const Tensor* input,
                                                  const AllreduceOptions& options) {
  path_->prepare(device_);
  Call call{OpType::kAllReduce,
            signature_for(OpType::kAllReduce, tensor, algorithm_for(OpType::kAllReduce, options.algorithm))};
  call.signature.reduce_op = options.op;
  call.buffer = single_block(tensor);
  if (input != nullptr && input->has_data()) {
    call.input = single_block(*input);
    call.complete_output = true;
  }
  call.slices = options.slices;
  call.timeout = options.timeout;
  TraceSink* tracer = options.trace_values && tensor.has_data() ? device_.tracer() : nullptr;
  auto trace_values = [&](const Tensor& t, ValuesWhen when, int64_t ts) {
    // The first values and the norm of a float32 tensor (an int64 one is traced without values).
    const bool f32 = t.dtype() == DType::kF32;
    const std::vector<float> first =
        f32 ? t.reshape({t.numel()}).rows(0, std::min<int64_t>(t.numel(), 4)).to_vector()
            : std::vector<float>{};
    tracer->values(device_, ts,
                   {.name = EventName::kAllReduce,
                    .param = -1,
                    .when = when,
                    .values = first,
                    .norm = f32 ? kernels::l2_norm(t) : 0.0});
  };
  if (tracer != nullptr)
    trace_values(input != nullptr ? *input : tensor, ValuesWhen::kBeforeReduce,
                 std::max(device_.clock_ns(StreamKind::kComm), device_.clock_ns(StreamKind::kCompute)));
  const int n = size();
  CallResult result = run(call, [&](const Plan&) {
    if (options.op == ReduceOp::kAvg) path_->divide(device_, call.buffer.blocks[0], tensor.numel(), n);
  });
  if (tracer != nullptr && result.plan)
    trace_values(tensor, ValuesWhen::kAfterReduce,
                 path_->measured() ? result.work->end_ns() : result.plan->end_ns[rank_]);
  return result.work;
}

std::shared_ptr<Work> SimBackend::broadcast(Tensor& tensor, const BroadcastOptions& options) {
  return broadcast_impl(tensor, nullptr, options);
}

std::shared_ptr<Work> SimBackend::broadcast_into(Tensor& output, const Tensor& input,
                                                 const BroadcastOptions& options) {
  return broadcast_impl(output, &input, options);
}

std::shared_ptr<Work> SimBackend::broadcast_impl(Tensor& tensor, const Tensor* input,
                                                 const BroadcastOptions& options) {
  path_->prepare(device_);
  Call call{OpType::kBroadcast,
            signature_for(OpType::kBroadcast, tensor, algorithm_for(OpType::kBroadcast, options.algorithm))};
  call.signature.root = options.root;
  call.buffer = single_block(tensor);
  // Only the root's data is read: its input is the source, and its output a copy of it.
  if (input != nullptr && input->has_data() && rank_ == options.root) {
    call.input = single_block(*input);
    call.complete_output = true;
  }
  call.slices = options.slices;
  call.timeout = options.timeout;
  return run(call).work;
}

std::shared_ptr<Work> SimBackend::reduce(Tensor& tensor, const ReduceOptions& options) {
  return reduce_impl(tensor, nullptr, options);
}

std::shared_ptr<Work> SimBackend::reduce_into(Tensor& output, const Tensor& input,
                                              const ReduceOptions& options) {
  return reduce_impl(output, &input, options);
}

std::shared_ptr<Work> SimBackend::reduce_impl(Tensor& tensor, const Tensor* input,
                                              const ReduceOptions& options) {
  path_->prepare(device_);
  Call call{OpType::kReduce,
            signature_for(OpType::kReduce, tensor, algorithm_for(OpType::kReduce, options.algorithm))};
  call.signature.root = options.root;
  call.signature.reduce_op = options.op;
  call.slices = options.slices;
  call.timeout = options.timeout;
  call.buffer = single_block(tensor);
  const bool out_of_place = input != nullptr && input->has_data();
  if (out_of_place) call.input = single_block(*input);
  if (rank_ != options.root && tensor.has_data() && tensor.numel() > 0) {
    // Non-roots accumulate partial results in scratch, so their tensor stays as it was. In place
    // the scratch starts as a copy of it; out of place the schedule reads the input where the
    // scratch holds nothing yet.
    call.scratch = path_->scratch(device_, tensor.nbytes());
    if (!out_of_place) path_->copy(device_, call.scratch.get(), device_, raw_data(tensor), tensor.nbytes());
    call.buffer.blocks = {call.scratch.get()};
  }
  call.complete_output = out_of_place && rank_ == options.root;
  const int n = size();
  return run(call,
             [&](const Plan&) {
               if (options.op == ReduceOp::kAvg && rank_ == options.root)
                 path_->divide(device_, raw_data(tensor), tensor.numel(), n);
             })
      .work;
}

std::shared_ptr<Work> SimBackend::all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                             bool flat_output, const AllgatherOptions& options) {
  path_->prepare(device_);
  Call call{OpType::kAllGather,
            signature_for(OpType::kAllGather, input, algorithm_for(OpType::kAllGather, options.algorithm))};
  call.slices = options.slices;
  call.timeout = options.timeout;
  const int n = size();
  const int64_t block = input.numel();
  call.buffer.block_elems = block;
  if (input.has_data()) {
    for (int r = 0; r < n; ++r) {
      std::byte* base = flat_output ? raw_data(outputs[0]) : raw_data(outputs[r]);
      if (flat_output && base != nullptr)
        base += static_cast<size_t>(r * block) * element_size(input.dtype());
      call.buffer.blocks.push_back(base);
    }
    if (block > 0)
      path_->copy(device_, call.buffer.blocks[rank_], device_, raw_data(input),
                  static_cast<uint64_t>(block) * element_size(input.dtype()));
  }
  return run(call).work;
}

std::shared_ptr<Work> SimBackend::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                                 bool flat_input, const ReduceScatterOptions& options) {
  path_->prepare(device_);
  Call call{OpType::kReduceScatter, signature_for(OpType::kReduceScatter, output,
                                                  algorithm_for(OpType::kReduceScatter, options.algorithm))};
  call.signature.reduce_op = options.op;
  call.slices = options.slices;
  call.timeout = options.timeout;
  const int n = size();
  const int64_t block = output.numel();
  const size_t block_bytes = static_cast<size_t>(block) * element_size(output.dtype());
  call.buffer.block_elems = block;
  if (output.has_data()) {
    // Work on a copy of the inputs (they stay unchanged); block r ends up holding the result.
    if (block_bytes > 0) call.scratch = path_->scratch(device_, block_bytes * n);
    for (int r = 0; r < n; ++r) {
      const std::byte* src = flat_input ? raw_data(inputs[0]) : raw_data(inputs[r]);
      if (flat_input && src != nullptr) src += block_bytes * r;
      std::byte* dst = block_bytes > 0 ? call.scratch.get() + block_bytes * r : nullptr;
      if (block_bytes > 0) path_->copy(device_, dst, device_, src, block_bytes);
      call.buffer.blocks.push_back(dst);
    }
  }
  return run(call,
             [&](const Plan&) {
               if (block_bytes > 0)
                 path_->copy(device_, raw_data(output), device_, call.buffer.blocks[rank_], block_bytes);
               if (options.op == ReduceOp::kAvg) path_->divide(device_, raw_data(output), block, n);
             })
      .work;
}

std::shared_ptr<Work> SimBackend::scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                          const ScatterOptions& options) {
  path_->prepare(device_);
  Call call{OpType::kScatter, signature_for(OpType::kScatter, output, std::nullopt)};
  call.signature.root = options.root;
  call.timeout = options.timeout;
  call.buffer = single_block(output);
  if (rank_ == options.root && output.has_data()) {
    call.buffer.blocks.clear();
    for (const Tensor& t : inputs) call.buffer.blocks.push_back(raw_data(t));
    if (output.numel() > 0)
      path_->copy(device_, raw_data(output), device_, raw_data(inputs[rank_]), output.nbytes());
  }
  return run(call).work;
}

std::shared_ptr<Work> SimBackend::gather(const Tensor& input, std::vector<Tensor>& outputs,
                                         const GatherOptions& options) {
  path_->prepare(device_);
  Call call{OpType::kGather, signature_for(OpType::kGather, input, std::nullopt)};
  call.signature.root = options.root;
  call.timeout = options.timeout;
  call.buffer = single_block(input);
  if (rank_ == options.root && input.has_data()) {
    call.buffer.blocks.clear();
    for (const Tensor& t : outputs) call.buffer.blocks.push_back(raw_data(t));
    if (input.numel() > 0)
      path_->copy(device_, raw_data(outputs[rank_]), device_, raw_data(input), input.nbytes());
  }
  return run(call).work;
}

std::shared_ptr<Work> SimBackend::all_to_all_single(Tensor& output, const Tensor& input,
                                                    const AllToAllOptions& options) {
  path_->prepare(device_);
  // One schedule (pairwise): no algorithm in the fingerprint, as scatter and gather.
  Call call{OpType::kAllToAll, signature_for(OpType::kAllToAll, input, std::nullopt)};
  call.timeout = options.timeout;
  const int n = size();
  const int64_t block = input.numel() / n;
  const size_t block_bytes = static_cast<size_t>(block) * element_size(input.dtype());
  call.buffer.block_elems = block;
  if (input.has_data()) {
    // Blocks 0..n-1: a copy of the input (so an output that is the input is safe), n..2n-1: the
    // output. This rank's own block moves locally; the schedule moves the other n-1.
    if (block_bytes > 0) {
      call.scratch = path_->scratch(device_, block_bytes * n);
      path_->copy(device_, call.scratch.get(), device_, raw_data(input), block_bytes * n);
    }
    for (int j = 0; j < 2 * n; ++j) {
      std::byte* base = j < n ? call.scratch.get() : raw_data(output);
      call.buffer.blocks.push_back(block_bytes > 0 ? base + block_bytes * (j % n) : nullptr);
    }
    if (block_bytes > 0)
      path_->copy(device_, call.buffer.blocks[n + rank_], device_, call.buffer.blocks[rank_], block_bytes);
  }
  return run(call).work;
}

std::shared_ptr<Work> SimBackend::barrier(const BarrierOptions& options) {
  Call call;
  call.op = OpType::kBarrier;
  call.signature.op = OpType::kBarrier;
  call.signature.meta = true;  // no data steps
  call.timeout = options.timeout;
  return run(call).work;
}

std::unique_ptr<Backend> SimBackend::new_group(const std::vector<int>& ranks,
                                               const NewGroupOptions& options) {
  Call call;
  call.op = OpType::kNewGroup;
  call.signature.op = OpType::kNewGroup;
  call.signature.ranks = ranks;
  call.signature.meta = true;
  call.new_group_timeout = options.timeout;
  CallResult result = run(call);
  if (std::exception_ptr error = result.work->exception()) std::rethrow_exception(error);
  std::shared_ptr<GroupState> sub = result.plan->new_group;
  const auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;
  return std::make_unique<SimBackend>(world_, std::move(sub), static_cast<int>(it - ranks.begin()),
                                      options.timeout.count() > 0 ? options.timeout : timeout_, name_, path_);
}

// ---- failure handling and the registry's factory ----

void SimBackend::abort(ErrorKind kind, const std::string& message) {
  world_->abort(group_->global_ranks.at(rank_), kind, message);
}

void SimBackend::rank_finished() { world_->rank_finished(group_->global_ranks.at(rank_)); }

namespace {

// `sim` needs InitOptions::world.
BackendFactory sim_backend_factory() {
  return [](const InitOptions& options) -> std::unique_ptr<Backend> {
    DPS_CHECK(options.world != nullptr, ErrorKind::kInvalidArgument,
              "init_process_group(\"sim\"): options.world is required (the SimWorld the ranks share)");
    DPS_CHECK(options.world->size() == options.world_size, ErrorKind::kInvalidArgument,
              "init_process_group: world_size {} but the SimWorld has {} ranks", options.world_size,
              options.world->size());
    // Every rank builds the default group from the same, immutable description; the shared
    // state is the world's, so rank threads meet there at each collective.
    SimWorld& world = *options.world;
    world.device(options.rank).set_rank(options.rank);
    return std::make_unique<SimBackend>(options.world, world.state().default_group, options.rank,
                                        options.timeout);
  };
}

}  // namespace

void add_sim_backends(const AddBackend& add) { add("sim", sim_backend_factory()); }

}  // namespace dpscope::detail
