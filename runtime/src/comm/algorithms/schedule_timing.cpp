// simulate_schedule(): the flow-level timing model of a schedule on a network (comm/schedule.hpp).
//
// An event loop over whole nanoseconds. Events: a flow starts (its op's dependencies are done,
// both ranks have started, and the sender's previous op on the same channel has left) or a flow
// finishes its bandwidth phase. Between events every active flow moves at
//   rate = min over its links of (link bandwidth / flows on that link),
// so a link shared by k concurrent transfers gives each a k-th of its bandwidth. A flow alone on
// its path takes exactly llround(bytes / bandwidth * 1e9) ns, which keeps closed forms exact.
// Ties are broken by op index, so the result never depends on anything but the inputs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/schedule.hpp"

namespace dpscope {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

struct Flow {
  int op = 0;
  const NetworkRoute* route = nullptr;
  double rate_bytes_per_s = 0.0;  // current rate
  double remaining_bytes = 0.0;   // at `since_ns`
  int64_t since_ns = 0;           // when the rate was last set
  int64_t finish_ns = 0;          // projected end of the bandwidth phase
};

int64_t duration_ns(double bytes, double rate_bytes_per_s) {
  return static_cast<int64_t>(std::llround(bytes / rate_bytes_per_s * 1e9));
}

class Simulator {
 public:
  Simulator(const Schedule& s, const NetworkModel& net, std::span<const int> gpu,
            std::span<const int64_t> start, uint64_t elem_bytes)
      : s_(s), net_(net), gpu_(gpu), start_(start), elem_bytes_(elem_bytes) {
    const int n_ops = static_cast<int>(s.ops.size());
    result_.ops.resize(n_ops);
    result_.rank_end_ns.assign(start.begin(), start.end());
    pending_.assign(n_ops, 0);
    ready_ns_.assign(n_ops, 0);
    fifo_next_.assign(n_ops, -1);
    dependents_begin_.assign(n_ops + 1, 0);
    reduce_free_ns_.assign(start.size(), 0);
    link_flows_.assign(net.links().size(), 0);

    for (int k = 0; k < n_ops; ++k) {
      const CommOp& op = s.ops[k];
      DPS_ASSERT(op.src != op.dst && op.src >= 0 && op.dst >= 0 && op.src < static_cast<int>(start.size()) &&
                     op.dst < static_cast<int>(start.size()),
                 "op {} goes from rank {} to rank {} in a group of {}", k, op.src, op.dst, start.size());
      ready_ns_[k] = std::max(start[op.src], start[op.dst]);
      pending_[k] = op.dep_count;
      for (int32_t d : s.deps_of(op)) ++dependents_begin_[d + 1];
    }
    // Channel order: each op waits for the previous op of the same (sender, channel) to leave.
    std::vector<int> last_on_channel;  // indexed by sender * channels + channel
    int channels = 1;
    for (const CommOp& op : s.ops) channels = std::max(channels, op.channel + 1);
    last_on_channel.assign(start.size() * channels, -1);
    for (int k = 0; k < n_ops; ++k) {
      const CommOp& op = s.ops[k];
      int& prev = last_on_channel[static_cast<size_t>(op.src) * channels + op.channel];
      if (prev >= 0) {
        fifo_next_[prev] = k;
        ++pending_[k];
      }
      prev = k;
    }
    for (int k = 0; k < n_ops; ++k) dependents_begin_[k + 1] += dependents_begin_[k];
    dependents_.resize(dependents_begin_[n_ops]);
    std::vector<int> fill(dependents_begin_.begin(), dependents_begin_.end() - 1);
    for (int k = 0; k < n_ops; ++k)
      for (int32_t d : s.deps_of(s.ops[k])) dependents_[fill[d]++] = k;
  }

  ScheduleTiming run() {
    for (int k = 0; k < static_cast<int>(s_.ops.size()); ++k)
      if (pending_[k] == 0) starts_.push({ready_ns_[k], k});
    while (!starts_.empty() || !active_.empty()) {
      // The earliest bandwidth-phase end (lowest op index on ties) goes before starts at the
      // same time, so a link freed at t serves a flow starting at t at full rate.
      int finishing = -1;
      for (int f = 0; f < static_cast<int>(active_.size()); ++f) {
        if (finishing < 0 || active_[f].finish_ns < active_[finishing].finish_ns ||
            (active_[f].finish_ns == active_[finishing].finish_ns && active_[f].op < active_[finishing].op))
          finishing = f;
      }
      const int64_t next_finish = finishing >= 0 ? active_[finishing].finish_ns : kNever;
      const int64_t next_start = starts_.empty() ? kNever : starts_.top().first;
      if (next_finish <= next_start) {
        finish(finishing, next_finish);
      } else {
        const int op = starts_.top().second;
        starts_.pop();
        begin(op, next_start);
      }
    }
    for (size_t k = 0; k < s_.ops.size(); ++k)
      DPS_ASSERT(pending_[k] == 0, "op {} of a {} schedule never became ready (a dependency cycle)", k,
                 s_.algorithm);
    return std::move(result_);
  }

