// choose_schedule() (collective_choice.hpp).
#include "collective_choice.hpp"

#include <algorithm>

namespace dpscope::detail {
namespace {

TimedSchedule timed(Schedule schedule, const NetworkModel& net, std::span<const int> gpus,
                    const std::vector<int64_t>& starts, uint64_t elem) {
  ScheduleTiming timing = simulate_schedule(schedule, net, gpus, starts, elem);
  return {std::move(schedule), std::move(timing)};
}

}  // namespace

int64_t max_end(const ScheduleTiming& t) {
  return t.rank_end_ns.empty() ? 0 : *std::max_element(t.rank_end_ns.begin(), t.rank_end_ns.end());
}

TimedSchedule choose_schedule(const CollectiveShape& c, const NetworkModel& net, std::span<const int> gpus,
                              const std::vector<int>& ring, const std::vector<int64_t>& starts) {
  const int n = static_cast<int>(gpus.size());
  const uint64_t elem = c.elem_bytes;
  const int64_t count = c.count;
  const Algorithm algo = c.algorithm;
  auto time = [&](Schedule s) { return timed(std::move(s), net, gpus, starts, elem); };
  switch (c.op) {
    case OpType::kAllReduce: {
      const uint64_t chunk_bytes = static_cast<uint64_t>((count + n - 1) / n) * elem;
      auto ring_sched = [&] {
        return time(ring_all_reduce(ring, count, pipeline_slices(c.slices, chunk_bytes)));
      };
      auto tree_sched = [&] {
        const uint64_t half_bytes = static_cast<uint64_t>((count + 1) / 2) * elem;
        return time(tree_all_reduce(n, count, pipeline_slices(c.slices, half_bytes)));
      };
      if (algo == Algorithm::kRing) return ring_sched();
      if (algo == Algorithm::kTree) return tree_sched();
      if (algo == Algorithm::kNaive) return time(naive_all_reduce(n, count));
      TimedSchedule r = ring_sched(), t = tree_sched();
      return max_end(t.timing) < max_end(r.timing) ? std::move(t) : std::move(r);
    }
    case OpType::kBroadcast:
    case OpType::kReduce: {
      const bool bcast = c.op == OpType::kBroadcast;
      const int p = pipeline_slices(c.slices, static_cast<uint64_t>(count) * elem);
      if (algo == Algorithm::kRing)
        return time(bcast ? ring_broadcast(ring, c.root, count, p) : ring_reduce(ring, c.root, count, p));
      if (algo == Algorithm::kNaive)
        return time(bcast ? naive_broadcast(n, c.root, count) : naive_reduce(n, c.root, count));
      return time(bcast ? tree_broadcast(n, c.root, count) : tree_reduce(n, c.root, count));
    }
    case OpType::kAllGather:
    case OpType::kReduceScatter: {
      const int p = pipeline_slices(c.slices, static_cast<uint64_t>(count) * elem);
      return time(c.op == OpType::kAllGather ? ring_all_gather(ring, count, p)
                                             : ring_reduce_scatter(ring, count, p));
    }
    case OpType::kScatter: return time(naive_scatter(n, c.root, count));
    case OpType::kGather: return time(naive_gather(n, c.root, count));
    case OpType::kBarrier: return time(dissemination_barrier(n));
    default: return time(Schedule{});
  }
}

}  // namespace dpscope::detail
