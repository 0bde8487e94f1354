// ZeroRedundancyOptimizer: sorted-greedy partition, sharded step with owner broadcasts, and state
// consolidation for checkpoints (see the header for the semantics).
#include "dpscope/parallel/zero_redundancy_optimizer.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "dpscope/core/trace_sink.hpp"

namespace dpscope {
namespace {

// What a rank holds for one (parameter, slot) state entry; exchanged as floats before the state.
enum class EntryKind : int { kAbsent = 0, kScalar = 1, kParamShaped = 2 };

int64_t entry_numel(EntryKind kind, const Parameter& param) {
  switch (kind) {
    case EntryKind::kAbsent: return 0;
    case EntryKind::kScalar: return 1;
    case EntryKind::kParamShaped: return param.data.numel();
  }
  return 0;
}

// A cpu copy the consolidated state owns (never a handle to the live optimizer state).
Tensor cpu_copy(const Tensor& t) {
  return t.device() == Device::cpu() ? t.clone(MemoryCategory::kOptimizerState)
                                     : t.to(Device::cpu(), MemoryCategory::kOptimizerState);
}

}  // namespace

std::vector<std::vector<int>> partition_parameters_sorted_greedy(const std::vector<int64_t>& numels,
                                                                 int world_size) {
  DPS_CHECK(world_size >= 1, ErrorKind::kInvalidArgument,
            "partition_parameters_sorted_greedy: world_size must be at least 1, got {}", world_size);
  for (size_t i = 0; i < numels.size(); ++i)
    DPS_CHECK(numels[i] >= 0, ErrorKind::kInvalidArgument,
              "partition_parameters_sorted_greedy: parameter {} has a negative numel {}", i, numels[i]);
  // Largest first; stable, like Python's sorted(..., reverse=True), so equal sizes keep list order.
  std::vector<int> order(numels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return numels[static_cast<size_t>(a)] > numels[static_cast<size_t>(b)];
  });
  std::vector<std::vector<int>> result(static_cast<size_t>(world_size));
  std::vector<int64_t> totals(static_cast<size_t>(world_size), 0);
  for (int index : order) {
    // The first rank with the smallest total (a strict '<' keeps the lowest rank on ties).
    size_t best = 0;
    for (size_t r = 1; r < totals.size(); ++r)
      if (totals[r] < totals[best]) best = r;
    result[best].push_back(index);
    totals[best] += numels[static_cast<size_t>(index)];
  }
  return result;
}

