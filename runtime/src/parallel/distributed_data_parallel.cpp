// DistributedDataParallel and its reducer (PyTorch 1.13 semantics; see the header).
#include "dpscope/parallel/distributed_data_parallel.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "dpscope/core/timing.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "dpscope/parallel/bucket_assignment.hpp"
#include "grad_values.hpp"

namespace dpscope {
namespace {

constexpr int64_t kBroadcastChunkElems =
    250LL * 1024 * 1024 / 4;  // PyTorch syncs module states in 250 MiB pieces

uint64_t mib_to_bytes(double mib) { return static_cast<uint64_t>(mib * 1024.0 * 1024.0); }

// `Instant`: BucketLaunched or BucketDone.
template <typename Instant>
void trace_bucket(const Device& device, const DdpBucket& bucket) {
  if (TraceSink* tracer = device.tracer())
    tracer->instant(device, device.clock_ns(StreamKind::kCompute),
                    Instant{{.bucket = bucket.id, .bytes = bucket.bytes(), .params = bucket.params.size()}});
}

std::string shape_list(const std::vector<float>& encoded, size_t& pos) {
  const auto ndim = static_cast<size_t>(encoded[pos++]);
  Shape shape;
  for (size_t d = 0; d < ndim; ++d) shape.push_back(static_cast<int64_t>(encoded[pos++]));
  return shape_to_string(shape);
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(Module& module, ProcessGroup& group, DdpOptions options)
    : module_(module),
      group_(group),
      options_(options),
      params_(module.parameters()),
      traced_values_(std::make_unique<detail::TracedGradValues>()) {
  DPS_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_mb > 0, ErrorKind::kInvalidArgument,
            "DistributedDataParallel: bucket sizes must be positive (bucket_cap_mb {}, first_bucket_mb {})",
            options_.bucket_cap_mb, options_.first_bucket_mb);
  DPS_CHECK(!params_.empty(), ErrorKind::kInvalidArgument,
            "DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
            "gradient.");
  for (const Parameter* p : params_)
    DPS_CHECK(p->data.device() == group_.device(), ErrorKind::kDevice,
              "DistributedDataParallel: parameter {} is on {} but rank {} runs on {}", p->name,
              p->data.device().name(), group_.rank(), group_.device().name());
  verify_same_model();
  broadcast_parameters();

  std::vector<uint64_t> sizes;
  for (const Parameter* p : params_) sizes.push_back(p->data.nbytes());
  std::vector<std::vector<int>> assignment;
  if (options_.find_unused_parameters) {
    assignment = compute_bucket_assignment_by_size(
        sizes, {mib_to_bytes(options_.first_bucket_mb), mib_to_bytes(options_.bucket_cap_mb)});
    std::reverse(assignment.begin(), assignment.end());
  } else {
    assignment = compute_bucket_assignment_by_size(sizes, {std::numeric_limits<uint64_t>::max()});
  }
  assign_buckets(assignment, BucketReason::kInitial);
  hook_id_ = module_.register_grad_ready_hook([this](Parameter& p) { on_grad_ready(p); }).id();
}

DistributedDataParallel::~DistributedDataParallel() {
  module_.remove_grad_ready_hook(hook_id_);
  try {
    traced_values_->emit();  // the last step's values, while the tracer is still attached
  } catch (...) {
    // A device error here was (or will be) reported by the call that met it.
  }
}

void DistributedDataParallel::verify_same_model() {
  // Every rank shares its parameter count and the length of its shape encoding, then the shapes.
  const Device& dev = group_.device();
  const int n = group_.size();
  std::vector<float> encoded;
  for (const Parameter* p : params_) {
    encoded.push_back(static_cast<float>(p->data.dim()));
    for (int64_t d : p->data.shape()) encoded.push_back(static_cast<float>(d));
  }
  const std::vector<float> mine = {static_cast<float>(params_.size()), static_cast<float>(encoded.size())};
  Tensor counts = Tensor::from_floats(mine, {2}, dev, MemoryCategory::kBuffers);
  Tensor all_counts = Tensor::zeros({2 * n}, dev, MemoryCategory::kBuffers);
  group_.all_gather_into_tensor(all_counts, counts)->wait();
  const std::vector<float> c = all_counts.to_vector();
  for (int r = 1; r < n; ++r)
    DPS_CHECK(c[2 * r] == c[0], ErrorKind::kMismatch,
              "DDP expects same model across all ranks, but Rank {} has {} params, while rank 0 has "
              "inconsistent {} "
              "params.",
              r, c[2 * r], c[0]);
  for (int r = 1; r < n; ++r)
    DPS_CHECK(
        c[2 * r + 1] == c[1], ErrorKind::kMismatch,
        "DDP expects same model across all ranks, but the parameter shapes of rank {} have other dimensions "
        "than rank 0's",
        r);
  Tensor shapes =
      Tensor::from_floats(encoded, {static_cast<int64_t>(encoded.size())}, dev, MemoryCategory::kBuffers);
  Tensor all_shapes =
      Tensor::zeros({static_cast<int64_t>(encoded.size()) * n}, dev, MemoryCategory::kBuffers);
  group_.all_gather_into_tensor(all_shapes, shapes)->wait();
  const std::vector<float> s = all_shapes.to_vector();
  const std::vector<float> rank0(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(encoded.size()));
  for (int r = 1; r < n; ++r) {
    const std::vector<float> other(s.begin() + static_cast<std::ptrdiff_t>(r * encoded.size()),
                                   s.begin() + static_cast<std::ptrdiff_t>((r + 1) * encoded.size()));
    size_t pos0 = 0, posr = 0;
    for (const Parameter* p : params_) {
      const std::string a = shape_list(rank0, pos0), b = shape_list(other, posr);
      DPS_CHECK(a == b, ErrorKind::kMismatch,
                "DDP expects same model across all ranks, but rank {}'s parameter {} has shape {} while rank "
                "0's has {}",
                r, p->name, b, a);
    }
  }
}

void DistributedDataParallel::broadcast_parameters() {
  // Rank 0's parameters overwrite everyone's, coalesced into flat pieces of at most 250 MiB.
  const Device& dev = group_.device();
  size_t first = 0;
  while (first < params_.size()) {
    size_t last = first;
    int64_t elems = 0;
    while (last < params_.size() &&
           (last == first || elems + params_[last]->data.numel() <= kBroadcastChunkElems))
      elems += params_[last++]->data.numel();
    const bool with_data = params_[first]->data.has_data();
    Tensor flat = with_data ? Tensor::empty({elems}, dev, MemoryCategory::kBuffers)
                            : Tensor::meta({elems}, dev, MemoryCategory::kBuffers);
    int64_t offset = 0;
    for (size_t i = first; i < last; ++i) {
      const Tensor& d = params_[i]->data;
      if (with_data) flat.rows(offset, d.numel()).copy_from(d.reshape({d.numel()}));
      offset += d.numel();
    }
    group_.broadcast(flat, {.root = 0})->wait();
    offset = 0;
    for (size_t i = first; i < last; ++i) {
      Tensor& d = params_[i]->data;
      if (with_data) d.reshape({d.numel()}).copy_from(flat.rows(offset, d.numel()));
      offset += d.numel();
    }
    first = last;
  }
}

void DistributedDataParallel::assign_buckets(const std::vector<std::vector<int>>& assignment,
                                             BucketReason reason) {
  const Device& dev = group_.device();
  buckets_.clear();
  locator_.assign(params_.size(), {-1, -1});
  for (size_t b = 0; b < assignment.size(); ++b) {
    DdpBucket bucket;
    bucket.id = static_cast<int>(b);
    bucket.params = assignment[b];
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const int index = bucket.params[slot];
      bucket.offsets_elems.push_back(bucket.numel);
      bucket.numel += params_[static_cast<size_t>(index)]->data.numel();
      locator_[static_cast<size_t>(index)] = {static_cast<int>(b), static_cast<int>(slot)};
    }
    const bool with_data = params_.front()->data.has_data();
    bucket.buffer = with_data ? Tensor::zeros({bucket.numel}, dev, MemoryCategory::kBuffers)
                              : Tensor::meta({bucket.numel}, dev, MemoryCategory::kBuffers);
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < locator_.size(); ++i)
    DPS_ASSERT(locator_[i].first >= 0, "parameter {} is in no bucket", params_[i]->name);
  if (TraceSink* tracer = dev.tracer()) {
    std::vector<TraceBucketInfo> infos;
    for (const DdpBucket& b : buckets_) infos.push_back({.id = b.id, .params = b.params, .bytes = b.bytes()});
    tracer->buckets(dev, dev.clock_ns(StreamKind::kCompute), infos, reason);
  }
}

void DistributedDataParallel::rebuild_buckets() {
  // Rank 0's gradient-ready order wins (PyTorch's sync_bucket_indices): broadcast it.
  std::vector<float> order(params_.size());
  std::vector<bool> seen(params_.size(), false);
  size_t k = 0;
  for (int index : ready_order_) {
    order[k++] = static_cast<float>(index);
    seen[static_cast<size_t>(index)] = true;
  }
  for (size_t i = params_.size(); i-- > 0;)  // never-ready parameters go last, latest layer first
    if (!seen[i]) order[k++] = static_cast<float>(i);
  Tensor t = Tensor::from_floats(order, {static_cast<int64_t>(order.size())}, group_.device(),
                                 MemoryCategory::kBuffers);
  group_.broadcast(t, {.root = 0})->wait();
  std::vector<int> synced;
  for (float v : t.to_vector()) synced.push_back(static_cast<int>(v));
  std::vector<uint64_t> sizes;
  for (const Parameter* p : params_) sizes.push_back(p->data.nbytes());
  assign_buckets(
      compute_bucket_assignment_by_size(
          sizes, {mib_to_bytes(options_.first_bucket_mb), mib_to_bytes(options_.bucket_cap_mb)}, synced),
      BucketReason::kRebuilt);
  rebuilt_ = true;
}

void DistributedDataParallel::ensure_prior_reduction_finished() {
  if (!require_finalize_) return;
  std::vector<int> unmarked;
  for (size_t i = 0; i < marked_.size(); ++i)
    if (!marked_[i]) unmarked.push_back(static_cast<int>(i));
  std::string message =
      "Expected to have finished reduction in the prior iteration before starting a new one. This error "
      "indicates "
      "that your module has parameters that were not used in producing loss. ";
  if (!options_.find_unused_parameters) {
    message +=
        "You can enable unused parameter detection by passing the keyword argument "
        "`find_unused_parameters=True` to "
        "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
        "participate "
        "in calculating loss. ";
  } else {
    message +=
        "Since `find_unused_parameters=True` is enabled, this likely  means that not all `forward` outputs "
        "participate in computing loss. ";
  }
  message += fmt::format("Parameter indices which did not receive grad for rank {}: {}", group_.rank(),
                         fmt::join(unmarked, ", "));
  throw Error(ErrorKind::kInvalidArgument, message);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  ensure_prior_reduction_finished();
  traced_values_->emit();  // the previous step's, snapshotted on a GPU
  if (!rebuilt_ && !options_.find_unused_parameters && !ready_order_.empty()) rebuild_buckets();
  Tensor out = module_.forward(input);
  expect_hooks_ = require_sync_;
  if (expect_hooks_) {
    for (DdpBucket& b : buckets_) {
      b.pending = static_cast<int>(b.params.size());
      b.state = DdpBucket::State::kPending;
      b.work.reset();
    }
    marked_.assign(params_.size(), false);
    next_bucket_ = 0;
    unused_marked_ = false;
  }
  return out;
}

void DistributedDataParallel::on_grad_ready(Parameter& param) {
  if (!expect_hooks_) return;  // no_sync(), or a backward without a synchronized forward
  require_finalize_ = true;
  if (options_.find_unused_parameters && !unused_marked_) {
    // Like the reducer: parameters the forward did not use are marked ready with the first hook.
    unused_marked_ = true;
    for (Parameter* p : params_)
      if (!p->used_in_last_forward) mark_ready(p->index);
  }
  if (!rebuilt_ && iterations_ == 0 && !options_.find_unused_parameters) ready_order_.push_back(param.index);
  mark_ready(param.index);
}

void DistributedDataParallel::mark_ready(int index) {
  Parameter& p = *params_[static_cast<size_t>(index)];
  DPS_CHECK(!marked_[static_cast<size_t>(index)], ErrorKind::kInvalidArgument,
            "Expected to mark a variable ready only once. Parameter {} (index {}) was marked twice in one "
            "backward on "
            "rank {}",
            p.name, index, group_.rank());
  marked_[static_cast<size_t>(index)] = true;
  const auto [b, slot] = locator_[static_cast<size_t>(index)];
  DdpBucket& bucket = buckets_[static_cast<size_t>(b)];
  const int64_t offset = bucket.offsets_elems[static_cast<size_t>(slot)];
  const int64_t n = p.data.numel();
  Tensor view = bucket.buffer.rows(offset, n).reshape(p.data.shape());
  const Device& dev = group_.device();
  // The default hook divides while copying; a comm hook (fp16) divides by itself.
  const bool divide = options_.average_gradients && options_.comm_hook == CommHook::kAllreduce;
  const float scale = divide ? 1.0f / static_cast<float>(group_.size()) : 1.0f;
  const bool has_grad = p.grad.defined() && p.used_in_last_forward;
  if (has_grad && bucket.buffer.has_data())
    traced_values_->take(dev, index, ValuesWhen::kBeforeReduce, p.grad);
  {
    KernelScope kernel(dev, "ddp copy grad into bucket", {.flops = static_cast<double>(n), .bytes = 8.0 * n});
    if (bucket.buffer.has_data()) {
      if (has_grad) {
        kernels::scale_copy(p.grad, scale, view);  // in place when .grad is already a bucket view
      } else {
        kernels::fill(view, 0.0f);  // an unused parameter contributes zeros
      }
    }
  }
  if (options_.gradient_as_bucket_view) p.grad = view;  // .grad lives in the bucket from now on
  if (--bucket.pending == 0) {
    bucket.state = DdpBucket::State::kReady;
    launch_ready_buckets();
  }
}

void DistributedDataParallel::launch_ready_buckets() {
  // All-reduces start strictly in bucket order, each as soon as it and all before it are ready.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    DdpBucket& bucket = buckets_[next_bucket_++];
    if (options_.comm_hook == CommHook::kFp16Compress && bucket.buffer.has_data()) {
      const float divisor = options_.average_gradients ? static_cast<float>(group_.size()) : 1.0f;
      kernels::fp16_compress(bucket.buffer, divisor);
    }
    trace_bucket<BucketLaunched>(group_.device(), bucket);
    bucket.work = group_.all_reduce(bucket.buffer, {.op = ReduceOp::kSum, .algorithm = options_.algorithm});
    bucket.state = DdpBucket::State::kLaunched;
  }
}

