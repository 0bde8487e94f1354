// FingerprintCheck (api/fingerprint_check.hpp).
#include "fingerprint_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fingerprint.hpp"

namespace dpscope::detail {
namespace {

using Clock = std::chrono::steady_clock;

// How often a rank waiting for its peers' fingerprints looks for a failed or finished peer.
constexpr Milliseconds kPollInterval{100};
constexpr char kFieldEnd = '\x1f';

// "[Rank 0] ALLREDUCE (SequenceNumber=3)", as the sim backend names a call.
std::string call_name(OpType op, int rank, int64_t seq) {
  return fmt::format("[Rank {}] {} (SequenceNumber={})", rank, to_string(op), seq);
}

class FingerprintCheck final : public Backend {
 public:
  // `members`: the default group's rank of each rank of this group; `root`: the default group's
  // prefix, under which failed and finished ranks are told.
  FingerprintCheck(std::unique_ptr<Backend> inner, std::shared_ptr<Store> store, std::string prefix,
                   std::vector<int> members, std::string root)
      : inner_(std::move(inner)),
        store_(std::move(store)),
        prefix_(std::move(prefix)),
        members_(std::move(members)),
        root_(std::move(root)) {}

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
  std::shared_ptr<Work> all_to_all_single(Tensor& output, const Tensor& input,
                                          const AllToAllOptions& options) override {
    agree(of(OpType::kAllToAll, input, Algorithm::kDefault), options.timeout);
    return inner_->all_to_all_single(output, input, options);
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
    std::vector<int> members;
    for (int r : ranks) members.push_back(members_[static_cast<size_t>(r)]);
    return std::make_unique<FingerprintCheck>(std::move(sub), store_, prefix, std::move(members), root_);
  }

  // Also told through the store, so peers waiting for this rank's fingerprint fail at once (the
  // first failure is kept). Never throws: the store may be gone with the failure.
  void abort(ErrorKind kind, const std::string& message) override {
    inner_->abort(kind, message);
    try {
      if (!store_->check({root_ + "failed"}))
        store_->set(root_ + "failed", fmt::format("{}{}{}{}{}", static_cast<int>(kind), kFieldEnd,
                                                  members_[static_cast<size_t>(rank())], kFieldEnd, message));
    } catch (const Error&) {
    }
  }
  void rank_finished() override {
    inner_->rank_finished();
    try {
      store_->set(finished_key(members_[static_cast<size_t>(rank())]), "1");
    } catch (const Error&) {
    }
  }

 private:
  static Signature of(OpType op, const Tensor& sizing, Algorithm algorithm) {
    Signature s{.op = op, .dtype = sizing.dtype(), .shape = sizing.shape(), .meta = !sizing.has_data()};
    if (algorithm != Algorithm::kDefault) s.algorithm = algorithm;
    return s;
  }

  std::string finished_key(int root_rank) const { return fmt::format("{}finished/rank{}", root_, root_rank); }

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
    wait_for_peers(keys, signature.op, seq, mine, limit);
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

  // Waits until every key of `keys` (rank r's fingerprint at r) exists. Fails at once when a peer
  // failed (its kind, "aborted because rank R failed: ...") or returned without calling (kMismatch,
  // "can never complete"), as the sim backend's ranks do, else after `limit` (kTimeout).
  void wait_for_peers(const std::vector<std::string>& keys, OpType op, int64_t seq, const std::string& mine,
                      Milliseconds limit) {
    const Clock::time_point deadline = Clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
      try {
        store_->wait(keys, std::clamp(left, Milliseconds(1), kPollInterval));
        return;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kTimeout) throw;
      }
      std::vector<int> missing;
      for (int r = 0; r < size(); ++r)
        if (!store_->check({keys[static_cast<size_t>(r)]})) missing.push_back(r);
      if (store_->check({root_ + "failed"})) {
        const std::string failure = store_->get_string(root_ + "failed", limit);
        const size_t first = failure.find(kFieldEnd);
        const size_t second = failure.find(kFieldEnd, first + 1);
        throw Error(static_cast<ErrorKind>(std::stoi(failure.substr(0, first))),
                    fmt::format("{} aborted because rank {} failed: {}", call_name(op, rank(), seq),
                                failure.substr(first + 1, second - first - 1), failure.substr(second + 1)));
      }
      for (int r : missing) {
        if (!store_->check({finished_key(members_[static_cast<size_t>(r)])})) continue;
        throw Error(
            ErrorKind::kMismatch,
            fmt::format("{} can never complete: rank {} returned from its function without joining it "
                        "(missing ranks: [{}])",
                        call_name(op, rank(), seq), r, fmt::join(missing, ", ")));
      }
      if (Clock::now() >= deadline)
        throw Error(ErrorKind::kTimeout,
                    fmt::format("{}: rank {} waited {} ms at {} for ranks that never called it: [{}]", name(),
                                rank(), limit.count(), mine, fmt::join(missing, ", ")));
    }
  }

  std::unique_ptr<Backend> inner_;
  std::shared_ptr<Store> store_;
  std::string prefix_;
  std::vector<int> members_;
  std::string root_;
  int64_t next_seq_ = 0;
  int next_group_ = 0;
};

}  // namespace

std::unique_ptr<Backend> with_fingerprint_check(std::unique_ptr<Backend> inner, std::shared_ptr<Store> store,
                                                std::string prefix) {
  if (!inner || !store) return inner;
  std::vector<int> members(static_cast<size_t>(inner->size()));
  for (int r = 0; r < inner->size(); ++r) members[static_cast<size_t>(r)] = r;
  std::string root = prefix;
  return std::make_unique<FingerprintCheck>(std::move(inner), std::move(store), std::move(prefix),
                                            std::move(members), std::move(root));
}

}  // namespace dpscope::detail