namespace {

// The constructor's argument checks, run before the Optimizer base sees the list (its own checks
// would word the same mistakes without naming ZeroRedundancyOptimizer).
std::vector<Parameter*> checked_params(std::vector<Parameter*> params, const ProcessGroup& group,
                                       const OptimizerFactory& make_local_optimizer) {
  DPS_CHECK(!params.empty(), ErrorKind::kInvalidArgument,
            "ZeroRedundancyOptimizer got an empty parameter list");
  DPS_CHECK(static_cast<bool>(make_local_optimizer), ErrorKind::kInvalidArgument,
            "ZeroRedundancyOptimizer needs make_local_optimizer, the factory of the wrapped optimizer; got "
            "an empty function");
  std::unordered_set<const Parameter*> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter* p = params[i];
    DPS_CHECK(p != nullptr, ErrorKind::kInvalidArgument,
              "ZeroRedundancyOptimizer got a null parameter at index {}", i);
    DPS_CHECK(seen.insert(p).second, ErrorKind::kInvalidArgument,
              "ZeroRedundancyOptimizer got parameter {} more than once", p->name);
    DPS_CHECK(
        p->data.defined() && p->data.device() == group.device(), ErrorKind::kInvalidArgument,
        "ZeroRedundancyOptimizer on rank {}: parameter {} is on {}, but the process group's device is {}",
        group.rank(), p->name, p->data.defined() ? p->data.device().name() : "no device",
        group.device().name());
  }
  return params;
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(std::vector<Parameter*> params, ProcessGroup& group,
                                                 OptimizerFactory make_local_optimizer)
    : Optimizer(checked_params(std::move(params), group, make_local_optimizer), /*slots=*/{}),
      group_(group),
      params_(Optimizer::params()) {
  std::vector<int64_t> numels;
  for (const Parameter* p : params_) numels.push_back(p->data.numel());

  partition_ = partition_parameters_sorted_greedy(numels, group_.size());
  owner_.assign(params_.size(), -1);
  for (size_t r = 0; r < partition_.size(); ++r)
    for (int i : partition_[r]) owner_[static_cast<size_t>(i)] = static_cast<int>(r);
  for (int i : partition_[static_cast<size_t>(group_.rank())])
    local_params_.push_back(params_[static_cast<size_t>(i)]);

  if (!local_params_.empty()) {
    local_optimizer_ = make_local_optimizer(local_params_);
    DPS_CHECK(local_optimizer_ != nullptr, ErrorKind::kInvalidArgument,
              "ZeroRedundancyOptimizer: make_local_optimizer returned no optimizer");
    DPS_CHECK(local_optimizer_->params() == local_params_, ErrorKind::kInvalidArgument,
              "ZeroRedundancyOptimizer: make_local_optimizer must build the optimizer over exactly the {} "
              "parameters of the shard it is given, got one over {} parameters",
              local_params_.size(), local_optimizer_->params().size());
    optimizer_type_ = local_optimizer_->type_name();
    slot_names_ = local_optimizer_->slot_names();
  } else {
    // Nothing to own, but the type and slot names are needed to check and consolidate state.
    const std::unique_ptr<Optimizer> probe = make_local_optimizer(params_);
    DPS_CHECK(probe != nullptr, ErrorKind::kInvalidArgument,
              "ZeroRedundancyOptimizer: make_local_optimizer returned no optimizer");
    optimizer_type_ = probe->type_name();
    slot_names_ = probe->slot_names();
  }
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() = default;

int ZeroRedundancyOptimizer::rank_of(int index) const {
  DPS_CHECK(index >= 0 && static_cast<size_t>(index) < params_.size(), ErrorKind::kInvalidArgument,
            "ZeroRedundancyOptimizer::rank_of: parameter index {} is out of range [0, {})", index,
            params_.size());
  return owner_[static_cast<size_t>(index)];
}

void ZeroRedundancyOptimizer::step() {
  if (local_optimizer_) local_optimizer_->step();
  sync_params();
}

void ZeroRedundancyOptimizer::sync_params() {
  // Owner r's shard, packed in partition order into one flat buffer, is broadcast from r. All
  // buffers are allocated and this rank's own shard packed first; then the broadcasts are issued
  // in rank order (the same on every rank), waited for, and the received shards unpacked.
  const Device& dev = group_.device();
  const int rank = group_.rank();
  const bool with_data = params_[0]->data.has_data();
  std::optional<PhaseScope> phase;
  if (dev.tracer() != nullptr) phase.emplace(dev, Phase::kOptimizer);
  const int64_t start_ns = dev.clock_ns(StreamKind::kCompute);

  std::vector<Tensor> flats(partition_.size());  // [rank]: [shard numel], MemoryCategory::kBuffers
  for (size_t r = 0; r < partition_.size(); ++r) {
    int64_t numel = 0;
    for (int i : partition_[r]) numel += params_[static_cast<size_t>(i)]->data.numel();
    if (numel == 0) continue;
    flats[r] = with_data ? Tensor::empty({numel}, dev, MemoryCategory::kBuffers)
                         : Tensor::meta({numel}, dev, MemoryCategory::kBuffers);
  }
  auto for_each_piece = [&](size_t r, const std::function<void(Tensor & data, Tensor piece)>& fn) {
    int64_t offset = 0;
    for (int i : partition_[r]) {
      Tensor& data = params_[static_cast<size_t>(i)]->data;
      fn(data, flats[r].rows(offset, data.numel()));
      offset += data.numel();
    }
  };
  const size_t own = static_cast<size_t>(rank);
  if (with_data && flats[own].defined())
    for_each_piece(own, [](Tensor& data, Tensor piece) { piece.copy_from(data.reshape({data.numel()})); });

  std::vector<std::shared_ptr<Work>> works;
  for (size_t r = 0; r < partition_.size(); ++r)
    if (flats[r].defined()) works.push_back(group_.broadcast(flats[r], {.root = static_cast<int>(r)}));
  for (const auto& work : works) work->wait();

  if (with_data) {
    for (size_t r = 0; r < partition_.size(); ++r) {
      if (r == own || !flats[r].defined()) continue;
      for_each_piece(r, [](Tensor& data, Tensor piece) { data.reshape({data.numel()}).copy_from(piece); });
    }
  }
  if (TraceSink* tracer = dev.tracer()) {
    const int64_t end_ns = dev.clock_ns(StreamKind::kCompute);
    tracer->span(dev, {.stream = StreamKind::kCompute,
                       .cat = SpanCategory::kPhase,
                       .name = to_string(EventName::kSyncParams),
                       .ts_ns = start_ns,
                       .dur_ns = end_ns - start_ns});
  }
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  const int n = group_.size();
  const int rank = group_.rank();
  DPS_CHECK(to >= 0 && to < n, ErrorKind::kInvalidArgument,
            "consolidate_state_dict: to={} is not a rank of this process group (ranks 0..{})", to, n - 1);
  consolidated_.clear();
  has_consolidated_ = false;

  const Device& dev = group_.device();
  const size_t num_params = params_.size();
  const size_t num_slots = slot_names_.size();

  // This rank's state tensors by (parameter, slot); only its shard can have any.
  std::vector<std::vector<Tensor>> local(num_params, std::vector<Tensor>(num_slots));
  if (local_optimizer_) {
    std::unordered_map<std::string, Tensor> by_key;
    for (auto& [key, tensor] : local_optimizer_->state_tensors()) by_key.emplace(key, tensor);
    for (int i : partition_[static_cast<size_t>(rank)])
      for (size_t s = 0; s < num_slots; ++s) {
        const auto it = by_key.find(params_[static_cast<size_t>(i)]->name + "." + slot_names_[s]);
        if (it != by_key.end()) local[static_cast<size_t>(i)][s] = it->second;
      }
  }

  // 1. The layout: which entries exist and their kind, each contributed by its owner alone, so a
  //    SUM all-reduce gives every rank the whole table exactly.
  std::vector<float> codes(num_params * num_slots, 0.0f);
  for (size_t i = 0; i < num_params; ++i)
    for (size_t s = 0; s < num_slots; ++s)
      if (local[i][s].defined())
        codes[i * num_slots + s] =
            static_cast<float>(local[i][s].dim() == 0 ? EntryKind::kScalar : EntryKind::kParamShaped);
  Tensor layout =
      Tensor::from_floats(codes, {static_cast<int64_t>(codes.size())}, dev, MemoryCategory::kBuffers);
  group_.all_reduce(layout, {.op = ReduceOp::kSum})->wait();
  codes = layout.to_vector();
  auto kind_of = [&](size_t i, size_t s) {
    return static_cast<EntryKind>(static_cast<int>(codes[i * num_slots + s]));
  };
  auto payload_numel = [&](int r) {
    int64_t numel = 0;
    for (size_t i = 0; i < num_params; ++i)
      if (owner_[i] == r)
        for (size_t s = 0; s < num_slots; ++s) numel += entry_numel(kind_of(i, s), *params_[i]);
    return numel;
  };
  const bool with_data = params_[0]->data.has_data();
  auto make_flat = [&](int64_t numel) {
    return with_data ? Tensor::empty({numel}, dev, MemoryCategory::kBuffers)
                     : Tensor::meta({numel}, dev, MemoryCategory::kBuffers);
  };

  // 2. Every other rank sends its entries, packed in (parameter, slot) order, to `to`.
  if (rank != to) {
    const int64_t numel = payload_numel(rank);
    if (numel == 0) return;
    Tensor flat = make_flat(numel);  // [numel]
    int64_t offset = 0;
    for (size_t i = 0; i < num_params; ++i) {
      if (owner_[i] != rank) continue;
      for (size_t s = 0; s < num_slots; ++s) {
        const int64_t count = entry_numel(kind_of(i, s), *params_[i]);
        if (count == 0) continue;
        if (with_data) {
          const Tensor& t = local[i][s];
          const Tensor on_dev = t.device() == dev ? t : t.to(dev, MemoryCategory::kBuffers);
          flat.rows(offset, count).copy_from(on_dev.reshape({count}));
        }
        offset += count;
      }
    }
    group_.send(flat, to)->wait();
    return;
  }

  // 3. Rank `to` keeps its own entries and unpacks every other rank's, receiving in rank order.
  std::vector<std::vector<Tensor>> full(num_params, std::vector<Tensor>(num_slots));
  for (int r = 0; r < n; ++r) {
    if (r == rank) {
      for (size_t i = 0; i < num_params; ++i)
        for (size_t s = 0; s < num_slots; ++s)
          if (local[i][s].defined()) full[i][s] = cpu_copy(local[i][s]);
      continue;
    }
    const int64_t numel = payload_numel(r);
    if (numel == 0) continue;
    Tensor flat = make_flat(numel);
    group_.recv(flat, r)->wait();
    const Tensor host = flat.to(Device::cpu(), MemoryCategory::kOptimizerState);
    int64_t offset = 0;
    for (size_t i = 0; i < num_params; ++i) {
      if (owner_[i] != r) continue;
      for (size_t s = 0; s < num_slots; ++s) {
        const EntryKind kind = kind_of(i, s);
        const int64_t count = entry_numel(kind, *params_[i]);
        if (count == 0) continue;
        const Shape shape = kind == EntryKind::kScalar ? Shape{} : params_[i]->data.shape();
        full[i][s] = host.rows(offset, count).reshape(shape).clone(MemoryCategory::kOptimizerState);
        offset += count;
      }
    }
  }
  for (size_t i = 0; i < num_params; ++i)
    for (size_t s = 0; s < num_slots; ++s)
      if (full[i][s].defined())
        consolidated_.emplace_back(params_[i]->name + "." + slot_names_[s], full[i][s]);
  has_consolidated_ = true;
}

StateDict ZeroRedundancyOptimizer::state_dict() const {
  DPS_CHECK(has_consolidated_, ErrorKind::kInvalidArgument,
            "Optimizer state has not been consolidated on this rank. Please call "
            "`consolidate_state_dict(to={})` on all ranks beforehand if you meant to save the global state.",
            group_.rank());
  return consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const StateDict& full_state) {
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < params_.size(); ++i) index_of.emplace(params_[i]->name, i);
  StateDict mine;
  for (const auto& [key, tensor] : full_state) {
    // "<param name>.<slot>": the slot is the part after the last '.'.
    const size_t dot = key.rfind('.');
    const std::string param_name = dot == std::string::npos ? std::string() : key.substr(0, dot);
    const std::string slot_name = dot == std::string::npos ? key : key.substr(dot + 1);
    const auto it = index_of.find(param_name);
    DPS_CHECK(it != index_of.end() &&
                  std::find(slot_names_.begin(), slot_names_.end(), slot_name) != slot_names_.end(),
              ErrorKind::kInvalidArgument,
              "ZeroRedundancyOptimizer.load_state_dict: unexpected key \"{}\" for {} (expected <parameter "
              "name>.<{}>)",
              key, optimizer_type_, fmt::join(slot_names_, "|"));
    if (owner_[it->second] == group_.rank()) mine.emplace_back(key, tensor);
  }
  if (local_optimizer_) local_optimizer_->load_state_tensors(mine);
}

}  // namespace dpscope
