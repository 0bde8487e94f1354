// Where the rank threads of a group meet at each collective, and how waiting ends: the plan is
// published, a peer failed (the world or the group was aborted), a missing peer returned from its
// function, or the timeout passed (the watchdog). Nothing here can wait forever.
#include <algorithm>

#include "sim_backend.hpp"

namespace dpscope::detail {
namespace {

std::string call_name(OpType op, int rank, int64_t seq) {
  return fmt::format("[Rank {}] {} (SequenceNumber={})", rank, to_string(op), seq);
}

// The failure a rank reports when the world or its group was aborted; nullopt if neither.
std::optional<Failure> abort_failure(const WorldState& world, const GroupState& group, OpType op, int rank,
                                     int64_t seq) {
  if (world.failure) {
    return Failure{world.failure->kind,
                   fmt::format("{} aborted because rank {} failed: {}", call_name(op, rank, seq),
                               world.failure->rank, world.failure->message)};
  }
  if (group.aborted) {
    return Failure{group.aborted->kind,
                   fmt::format("{} aborted: {}", call_name(op, rank, seq), group.aborted->message)};
  }
  return std::nullopt;
}

std::vector<int> missing_ranks(const Rendezvous& rv) {
  std::vector<int> missing;
  for (int r = 0; r < static_cast<int>(rv.arrivals.size()); ++r)
    if (!rv.arrivals[r]) missing.push_back(r);
  return missing;
}

std::string sizes_of(const Signature& s) {
  const int64_t numel = s.op == OpType::kBarrier || s.op == OpType::kNewGroup ? 0 : shape_numel(s.shape);
  return fmt::format("NumelIn={}, NumelOut={}", numel, numel);
}

// The leader: plan (or failure), then publish to every waiting rank.
void lead(SimWorld& world, GroupState& group, Rendezvous& rv) {
  std::optional<Failure> failure;
  std::shared_ptr<const Plan> plan;
  try {
    plan = build_plan(world, group, rv.seq, rv.arrivals);
  } catch (const Error& e) {
    failure = Failure{e.kind(), e.what()};
  } catch (const std::exception& e) {
    failure = Failure{ErrorKind::kInternal, e.what()};
  }
  if (failure) {
    // Everyone has arrived, so the failure is found when the last rank did: every rank's call
    // ends then (the lone caller of lesson 13 waited from its own arrival until that moment).
    failure->found_ns = 0;
    for (const std::optional<Arrival>& a : rv.arrivals)
      failure->found_ns = std::max(failure->found_ns, a->ready_ns);
    if (world.device(group.global_ranks[0]).is_simulated())
      write_failed_trace(world, group, rv.seq, rv.arrivals, failure->found_ns, failure->message);
  }
  WorldState& state = world.state();
  {
    std::lock_guard lock(state.mutex);
    rv.plan = std::move(plan);
    rv.failure = std::move(failure);
    rv.published = true;
  }
  state.cv.notify_all();
}

}  // namespace

JoinResult join_collective(SimWorld& world, GroupState& group, int rank, int64_t seq, Arrival arrival,
                           Milliseconds timeout) {
  WorldState& state = world.state();
  const OpType op = arrival.signature.op;
  const std::string sizes = sizes_of(arrival.signature);
  const int n = static_cast<int>(group.global_ranks.size());
  std::shared_ptr<Rendezvous> rv;
  bool leader = false;
  {
    std::lock_guard lock(state.mutex);
    if (auto failure = abort_failure(state, group, op, rank, seq)) return {nullptr, nullptr, failure};
    std::shared_ptr<Rendezvous>& slot = group.pending[seq];
    if (!slot) slot = std::make_shared<Rendezvous>(seq, op, n);
    rv = slot;
    rv->arrivals[rank] = std::move(arrival);
    if (++rv->arrived == n) {
      rv->complete = true;
      group.pending.erase(seq);
      leader = true;
    }
  }
  if (leader) lead(world, group, *rv);

  std::unique_lock lock(state.mutex);
  const Clock::time_point deadline = Clock::now() + timeout;
  auto missing_finished = [&] {
    for (int r : missing_ranks(*rv))
      if (state.finished[group.global_ranks[r]]) return r;
    return -1;
  };
  // Once everyone has arrived the leader always publishes, so only an incomplete rendezvous
  // can end any other way.
  state.cv.wait_until(lock, deadline, [&] {
    return rv->published || (!rv->complete && (state.failure || group.aborted || missing_finished() >= 0));
  });
  if (rv->published) {
    if (rv->failure) return {rv, nullptr, rv->failure};
    return {rv, rv->plan, std::nullopt};
  }
  if (rv->complete) {  // the timeout passed while the leader was still planning: keep waiting
    state.cv.wait(lock, [&] { return rv->published; });
    if (rv->failure) return {rv, nullptr, rv->failure};
    return {rv, rv->plan, std::nullopt};
  }
  // This rank leaves an incomplete rendezvous: it can never complete, so the group is aborted
  // (ranks that arrive later fail at once instead of waiting for the timeout).
  Failure failure;
  if (auto aborted = abort_failure(state, group, op, rank, seq)) {
    failure = *aborted;
  } else if (const int gone = missing_finished(); gone >= 0) {
    failure =
        Failure{ErrorKind::kMismatch,
                fmt::format("{} can never complete: rank {} returned from its function without joining it "
                            "(missing ranks: [{}])",
                            call_name(op, rank, seq), gone, fmt::join(missing_ranks(*rv), ", "))};
    group.aborted = Failure{failure.kind, failure.message};
  } else {
    const auto elapsed =
        std::chrono::duration_cast<Milliseconds>(Clock::now() - (deadline - timeout)).count();
    std::vector<int> missing = missing_ranks(*rv);
    missing.erase(std::remove(missing.begin(), missing.end(), rank), missing.end());
    failure = Failure{
        ErrorKind::kTimeout,
        fmt::format("[Rank {}] Watchdog caught collective operation timeout: WorkSim(SequenceNumber={}, "
                    "OpType={}, {}, Timeout(ms)={}) ran for {} milliseconds before timing out; ranks "
                    "that never joined: [{}]",
                    rank, seq, to_string(op), sizes, timeout.count(), elapsed, fmt::join(missing, ", "))};
    group.aborted = Failure{failure.kind, failure.message};
  }
  lock.unlock();
  state.cv.notify_all();
  return {nullptr, nullptr, failure};
}

}  // namespace dpscope::detail