void DistributedDataParallel::backward(const Tensor& grad_output) {
  module_.backward(grad_output);
  if (expect_hooks_) finalize();
}

void DistributedDataParallel::finalize() {
  expect_hooks_ = false;
  if (next_bucket_ < buckets_.size()) return;  // a bucket never became ready: the next forward() reports it
  const Device& dev = group_.device();
  for (DdpBucket& bucket : buckets_) {
    bucket.work->wait();  // the compute stream waits for this all-reduce to end
    bucket.state = DdpBucket::State::kDone;
    trace_bucket<BucketDone>(dev, bucket);
    const bool with_data = bucket.buffer.has_data();
    if (with_data && options_.comm_hook == CommHook::kFp16Compress) kernels::fp16_round(bucket.buffer);
    {
      KernelScope kernel(dev, "ddp copy bucket into grads",
                         {.flops = 0.0, .bytes = 8.0 * static_cast<double>(bucket.numel)});
      for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
        Parameter& p = *params_[static_cast<size_t>(bucket.params[slot])];
        const int64_t n = p.data.numel();
        Tensor view = bucket.buffer.rows(bucket.offsets_elems[slot], n).reshape(p.data.shape());
        if (!p.grad.defined()) {
          p.grad = with_data ? Tensor::zeros(p.data.shape(), dev, MemoryCategory::kGradients)
                             : Tensor::meta(p.data.shape(), dev, MemoryCategory::kGradients);
        }
        if (with_data && p.grad.f32() != view.f32()) p.grad.copy_from(view);
      }
    }
    // Outside the copy's span, so that taking them is not timed as the copy.
    if (with_data)
      for (const int index : bucket.params)
        traced_values_->take(dev, index, ValuesWhen::kAfterReduce, params_[static_cast<size_t>(index)]->grad);
  }
  require_finalize_ = false;
  ++iterations_;
}

StateDict DistributedDataParallel::state_dict() const {
  StateDict out;
  for (auto& [name, tensor] : module_.state_dict()) out.emplace_back("module." + name, tensor);
  return out;
}

}  // namespace dpscope
