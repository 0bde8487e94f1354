// choose_schedule() (collective_choice.hpp).
#include "collective_choice.hpp"

#include <algorithm>
#include <cmath>

#include "dpscope/base/error.hpp"

namespace dpscope::detail {
namespace {

TimedSchedule timed(Schedule schedule, const NetworkModel& net, std::span<const int> gpus,
                    const std::vector<int64_t>& starts, uint64_t elem) {
  ScheduleTiming timing = simulate_schedule(schedule, net, gpus, starts, elem);
  return {std::move(schedule), std::move(timing)};
}

// The bytes NCCL's cost model (and nccl-tests) count for the collective.
uint64_t nccl_bytes(const CollectiveShape& c, int n) {
  const uint64_t bytes = static_cast<uint64_t>(c.count) * c.elem_bytes;
  return c.op == OpType::kAllGather || c.op == OpType::kReduceScatter ? bytes * static_cast<uint64_t>(n)
                                                                      : bytes;
}

// Stretches (or shrinks) the schedule's timing after the last rank's arrival so that it lasts
// `target_ns` from there: every op keeps its order and overlap, the collective takes the cost
// model's time. Times before the last arrival (ops between early ranks) stay as they are.
void retime(ScheduleTiming& t, const std::vector<int64_t>& starts, int64_t target_ns) {
  const int64_t last = starts.empty() ? 0 : *std::max_element(starts.begin(), starts.end());
  const int64_t simulated = max_end(t) - last;
  if (simulated <= 0) return;  // nothing moved after the last arrival (empty collectives)
  const double k = static_cast<double>(target_ns) / static_cast<double>(simulated);
  auto map = [&](int64_t& v) {
    if (v > last) v = last + std::llround(static_cast<double>(v - last) * k);
  };
  for (OpTime& op : t.ops) {
    map(op.start_ns);
    map(op.arrival_ns);
    map(op.reduce_start_ns);
    map(op.done_ns);
  }
  for (int64_t& end : t.rank_end_ns) map(end);
}

}  // namespace

int64_t max_end(const ScheduleTiming& t) {
  return t.rank_end_ns.empty() ? 0 : *std::max_element(t.rank_end_ns.begin(), t.rank_end_ns.end());
}

Schedule build_schedule(const CollectiveShape& c, int n, const std::vector<int>& ring) {
  const uint64_t elem = c.elem_bytes;
  const int64_t count = c.count;
  const Algorithm algo = c.algorithm;
  switch (c.op) {
    case OpType::kAllReduce: {
      DPS_ASSERT(algo == Algorithm::kRing || algo == Algorithm::kTree || algo == Algorithm::kNaive,
                 "build_schedule: an all-reduce needs an explicit algorithm, got '{}' (choose_schedule "
                 "picks one by timing)",
                 to_string(algo));
      if (algo == Algorithm::kRing) {
        const uint64_t chunk_bytes = static_cast<uint64_t>((count + n - 1) / n) * elem;
        return ring_all_reduce(ring, count, pipeline_slices(c.slices, chunk_bytes));
      }
      if (algo == Algorithm::kTree) {
        const uint64_t half_bytes = static_cast<uint64_t>((count + 1) / 2) * elem;
        return tree_all_reduce(n, count, pipeline_slices(c.slices, half_bytes));
      }
      return naive_all_reduce(n, count);
    }
    case OpType::kBroadcast:
    case OpType::kReduce: {
      const bool bcast = c.op == OpType::kBroadcast;
      const int p = pipeline_slices(c.slices, static_cast<uint64_t>(count) * elem);
      if (algo == Algorithm::kRing)
        return bcast ? ring_broadcast(ring, c.root, count, p) : ring_reduce(ring, c.root, count, p);
      if (algo == Algorithm::kNaive)
        return bcast ? naive_broadcast(n, c.root, count) : naive_reduce(n, c.root, count);
      return bcast ? tree_broadcast(n, c.root, count) : tree_reduce(n, c.root, count);
    }
    case OpType::kAllGather:
    case OpType::kReduceScatter: {
      const int p = pipeline_slices(c.slices, static_cast<uint64_t>(count) * elem);
      return c.op == OpType::kAllGather ? ring_all_gather(ring, count, p)
                                        : ring_reduce_scatter(ring, count, p);
    }
    case OpType::kScatter: return naive_scatter(n, c.root, count);
    case OpType::kGather: return naive_gather(n, c.root, count);
    case OpType::kBarrier: return dissemination_barrier(n);
    case OpType::kAllToAll: return pairwise_all_to_all(n, n > 0 ? count / n : 0);  // count: the input
    default: return Schedule{};
  }
}

std::optional<NcclPrediction> nccl_time(const CollectiveShape& c, const NetworkModel& net, int n) {
  const std::optional<NcclFabric> fabric = net.nccl_fabric(n);
  if (!fabric || c.algorithm == Algorithm::kNaive || n < 2) return std::nullopt;
  switch (c.op) {
    case OpType::kAllReduce:
    case OpType::kBroadcast:
    case OpType::kReduce:
    case OpType::kAllGather:
    case OpType::kReduceScatter:
    case OpType::kAllToAll:
    case OpType::kBarrier: break;
    default: return std::nullopt;  // scatter, gather: no NCCL collective; the links' flow timing
  }
  NcclChoice choice = nccl_choice(c.op, c.algorithm, c.proto);
  if (c.nccl_algo && c.op == OpType::kAllReduce) choice.algo = c.nccl_algo;
  return predict_nccl(*fabric, c.op, nccl_bytes(c, n), choice);
}

TimedSchedule choose_schedule(const CollectiveShape& c, const NetworkModel& net, std::span<const int> gpus,
                              const std::vector<int>& ring, const std::vector<int64_t>& starts) {
  const int n = static_cast<int>(gpus.size());
  const std::optional<NcclPrediction> model = nccl_time(c, net, n);
  auto fit = [&](TimedSchedule t) {
    if (model) {
      retime(t.timing, starts, model->time_ns);
      t.nccl = model;
    }
    return t;
  };
  auto time = [&](Schedule s) { return timed(std::move(s), net, gpus, starts, c.elem_bytes); };
  if (c.op == OpType::kAllReduce && c.algorithm != Algorithm::kRing && c.algorithm != Algorithm::kTree &&
      c.algorithm != Algorithm::kNaive) {
    // kAuto: the ring or tree schedule, whichever the links' flow timing finishes first, moves the
    // data (as before the cost model, so results stay bit-identical); its duration is NCCL's.
    CollectiveShape ring_shape = c, tree_shape = c;
    ring_shape.algorithm = Algorithm::kRing;
    tree_shape.algorithm = Algorithm::kTree;
    TimedSchedule r = time(build_schedule(ring_shape, n, ring)),
                  t = time(build_schedule(tree_shape, n, ring));
    return fit(max_end(t.timing) < max_end(r.timing) ? std::move(t) : std::move(r));
  }
  if (c.algorithm == Algorithm::kNaive && n >= 2) {
    // NCCL has no naive algorithm: its bytes move as the links' flows say, and each round of its
    // sends (all to one root, then back, for an all-reduce) pays a launch and an LL hop as NCCL's
    // point-to-point would, so the comparison with ring and tree is fair at small sizes.
    TimedSchedule t = time(build_schedule(c, n, ring));
    if (const std::optional<NcclFabric> fabric = net.nccl_fabric(n)) {
      const int64_t last = starts.empty() ? 0 : *std::max_element(starts.begin(), starts.end());
      const int rounds = c.op == OpType::kAllReduce ? 2 : 1;
      retime(t.timing, starts, max_end(t.timing) - last + rounds * nccl_round_latency_ns(*fabric));
    }
    return t;
  }
  return fit(time(build_schedule(c, n, ring)));
}

bool offers_algorithm(OpType op, Algorithm algo) {
  switch (op) {
    case OpType::kAllReduce:
    case OpType::kBroadcast:
    case OpType::kReduce:
      return algo == Algorithm::kRing || algo == Algorithm::kTree || algo == Algorithm::kNaive;
    case OpType::kAllGather:
    case OpType::kReduceScatter: return algo == Algorithm::kRing;
    case OpType::kScatter:
    case OpType::kGather: return algo == Algorithm::kNaive;
    default: return false;
  }
}

Algorithm resolve_algorithm(OpType op, Algorithm requested, Algorithm group_default,
                            std::string_view on_backend) {
  if (requested == Algorithm::kAuto) return Algorithm::kAuto;
  if (requested != Algorithm::kDefault) {
    DPS_CHECK(offers_algorithm(op, requested), ErrorKind::kInvalidArgument,
              "{}: algorithm '{}' is not available{} (available: {})", api_name(op), to_string(requested),
              on_backend,
              offers_algorithm(op, Algorithm::kTree)   ? "ring, tree, naive, auto"
              : offers_algorithm(op, Algorithm::kRing) ? "ring, auto"
                                                       : "auto: its one schedule");
    return requested;
  }
  const bool explicit_default = group_default == Algorithm::kRing || group_default == Algorithm::kTree ||
                                group_default == Algorithm::kNaive;
  if (!explicit_default) return Algorithm::kAuto;
  if (op == OpType::kScatter || op == OpType::kGather) return Algorithm::kNaive;  // their one schedule
  return offers_algorithm(op, group_default) ? group_default : Algorithm::kAuto;
}

}  // namespace dpscope::detail
