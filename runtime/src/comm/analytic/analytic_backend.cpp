// The `analytic` backend: rank 0 of a symmetric world whose collectives are timed by
// AnalyticCollectives (comm/analytic_collectives.hpp) instead of being run by peers; registered
// through its folder's hook like every built-in backend (api/builtin_backends.hpp).
#include <algorithm>
#include <cmath>
#include <memory>

#include "../algorithms/collective_choice.hpp"
#include "../api/builtin_backends.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/comm/analytic_collectives.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "dpscope/trace_format/events.hpp"

namespace dpscope {
namespace {

// A collective that is over on the host when its call returns; wait() makes the compute stream
// wait for its simulated end, as a sim Work does.
class AnalyticWork final : public Work {
 public:
  AnalyticWork(Device device, OpType op, int64_t seq, int64_t start_ns, int64_t end_ns)
      : device_(std::move(device)), op_(op), seq_(seq), start_ns_(start_ns), end_ns_(end_ns) {}
  void wait() override { device_.wait_until(StreamKind::kCompute, end_ns_); }
  bool is_completed() const override { return true; }
  bool is_success() const override { return true; }
  std::exception_ptr exception() const override { return nullptr; }
  OpType op_type() const override { return op_; }
  int64_t sequence_number() const override { return seq_; }
  int64_t start_ns() const override { return start_ns_; }
  int64_t end_ns() const override { return end_ns_; }

 private:
  Device device_;
  OpType op_;
  int64_t seq_;
  int64_t start_ns_;
  int64_t end_ns_;
};

class AnalyticBackend final : public Backend {
 public:
  AnalyticBackend(Device device, std::shared_ptr<const AnalyticCollectives> model)
      : device_(std::move(device)), model_(std::move(model)) {}

  const char* name() const override { return "analytic"; }
  int rank() const override { return 0; }
  int size() const override { return model_->world_size(); }
  const Device& device() const override { return device_; }
  Milliseconds timeout() const override { return Milliseconds(0); }  // nothing ever waits for a peer

  std::shared_ptr<Work> all_reduce(Tensor& tensor, const AllreduceOptions& options) override {
    if (tensor.has_data()) {  // every rank holds the same values: op over n equal values
      std::vector<float> v = floats_of(tensor, OpType::kAllReduce);
      for (float& x : v) x = reduce_equal(x, options.op);
      tensor.copy_from(Tensor::from_floats(v, tensor.shape(), device_, MemoryCategory::kBuffers));
    }
    return run(OpType::kAllReduce, tensor, algorithm_for(OpType::kAllReduce, options.algorithm),
               tensor.numel(), options.op, 0);
  }
  std::shared_ptr<Work> broadcast(Tensor& tensor, const BroadcastOptions& options) override {
    if (tensor.has_data()) floats_of(tensor, OpType::kBroadcast);  // the root's values are everyone's
    return run(OpType::kBroadcast, tensor, algorithm_for(OpType::kBroadcast, options.algorithm),
               tensor.numel(), std::nullopt, options.root);
  }
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input, bool flat_output,
                                   const AllgatherOptions&) override {
    if (input.has_data()) {  // every rank's block is this rank's
      floats_of(input, OpType::kAllGather);
      const int64_t numel = input.numel();
      const Tensor flat_in = input.reshape({numel});
      for (int r = 0; r < size(); ++r) {
        if (flat_output) {
          outputs[0].reshape({numel * size()}).rows(r * numel, numel).copy_from(flat_in);
        } else {
          outputs[static_cast<size_t>(r)].copy_from(input);
        }
      }
    }
    return run(OpType::kAllGather, input, Algorithm::kRing, input.numel(), std::nullopt, 0);
  }
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, bool flat_input,
                                       const ReduceScatterOptions& options) override {
    if (output.has_data()) {  // op over n equal copies of this rank's block 0
      const int64_t numel = output.numel();
      const Tensor block = flat_input ? inputs[0].reshape({numel * size()}).rows(0, numel) : inputs[0];
      std::vector<float> v = floats_of(block, OpType::kReduceScatter);
      for (float& x : v) x = reduce_equal(x, options.op);
      output.copy_from(Tensor::from_floats(v, output.shape(), device_, MemoryCategory::kBuffers));
    }
    return run(OpType::kReduceScatter, output, Algorithm::kRing, output.numel(), options.op, 0);
  }
  std::shared_ptr<Work> all_to_all_single(Tensor& output, const Tensor& input,
                                          const AllToAllOptions&) override {
    // Every rank holds this rank's input, so block i of the output (from rank i) is rank i's
    // block for this rank: this rank's own block, block rank() = 0.
    if (input.has_data() && input.numel() > 0) {
      const int64_t block = input.numel() / size();
      const Tensor own = input.reshape({input.numel()}).rows(0, block);
      for (int r = size() - 1; r >= 0; --r)  // block 0 last: `output` may be `input`
        output.reshape({output.numel()}).rows(r * block, block).copy_from(own);
    }
    return run(OpType::kAllToAll, input, Algorithm::kAuto, input.numel(), std::nullopt, 0);
  }
  std::shared_ptr<Work> barrier(const BarrierOptions&) override {
    return run(OpType::kBarrier, Tensor(), Algorithm::kAuto, 0, std::nullopt, 0);
  }
  void abort(ErrorKind, const std::string&) override {}  // no peer to tell
  void rank_finished() override {}

