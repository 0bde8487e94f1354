// The leader's work at a collective: compare fingerprints, pick and build the algorithm's
// schedule, time it on the network, and write the trace (one enclosing `collective` span per
// rank, a `transfer` per chunk, a `reduce` span per reduction, `work_completed` instants).
// Everything here is a function of the ranks' arrivals only, so plans and traces are identical
// on every run. On measured devices (the cuda backend) each rank writes the same events itself,
// after the fact, with the times its comm stream measured (write_measured_trace).
#include <algorithm>
#include <iterator>
#include <map>

#include "../algorithms/collective_choice.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "sim_backend.hpp"

namespace dpscope::detail {
namespace {

void check_fingerprints(int64_t seq, const std::vector<std::optional<Arrival>>& arrivals) {
  const Signature& first = arrivals[0]->signature;
  std::vector<int> differing;
  for (int r = 1; r < static_cast<int>(arrivals.size()); ++r)
    if (!(arrivals[r]->signature == first)) differing.push_back(r);
  if (differing.empty()) return;
  const int r = differing.front();
  throw Error(ErrorKind::kMismatch, mismatch_with_rank0(fingerprint(first, seq), r,
                                                        fingerprint(arrivals[r]->signature, seq), differing));
}

// Builds and times the schedule of the collective (collective_choice.hpp).
TimedSchedule choose(const Signature& sig, int slices, const SimWorld& world, const GroupState& g,
                     const std::vector<int64_t>& starts) {
  const int64_t count =
      sig.op == OpType::kBarrier || sig.op == OpType::kNewGroup ? 0 : shape_numel(sig.shape);
  return choose_schedule({.op = sig.op,
                          .algorithm = sig.algorithm.value_or(Algorithm::kAuto),
                          .count = count,
                          .root = sig.root,
                          .slices = slices,
                          .elem_bytes = element_size(sig.dtype),
                          .proto = world.proto(),
                          .nccl_algo = world.nccl_algo()},
                         world.network(), g.gpus, g.ring, starts);
}

// Which ranks divide their result by n for ReduceOp::kAvg, and how many bytes.
uint64_t avg_bytes(const Signature& sig, int rank) {
  if (!sig.reduce_op || *sig.reduce_op != ReduceOp::kAvg) return 0;
  if (sig.op == OpType::kReduce && rank != sig.root) return 0;
  return static_cast<uint64_t>(shape_numel(sig.shape)) * element_size(sig.dtype);
}

// The collective span's name and args, the same in simulated and measured traces.
// `algo`, `slices`, `steps`: the schedule's, or for a call that never ran (write_failed_trace) the
// algorithm the rank asked for and no steps.
std::string collective_name(const Signature& sig, std::string_view algo, uint64_t bytes) {
  return sig.op == OpType::kBarrier ? std::string(to_string(EventName::kBarrier))
                                    : collective_span_name(api_name(sig.op), algo, bytes);
}

CollectiveArgs collective_args(const Signature& sig, std::string_view algo, int slices, int steps,
                               int64_t seq, int group, uint64_t bytes, int ranks) {
  return {.coll = seq,
          .group = group,
          .op = api_name(sig.op),
          .algo = algo,
          .bytes = bytes,
          .count = sig.op == OpType::kBarrier ? 0 : shape_numel(sig.shape),
          .dtype = to_string(sig.dtype),
          .redop = sig.reduce_op ? to_string(*sig.reduce_op) : "none",
          .root = sig.root,
          .ranks = ranks,
          .slices = slices,
          .steps = steps};
}

void write_trace(const SimWorld& world, const GroupState& g, int64_t seq, const Signature& sig,
                 const Plan& plan, const std::vector<int64_t>& scale_ns) {
  const int n = static_cast<int>(g.global_ranks.size());
  auto device_of = [&](int r) -> const Device& { return world.device(g.global_ranks[r]); };
  const Schedule& s = plan.schedule;
  const uint64_t bytes = collective_bytes(sig, n);
  const std::string name = collective_name(sig, s.algorithm, bytes);
  const CollectiveArgs args = collective_args(sig, s.algorithm, s.slices, s.steps, seq, g.id, bytes, n);
  for (int r = 0; r < n; ++r)
    if (TraceSink* t = device_of(r).tracer())
      t->span(device_of(r), {.stream = StreamKind::kComm,
                             .cat = SpanCategory::kCollective,
                             .name = name,
                             .ts_ns = plan.start_ns[r],
                             .dur_ns = plan.end_ns[r] - plan.start_ns[r],
                             .args = args});
  const uint64_t elem = element_size(sig.dtype);
  std::vector<std::string> transfer_names;
  for (const std::string& phase : s.phases)
    transfer_names.push_back(collective_transfer_name(s.algorithm, phase));
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const CommOp& op = s.ops[k];
    const OpTime& time = plan.timing.ops[k];
    TraceSink* t = device_of(op.src).tracer();
    if (t == nullptr || time.empty) continue;
    t->transfer(device_of(op.src), {.src = device_of(op.src).trace_id(),
                                    .dst = device_of(op.dst).trace_id(),
                                    .bytes = static_cast<uint64_t>(op.from.count_elems) * elem,
                                    .ts_ns = time.start_ns,
                                    .dur_ns = time.arrival_ns - time.start_ns,
                                    .stream = StreamKind::kComm,
                                    .name = transfer_names[op.phase],
                                    .collective = seq,
                                    .algo = s.algorithm,
                                    .algo_step = op.algo_step,
                                    .chunk = op.chunk});
  }
  const std::string reduce_name = reduce_span_name(sig.reduce_op ? to_string(*sig.reduce_op) : "");
  for (size_t k = 0; k < s.ops.size(); ++k) {
    const CommOp& op = s.ops[k];
    const OpTime& time = plan.timing.ops[k];
    TraceSink* t = device_of(op.dst).tracer();
    if (t == nullptr || !op.reduce || time.empty) continue;
    t->span(device_of(op.dst),
            {.stream = StreamKind::kComm,
             .cat = SpanCategory::kReduce,
             .name = reduce_name,
             .ts_ns = time.reduce_start_ns,
             .dur_ns = time.done_ns - time.reduce_start_ns,
             .args = ReduceArgs{.coll = seq, .bytes = op.to.count_elems * elem, .src_rank = op.src}});
  }
  for (int r = 0; r < n; ++r) {
    TraceSink* t = device_of(r).tracer();
    if (t == nullptr) continue;
    if (scale_ns[r] > 0 || avg_bytes(sig, r) > 0)
      t->span(device_of(r), {.stream = StreamKind::kComm,
                             .cat = SpanCategory::kReduce,
                             .name = to_string(EventName::kAvgScale),
                             .ts_ns = plan.end_ns[r] - scale_ns[r],
                             .dur_ns = scale_ns[r],
                             .args = AvgScaleArgs{.coll = seq, .bytes = avg_bytes(sig, r), .divisor = n}});
    t->instant(device_of(r), plan.end_ns[r],
               WorkCompleted{.coll = seq, .op = api_name(sig.op), .group = g.id});
  }
}

// The elements of one rank's buffer written so far, as disjoint [first, last) ranges.
class WrittenRanges {
 public:
  // True when every element of `seg` was written, false when none was. The schedules move whole
  // chunks and slices of one partition, so a segment is never written in part.
  bool covers(Segment seg) const {
    if (seg.count_elems == 0) return true;
    const int64_t first = seg.offset_elems;
    const int64_t last = first + seg.count_elems;
    auto it = ranges_.upper_bound(first);
    if (it != ranges_.begin() && std::prev(it)->second > first) {
      DPS_ASSERT(std::prev(it)->second >= last, "segment [{}, {}) written in part", first, last);
      return true;
    }
    DPS_ASSERT(it == ranges_.end() || it->first >= last, "segment [{}, {}) written in part", first, last);
    return false;
  }
  void add(Segment seg) {
    if (seg.count_elems == 0) return;
    int64_t first = seg.offset_elems;
    int64_t last = first + seg.count_elems;
    auto it = ranges_.upper_bound(first);
    if (it != ranges_.begin() && std::prev(it)->second >= first) --it;
    while (it != ranges_.end() && it->first <= last) {
      first = std::min(first, it->first);
      last = std::max(last, it->second);
      it = ranges_.erase(it);
    }
    ranges_.emplace(first, last);
  }
  // The segments of [0, count) not written.
  std::vector<Segment> gaps(int64_t count) const {
    std::vector<Segment> out;
    int64_t at = 0;
    for (const auto& [first, last] : ranges_) {
      if (first > at) out.push_back({at, first - at});
      at = std::max(at, last);
    }
    if (at < count) out.push_back({at, count - at});
    return out;
  }