 private:
  void begin(int k, int64_t t) {
    const CommOp& op = s_.ops[k];
    OpTime& time = result_.ops[k];
    time.start_ns = t;
    const uint64_t bytes = static_cast<uint64_t>(op.from.count_elems) * elem_bytes_;
    if (bytes == 0 && !op.signal) {  // nothing to move: done at once, invisible
      time.empty = true;
      left_sender(k, t);
      arrived(k, t);
      return;
    }
    const NetworkRoute& route = net_.route(gpu_[op.src], gpu_[op.dst]);
    if (bytes == 0) {  // a signal: latency only, no bandwidth
      left_sender(k, t);
      arrived(k, t + route.latency_ns);
      return;
    }
    Flow flow;
    flow.op = k;
    flow.route = &route;
    flow.remaining_bytes = static_cast<double>(bytes);
    flow.since_ns = t;
    active_.push_back(flow);
    for (int h = 0; h < route.hop_count; ++h) ++link_flows_[route.links[h]];
    update_rates(t);
  }

  void finish(int f, int64_t t) {
    const Flow flow = active_[f];
    active_.erase(active_.begin() + f);
    for (int h = 0; h < flow.route->hop_count; ++h) --link_flows_[flow.route->links[h]];
    update_rates(t);
    left_sender(flow.op, t);
    arrived(flow.op, t + flow.route->latency_ns);
  }

  // Recomputes every active flow's rate after the flow counts changed at time t.
  void update_rates(int64_t t) {
    const std::vector<NetworkLink>& links = net_.links();
    for (Flow& flow : active_) {
      double rate = std::numeric_limits<double>::infinity();
      for (int h = 0; h < flow.route->hop_count; ++h) {
        const int l = flow.route->links[h];
        rate = std::min(rate, links[l].bandwidth_bytes_per_s / link_flows_[l]);
      }
      if (rate == flow.rate_bytes_per_s) continue;
      if (flow.rate_bytes_per_s > 0.0) {
        flow.remaining_bytes -= flow.rate_bytes_per_s * static_cast<double>(t - flow.since_ns) * 1e-9;
        flow.remaining_bytes = std::max(flow.remaining_bytes, 0.0);
      }
      flow.rate_bytes_per_s = rate;
      flow.since_ns = t;
      flow.finish_ns = t + duration_ns(flow.remaining_bytes, rate);
    }
  }

  // The op's last byte left its sender: the sender's next op on that channel may start.
  void left_sender(int k, int64_t t) {
    if (const int next = fifo_next_[k]; next >= 0) release(next, t);
  }

  void arrived(int k, int64_t t) {
    const CommOp& op = s_.ops[k];
    OpTime& time = result_.ops[k];
    time.arrival_ns = t;
    time.reduce_start_ns = t;
    time.done_ns = t;
    if (op.reduce && !time.empty) {
      const int64_t begin = std::max(t, reduce_free_ns_[op.dst]);
      const uint64_t bytes = static_cast<uint64_t>(op.to.count_elems) * elem_bytes_;
      time.reduce_start_ns = begin;
      time.done_ns = begin + net_.reduce_time_ns(bytes);
      reduce_free_ns_[op.dst] = time.done_ns;
    }
    int64_t& src_end = result_.rank_end_ns[op.src];
    int64_t& dst_end = result_.rank_end_ns[op.dst];
    src_end = std::max(src_end, time.arrival_ns);
    dst_end = std::max(dst_end, time.done_ns);
    for (int i = dependents_begin_[k]; i < dependents_begin_[k + 1]; ++i)
      release(dependents_[i], time.done_ns);
  }

  void release(int k, int64_t t) {
    ready_ns_[k] = std::max(ready_ns_[k], t);
    if (--pending_[k] == 0) starts_.push({ready_ns_[k], k});
  }

  const Schedule& s_;
  const NetworkModel& net_;
  std::span<const int> gpu_;
  std::span<const int64_t> start_;
  uint64_t elem_bytes_;

  ScheduleTiming result_;
  std::vector<int> pending_;
  std::vector<int64_t> ready_ns_;
  std::vector<int> fifo_next_;
  std::vector<int> dependents_begin_;
  std::vector<int> dependents_;
  std::vector<int64_t> reduce_free_ns_;
  std::vector<int> link_flows_;
  std::vector<Flow> active_;
  std::priority_queue<std::pair<int64_t, int>, std::vector<std::pair<int64_t, int>>, std::greater<>> starts_;
};

}  // namespace

ScheduleTiming simulate_schedule(const Schedule& schedule, const NetworkModel& network,
                                 std::span<const int> gpu_of_rank, std::span<const int64_t> rank_start_ns,
                                 uint64_t elem_bytes) {
  DPS_ASSERT(gpu_of_rank.size() == rank_start_ns.size(), "{} GPUs for {} rank start times",
             gpu_of_rank.size(), rank_start_ns.size());
  return Simulator(schedule, network, gpu_of_rank, rank_start_ns, elem_bytes).run();
}

}  // namespace dpscope
