// FingerprintCheck (api/fingerprint_check.hpp).
#include "fingerprint_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "fingerprint.hpp"

namespace dpscope::detail {
namespace {

class FingerprintCheck final : public Backend {
 public:
  FingerprintCheck(std::unique_ptr<Backend> inner, std::shared_ptr<Store> store, std::string prefix)
      : inner_(std::move(inner)), store_(std::move(store)), prefix_(std::move(prefix)) {}

  const char* name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const Device& device() const override { return inner_->device(); }
  Milliseconds timeout() const override { return inner_->timeout(); }

  std::shared_ptr<Work> all_reduce(Tensor& tensor, const AllreduceOptions& options) override {
    Signature s = of(OpType::kAllReduce, tensor, options.algorithm);
    s.reduce_op = options.op;
    agree(s, options.timeout);
    return inner_->all_reduce(tensor, options);
  }
  std::shared_ptr<Work> broadcast(Tensor& tensor, const BroadcastOptions& options) override {
    Signature s = of(OpType::kBroadcast, tensor, options.algorithm);
    s.root = options.root;
    agree(s, options.timeout);
    return inner_->broadcast(tensor, options);
  }
  std::shared_ptr<Work> reduce(Tensor& tensor, const ReduceOptions& options) override {
    Signature s = of(OpType::kReduce, tensor, options.algorithm);
    s.root = options.root;
    s.reduce_op = options.op;
    agree(s, options.timeout);
    return inner_->reduce(tensor, options);
  }
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input, bool flat_output,
                                   const AllgatherOptions& options) override {
    agree(of(OpType::kAllGather, input, options.algorithm), options.timeout);
    return inner_->all_gather(outputs, input, flat_output, options);
  }
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, bool flat_input,
                                       const ReduceScatterOptions& options) override {
    Signature s = of(OpType::kReduceScatter, output, options.algorithm);
    s.reduce_op = options.op;
    agree(s, options.timeout);
    return inner_->reduce_scatter(output, inputs, flat_input, options);
  }
  std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& options) override {
    Signature s = of(OpType::kScatter, output, Algorithm::kDefault);
    s.root = options.root;
    agree(s, options.timeout);
    return inner_->scatter(output, inputs, options);
  }
  std::shared_ptr<Work> gather(const Tensor& input, std::vector<Tensor>& outputs,
                               const GatherOptions& options) override {
    Signature s = of(OpType::kGather, input, Algorithm::kDefault);
    s.root = options.root;
    agree(s, options.timeout);
    return inner_->gather(input, outputs, options);
  }
  std::shared_ptr<Work> barrier(const BarrierOptions& options) override {
    agree({.op = OpType::kBarrier, .meta = true}, options.timeout);
    return inner_->barrier(options);
  }
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, const PointToPointOptions& options) override {
    return inner_->send(tensor, dst, options);
  }
  std::shared_ptr<Work> recv(Tensor& tensor, int src, const PointToPointOptions& options) override {
    return inner_->recv(tensor, src, options);
  }
  std::unique_ptr<Backend> new_group(const std::vector<int>& ranks, const NewGroupOptions& options) override {
    agree({.op = OpType::kNewGroup, .meta = true, .ranks = ranks}, Milliseconds(0));  // this group's limit
    // Numbered on every rank of this group alike (every rank calls new_group), so members of the
    // new group derive the same prefix.
    const std::string prefix = fmt::format("{}group{}/", prefix_, next_group_++);
    std::unique_ptr<Backend> sub = inner_->new_group(ranks, options);
    if (!sub) return nullptr;
    return std::make_unique<FingerprintCheck>(std::move(sub), store_, prefix);
  }

  void abort(ErrorKind kind, const std::string& message) override { inner_->abort(kind, message); }
  void rank_finished() override { inner_->rank_finished(); }

 private:
  static Signature of(OpType op, const Tensor& sizing, Algorithm algorithm) {
    Signature s{.op = op, .dtype = sizing.dtype(), .shape = sizing.shape(), .meta = !sizing.has_data()};
    if (algorithm != Algorithm::kDefault) s.algorithm = algorithm;
    return s;
  }

  // Every rank's fingerprint of collective number next_seq_, compared with rank 0's.
  void agree(const Signature& signature, Milliseconds timeout) {
    const int64_t seq = next_seq_++;
    const int n = size();
    if (n == 1) return;
    const Milliseconds limit = timeout.count() > 0 ? timeout : inner_->timeout();
    auto key_of = [&](int r) { return fmt::format("{}seq{}/rank{}", prefix_, seq, r); };
    const std::string mine = fingerprint(signature, seq);
    store_->set(key_of(rank()), mine);
    std::vector<std::string> keys;
    for (int r = 0; r < n; ++r) keys.push_back(key_of(r));
    try {
      store_->wait(keys, limit);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kTimeout) throw;
      std::vector<int> missing;
      for (int r = 0; r < n; ++r)
        if (!store_->check({key_of(r)})) missing.push_back(r);
      throw Error(ErrorKind::kTimeout,
                  fmt::format("{}: rank {} waited {} ms at {} for ranks that never called it: [{}]", name(),
                              rank(), limit.count(), mine, fmt::join(missing, ", ")));
    }
    std::vector<std::string> prints(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) prints[r] = r == rank() ? mine : store_->get_string(key_of(r), limit);
    // The last rank to read removes the keys, so a long run does not grow the store.
    if (store_->add(fmt::format("{}seq{}/read", prefix_, seq), 1) == n) {
      for (const std::string& key : keys) store_->delete_key(key);
      store_->delete_key(fmt::format("{}seq{}/read", prefix_, seq));
    }
    std::vector<int> differing;
    for (int r = 1; r < n; ++r)
      if (prints[r] != prints[0]) differing.push_back(r);
    if (differing.empty()) return;
    throw Error(ErrorKind::kMismatch,
                mismatch_with_rank0(prints[0], differing.front(), prints[differing.front()], differing));
  }

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<Store> store_;
  std::string prefix_;
  int64_t next_seq_ = 0;
  int next_group_ = 0;
};

}  // namespace

std::unique_ptr<Backend> with_fingerprint_check(std::unique_ptr<Backend> inner, std::shared_ptr<Store> store,
                                                std::string prefix) {
  if (!inner || !store) return inner;
  return std::make_unique<FingerprintCheck>(std::move(inner), std::move(store), std::move(prefix));
}

}  // namespace dpscope::detail