 private:
  std::map<int64_t, int64_t> ranges_;
};

// Out of place: the source table of `plan` (Plan::op_sources, fill_from_input). Ops are visited
// in execution order (step, then receiving rank, then list order): a step's ops touch disjoint
// elements, so what was written before an op is exactly what its ranks' buffers hold then.
void plan_sources(Plan& plan, const std::vector<std::optional<Arrival>>& arrivals, int64_t count) {
  const int n = static_cast<int>(arrivals.size());
  bool any = false;
  for (const std::optional<Arrival>& a : arrivals) any = any || !a->input.blocks.empty();
  if (!any || !plan.with_data) return;
  std::vector<WrittenRanges> written(n);
  const Schedule& s = plan.schedule;
  plan.op_sources.assign(s.ops.size(), 0);
  for (const int32_t k : plan.exec_order) {
    const CommOp& op = s.ops[k];
    uint8_t source = 0;
    if (!plan.inputs[op.src].blocks.empty() && !written[op.src].covers(op.from)) source |= kFromSrcInput;
    if (op.reduce && !plan.inputs[op.dst].blocks.empty() && !written[op.dst].covers(op.to))
      source |= kSeedDstInput;
    plan.op_sources[k] = source;
    written[op.dst].add(op.to);
  }
  plan.fill_from_input.resize(n);
  for (int r = 0; r < n; ++r)
    if (arrivals[r]->complete_output && !plan.inputs[r].blocks.empty())
      plan.fill_from_input[r] = written[r].gaps(count);
}

}  // namespace