 private:
  // The shared rule (collective_choice.hpp); this world has no default algorithm of its own.
  static Algorithm algorithm_for(OpType op, Algorithm requested) {
    return detail::resolve_algorithm(op, requested, Algorithm::kAuto);
  }

  // The values of a small float32 tensor with data (DDP's model check, its bucket order), which
  // the symmetric world's collectives compute on the host.
  static std::vector<float> floats_of(const Tensor& t, OpType op) {
    DPS_CHECK(t.dtype() == DType::kF32, ErrorKind::kUnsupported,
              "the analytic backend's {} computes float32 values only, got {}", api_name(op),
              to_string(t.dtype()));
    return t.to_vector();
  }
  // `op` over world-size copies of x.
  float reduce_equal(float x, ReduceOp op) const {
    switch (op) {
      case ReduceOp::kSum: return x * static_cast<float>(size());
      case ReduceOp::kProduct: return std::pow(x, static_cast<float>(size()));
      default: return x;  // avg, min, max of equal values
    }
  }

  std::shared_ptr<Work> run(OpType op, const Tensor& tensor, Algorithm algo, int64_t count,
                            std::optional<ReduceOp> reduce_op, int root) {
    const uint64_t elem = tensor.defined() ? element_size(tensor.dtype()) : 4;
    const CollectiveEstimate est = model_->estimate({.op = op,
                                                     .algorithm = algo,
                                                     .count = count,
                                                     .elem_bytes = elem,
                                                     .average = reduce_op == ReduceOp::kAvg});
    const int64_t seq = next_seq_++;
    const int64_t start =
        std::max(device_.clock_ns(StreamKind::kComm), device_.clock_ns(StreamKind::kCompute));
    const int64_t end = start + est.duration_ns;
    device_.wait_until(StreamKind::kComm, end);
    if (TraceSink* t = device_.tracer()) {
      const int n = size();
      uint64_t bytes = static_cast<uint64_t>(count) * elem;
      if (op == OpType::kAllGather || op == OpType::kReduceScatter) bytes *= static_cast<uint64_t>(n);
      const std::string redop = reduce_op ? to_string(*reduce_op) : "none";
      t->span(device_,
              {.stream = StreamKind::kComm,
               .cat = SpanCategory::kCollective,
               .name = op == OpType::kBarrier ? std::string(to_string(EventName::kBarrier))
                                              : collective_span_name(api_name(op), est.algorithm, bytes),
               .ts_ns = start,
               .dur_ns = est.duration_ns,
               .args = CollectiveArgs{.coll = seq,
                                      .group = 0,
                                      .op = api_name(op),
                                      .algo = est.algorithm,
                                      .bytes = bytes,
                                      .count = count,
                                      .dtype = tensor.defined() ? to_string(tensor.dtype()) : "float32",
                                      .redop = redop,
                                      .root = root,
                                      .ranks = n,
                                      .slices = 1,
                                      .steps = est.steps,
                                      .phases = est.phases}});
      t->instant(device_, end, WorkCompleted{.coll = seq, .op = api_name(op), .group = 0});
    }
    return std::make_shared<AnalyticWork>(device_, op, seq, start, end);
  }

  Device device_;
  std::shared_ptr<const AnalyticCollectives> model_;
  int64_t next_seq_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_analytic_backend(const Device& device,
                                               std::shared_ptr<const AnalyticCollectives> model) {
  DPS_CHECK(model != nullptr, ErrorKind::kInvalidArgument, "make_analytic_backend: no model");
  return std::make_unique<AnalyticBackend>(device, std::move(model));
}

namespace detail {

// "analytic", registered like every backend: init_process_group("analytic", 0, N, {.world = w})
// makes rank 0 of a world of N ranks, on w's one device (rank 0's GPU), its collectives timed by the
// model of w's hardware for N ranks. No store: no other rank exists to meet.
void add_analytic_backends(const AddBackend& add) {
  add("analytic", [](const InitOptions& options) -> std::unique_ptr<Backend> {
    DPS_CHECK(options.world != nullptr && options.world->size() == 1 && options.rank == 0,
              ErrorKind::kInvalidArgument,
              "the analytic backend is rank 0 of its world alone: it needs rank 0 and a world of one device "
              "(InitOptions::world, rank 0's GPU), got rank {} and {}",
              options.rank,
              options.world ? fmt::format("a world of {} device{}", options.world->size(),
                                          options.world->size() == 1 ? "" : "s")
                            : "no world");
    return make_analytic_backend(
        options.world->device(0),
        std::make_shared<const AnalyticCollectives>(options.world->hardware(), options.world_size));
  });
}

}  // namespace detail

}  // namespace dpscope