void write_failed_trace(const SimWorld& world, const GroupState& g, int64_t seq,
                        const std::vector<std::optional<Arrival>>& arrivals, int64_t found_ns,
                        const std::string& message) {
  const int n = static_cast<int>(g.global_ranks.size());
  for (int r = 0; r < n; ++r) {
    const Signature& sig = arrivals[r]->signature;
    const Device& device = world.device(g.global_ranks[r]);
    TraceSink* t = device.tracer();
    if (t == nullptr || sig.op == OpType::kNewGroup) continue;  // as a plan's: new_group is not traced
    // No schedule ran: the algorithm is the one the rank asked for, and no step was taken.
    const std::string_view algo = sig.algorithm ? to_string(*sig.algorithm) : "none";
    const uint64_t bytes = collective_bytes(sig, n);
    CollectiveArgs args = collective_args(sig, algo, arrivals[r]->slices, /*steps=*/0, seq, g.id, bytes, n);
    args.error = message;
    t->span(device, {.stream = StreamKind::kComm,
                     .cat = SpanCategory::kCollective,
                     .name = collective_name(sig, algo, bytes),
                     .ts_ns = arrivals[r]->ready_ns,
                     .dur_ns = found_ns - arrivals[r]->ready_ns,
                     .args = args});
  }
}

uint64_t collective_bytes(const Signature& sig, int n) {
  if (sig.op == OpType::kBarrier || sig.op == OpType::kNewGroup) return 0;
  const uint64_t bytes = static_cast<uint64_t>(shape_numel(sig.shape)) * element_size(sig.dtype);
  switch (sig.op) {
    case OpType::kAllGather:
    case OpType::kReduceScatter:
    case OpType::kScatter:
    case OpType::kGather: return bytes * n;
    default: return bytes;
  }
}

std::shared_ptr<const Plan> build_plan(SimWorld& world, GroupState& group, int64_t seq,
                                       const std::vector<std::optional<Arrival>>& arrivals) {
  check_fingerprints(seq, arrivals);
  const int n = static_cast<int>(arrivals.size());
  const Signature& sig = arrivals[0]->signature;
  auto plan = std::make_shared<Plan>();
  plan->reduce_op = sig.reduce_op.value_or(ReduceOp::kSum);
  plan->dtype = sig.dtype;
  plan->with_data = !sig.meta;
  plan->signature = sig;
  plan->seq = seq;
  plan->group_id = group.id;
  for (int r = 0; r < n; ++r) plan->devices.push_back(world.device(group.global_ranks[r]));
  for (const std::optional<Arrival>& a : arrivals) {
    plan->start_ns.push_back(a->ready_ns);
    plan->buffers.push_back(a->buffer);
    plan->inputs.push_back(a->input);
  }

  if (sig.op == OpType::kNewGroup) {
    auto sub = std::make_shared<GroupState>();
    sub->world = &world;
    for (int r : sig.ranks) {
      sub->global_ranks.push_back(group.global_ranks[r]);
      sub->gpus.push_back(group.gpus[r]);
    }
    sub->ring = world.network().ring_order(sub->gpus);
    sub->timeout =
        arrivals[0]->new_group_timeout.count() > 0 ? arrivals[0]->new_group_timeout : group.timeout;
    {
      std::lock_guard lock(world.state().mutex);
      sub->id = world.state().next_group_id++;
    }
    plan->new_group = std::move(sub);
    plan->end_ns = plan->start_ns;
    return plan;
  }

  TimedSchedule built = choose(sig, arrivals[0]->slices, world, group, plan->start_ns);
  plan->schedule = std::move(built.schedule);
  plan->timing = std::move(built.timing);
  plan->end_ns = plan->timing.rank_end_ns;
  std::vector<int64_t> scale_ns(n, 0);
  for (int r = 0; r < n; ++r) {
    if (const uint64_t bytes = avg_bytes(sig, r); bytes > 0)
      scale_ns[r] = world.network().scale_time_ns(bytes);
    plan->end_ns[r] += scale_ns[r];
  }

  // Execution index: op indices grouped by (step, receiving rank), in schedule order.
  const int steps = plan->schedule.steps;
  plan->exec_begin.assign(static_cast<size_t>(steps) * n + 1, 0);
  for (const CommOp& op : plan->schedule.ops)
    ++plan->exec_begin[static_cast<size_t>(op.step) * n + op.dst + 1];
  for (size_t i = 1; i < plan->exec_begin.size(); ++i) plan->exec_begin[i] += plan->exec_begin[i - 1];
  plan->exec_order.resize(plan->schedule.ops.size());
  std::vector<int32_t> fill(plan->exec_begin.begin(), plan->exec_begin.end() - 1);
  for (size_t k = 0; k < plan->schedule.ops.size(); ++k) {
    const CommOp& op = plan->schedule.ops[k];
    plan->exec_order[fill[static_cast<size_t>(op.step) * n + op.dst]++] = static_cast<int32_t>(k);
  }
  plan_sources(*plan, arrivals, shape_numel(sig.shape));

  if (world.device(0).is_simulated()) write_trace(world, group, seq, sig, *plan, scale_ns);
  return plan;
}

void write_measured_trace(const Plan& plan, int rank, int64_t begin_ns,
                          const std::vector<int64_t>& step_end_ns, int64_t end_ns) {
  const Device& self = plan.devices[rank];
  TraceSink* t = self.tracer();
  const Signature& sig = plan.signature;
  if (t == nullptr || sig.op == OpType::kNewGroup) return;  // as simulated: new_group is not traced
  const Schedule& s = plan.schedule;
  const int n = static_cast<int>(plan.devices.size());
  const uint64_t bytes = collective_bytes(sig, n);
  const std::string name = collective_name(sig, s.algorithm, bytes);
  t->span(self,
          {.stream = StreamKind::kComm,
           .cat = SpanCategory::kCollective,
           .name = name,
           .ts_ns = begin_ns,
           .dur_ns = end_ns - begin_ns,
           .args = collective_args(sig, s.algorithm, s.slices, s.steps, plan.seq, plan.group_id, bytes, n)});
  // Ops are timed per step: every rank's events bracket each step (fence and barrier included),
  // so a chunk spans the step it moved in. As in the simulated trace, the sender traces the
  // transfer and the receiver the reduction.
  const uint64_t elem = element_size(sig.dtype);
  const std::string reduce_name = reduce_span_name(sig.reduce_op ? to_string(*sig.reduce_op) : "");
  const bool stepped = static_cast<int>(step_end_ns.size()) == s.steps;
  for (const CommOp& op : s.ops) {
    if ((op.src != rank && op.dst != rank) || op.to.count_elems == 0 || !stepped) continue;
    const int64_t start = op.step == 0 ? begin_ns : step_end_ns[op.step - 1];
    const int64_t dur = step_end_ns[op.step] - start;
    if (op.src == rank)
      t->transfer(self, {.src = self.trace_id(),
                         .dst = plan.devices[op.dst].trace_id(),
                         .bytes = static_cast<uint64_t>(op.from.count_elems) * elem,
                         .ts_ns = start,
                         .dur_ns = dur,
                         .stream = StreamKind::kComm,
                         .name = collective_transfer_name(s.algorithm, s.phases[op.phase]),
                         .collective = plan.seq,
                         .algo = s.algorithm,
                         .algo_step = op.algo_step,
                         .chunk = op.chunk});
    if (op.dst == rank && op.reduce)
      t->span(self,
              {.stream = StreamKind::kComm,
               .cat = SpanCategory::kReduce,
               .name = reduce_name,
               .ts_ns = start,
               .dur_ns = dur,
               .args = ReduceArgs{.coll = plan.seq, .bytes = op.to.count_elems * elem, .src_rank = op.src}});
  }
  if (const uint64_t avg = avg_bytes(sig, rank); avg > 0) {
    const int64_t scale_start = step_end_ns.empty() ? begin_ns : step_end_ns.back();
    t->span(self, {.stream = StreamKind::kComm,
                   .cat = SpanCategory::kReduce,
                   .name = to_string(EventName::kAvgScale),
                   .ts_ns = scale_start,
                   .dur_ns = end_ns - scale_start,
                   .args = AvgScaleArgs{.coll = plan.seq, .bytes = avg, .divisor = n}});
  }
  t->instant(self, end_ns, WorkCompleted{.coll = plan.seq, .op = api_name(sig.op), .group = plan.group_id});
}

}  // namespace dpscope::detail
