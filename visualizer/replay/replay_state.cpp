// ReplayModel::state_at: a Cursor -> ReplayState, in binary searches over the model's indexes.
// Cost per call: O(lanes * levels * log n + buckets * params): cheap enough for every frame.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "dpscope/base/format_bytes.hpp"
#include "replay/replay_model.hpp"

namespace dpscope::viz {

const char* to_string(BucketState state) {
  switch (state) {
    case BucketState::kPending: return "pending";
    case BucketState::kReady: return "ready";
    case BucketState::kLaunched: return "launched";
    case BucketState::kDone: return "done";
  }
  return "?";
}

std::string step_phase_label(int64_t step, Phase phase) {
  if (step < 0) return phase == Phase::kNone ? "set-up" : to_string(phase);
  if (phase == Phase::kNone) return fmt::format("step {}", shown_count(step));
  return fmt::format("step {} · {}", shown_count(step), to_string(phase));
}

std::string step_position_label(int64_t step, int64_t first, int64_t last) {
  if (step < 0) return "set-up";
  if (first >= last) return fmt::format("step {}", shown_count(step));
  if (first == 0) return fmt::format("step {} of {}", shown_count(step), shown_count(last));
  return fmt::format("step {} of {}–{}", shown_count(step), shown_count(first), shown_count(last));
}

bool DeviceSnapshot::busy() const {
  return std::any_of(activity.begin(), activity.end(),
                     [](const StreamActivity& a) { return a.event != kNoEvent; });
}

uint64_t DeviceSnapshot::memory_in_use_bytes() const {
  uint64_t sum = 0;
  for (uint64_t b : memory_bytes) sum += b;
  return sum;
}

namespace {

// How many of `positions` (sorted) have happened at `seq`.
size_t applied_count(const std::vector<uint32_t>& positions, uint32_t seq) {
  return static_cast<size_t>(std::lower_bound(positions.begin(), positions.end(), seq) - positions.begin());
}

}  // namespace

// state_at() in parts: covering_event and describe_activity answer per lane; the fill_* functions
// each build one section of the state.

uint32_t ReplayModel::covering_event(const ModelLane& lane, size_t level, Cursor c) const {
  const EventLevel items = this->level(lane, level);
  const size_t i = covering_item(items, c.t_ns);
  if (i == items.size()) return kNoEvent;
  return applied(items.event(i), c) ? items.event(i) : kNoEvent;
}

std::string ReplayModel::describe_activity(const ModelLane& lane, uint32_t event, size_t level,
                                           Cursor c) const {
  const trace::TraceData& data = *data_;
  const trace::Event& e = data.events[event];
  const std::string_view name = data.str(e.name);
  if (e.type != trace::EventType::kTransfer) return std::string(name);
  const trace::Transfer& tr = data.transfer(e);
  if (tr.coll < 0) return fmt::format("{} {}", name, format_bytes(tr.bytes));
  // A collective step: name it after the enclosing collective span when there is one.
  std::string label(name);
  for (size_t outer = level; outer-- > 0;) {
    const uint32_t parent = covering_event(lane, outer, c);
    if (parent == kNoEvent) continue;
    const trace::Event& pe = data.events[parent];
    if (pe.type == trace::EventType::kSpan && pe.category == SpanCategory::kCollective) {
      label = std::string(data.str(pe.name));
      break;
    }
  }
  const std::string_view algo = data.str(tr.algo);
  if (!algo.empty() && label.find(algo) == std::string::npos) label = fmt::format("{} {}", label, algo);
  const auto [first, last] = algo_step_range(tr.coll);
  if (tr.algo_step >= 0 && first >= 0)
    label = fmt::format("{} step {}/{}", label, tr.algo_step - first + 1, last - first + 1);
  return label;
}

// Per device: (step, phase), what each stream is doing, memory, the samples held.
void ReplayModel::fill_devices(ReplayState& s, Cursor c) const {
  const trace::TraceData& data = *data_;
  s.devices.resize(devices_.size());
  for (size_t d = 0; d < devices_.size(); ++d) {
    DeviceSnapshot& ds = s.devices[d];
    const PerDevice& pd = per_device_[d];
    if (const PhaseMark* mark = device_phase(static_cast<int>(d), c)) {
      ds.step = mark->step;
      ds.phase = mark->phase;
    }
    for (int stream = 0; stream < kStreamCount; ++stream) {
      const int li = lane_index(static_cast<int>(d), static_cast<StreamKind>(stream));
      if (li < 0) continue;
      const ModelLane& lane = lanes_[li];
      StreamActivity act;
      act.stream = lane.stream;
      for (size_t level = lane.levels.size(); level-- > 0;) {
        const uint32_t event = covering_event(lane, level, c);
        if (event == kNoEvent) continue;
        act.event = event;
        act.text = describe_activity(lane, event, level, c);
        break;
      }
      ds.activity.push_back(std::move(act));
    }
    ds.capacity_bytes = devices_[d].capacity_bytes;
    if (const size_t n = applied_count(pd.memory, c.seq); n > 0) {
      const trace::Event& e = data.events[order_.event_at(pd.memory[n - 1])];
      ds.memory_known = true;
      for (const auto& [key, value] : data.counter_values(data.counters[static_cast<size_t>(e.payload)])) {
        const uint64_t bytes = value > 0 ? static_cast<uint64_t>(value) : 0;
        if (key == names_.capacity) ds.capacity_bytes = bytes;
        for (int cat = 0; cat < kMemoryCategoryCount; ++cat)
          if (key == names_.memory_category[cat]) ds.memory_bytes[cat] = bytes;
      }
    } else {
      ds.memory_pending = !pd.memory.empty();
    }
    if (const size_t n = applied_count(pd.samples, c.seq); n > 0) {
      const trace::Event& e = data.events[order_.event_at(pd.samples[n - 1])];
      ds.samples_step = e.step;
      ds.samples = &data.samples[static_cast<size_t>(e.payload)].indices;
      ds.samples_repeat_of = pd.samples_repeat_of[n - 1];
    }
  }
}

// Transfers in flight, and the bytes they put on each link.
void ReplayModel::fill_transfers(ReplayState& s, Cursor c) const {
  const trace::TraceData& data = *data_;
  for (const ModelLane& lane : lanes_) {
    for (size_t level = 0; level < lane.levels.size(); ++level) {
      const uint32_t event = covering_event(lane, level, c);
      if (event == kNoEvent) continue;
      const trace::Event& e = data.events[event];
      if (e.type != trace::EventType::kTransfer) continue;
      const trace::Transfer& tr = data.transfer(e);
      const int src = device_index(tr.src);
      const int dst = device_index(tr.dst);
      if (src < 0 || dst < 0 || src == dst) continue;
      const double progress =
          e.dur_ns > 0 ? static_cast<double>(c.t_ns - e.ts_ns) / static_cast<double>(e.dur_ns) : 1.0;
      s.transfers.push_back({event, src, dst, tr.bytes, std::clamp(progress, 0.0, 1.0), tr.coll >= 0});
      const int a = std::min(src, dst);
      const int b = std::max(src, dst);
      auto link = std::find_if(s.links.begin(), s.links.end(),
                               [&](const LinkSnapshot& l) { return l.a == a && l.b == b; });
      if (link == s.links.end()) {
        s.links.push_back({a, b, tr.bytes, 1});
      } else {
        link->bytes_in_flight += tr.bytes;
        ++link->transfers;
      }
    }
  }
}

// Buckets: the assignment in force, and each reporting device's progress in its current step.
void ReplayModel::fill_buckets(ReplayState& s, Cursor c) const {
  const trace::TraceData& data = *data_;
  const std::vector<TraceBucketInfo>* assignment = &data.header.buckets;
  if (const size_t n = applied_count(bucket_assignments_, c.seq); n > 0) {
    const trace::Event& e = data.events[order_.event_at(bucket_assignments_[n - 1])];
    if (e.payload >= 0 && static_cast<size_t>(e.payload) < data.buckets.size()) {
      assignment = &data.buckets[static_cast<size_t>(e.payload)].buckets;
      s.bucket_assignment_event = order_.event_at(bucket_assignments_[n - 1]);
    }
  }
  for (size_t d = 0; d < devices_.size(); ++d)
    if (!per_device_[d].bucket_events.empty()) s.bucket_devices.push_back(static_cast<int>(d));
  std::stable_sort(s.bucket_devices.begin(), s.bucket_devices.end(),
                   [&](int a, int b) { return devices_[a].rank < devices_[b].rank; });
  for (const TraceBucketInfo& b : *assignment) {
    BucketSnapshot bs;
    bs.id = b.id;
    bs.params = b.params;
    bs.bytes = b.bytes;
    s.buckets.push_back(std::move(bs));
  }
  for (int d : s.bucket_devices) {
    const std::vector<uint32_t>& events = per_device_[d].bucket_events;
    const int64_t step = s.devices[d].step;
    std::set<int> ready;
    std::set<int> launched;
    std::set<int> done;
    for (size_t n = applied_count(events, c.seq); n-- > 0;) {
      const trace::Event& e = data.events[order_.event_at(events[n])];
      if (e.step != step) break;
      if (auto g = data.grad_ready(e)) {
        ready.insert(g->param);
      } else if (auto b = data.bucket_args(e)) {
        (e.known == EventName::kBucketDone ? done : launched).insert(b->bucket);
      }
    }
    for (BucketSnapshot& bs : s.buckets) {
      const int n_ready = static_cast<int>(
          std::count_if(bs.params.begin(), bs.params.end(), [&](int p) { return ready.count(p) != 0; }));
      BucketState state = BucketState::kPending;
      if (done.count(bs.id) != 0) {
        state = BucketState::kDone;
      } else if (launched.count(bs.id) != 0) {
        state = BucketState::kLaunched;
      } else if (!bs.params.empty() && n_ready == static_cast<int>(bs.params.size())) {
        state = BucketState::kReady;
      }
      bs.state.push_back(state);
      bs.ready_params.push_back(n_ready);
    }
  }
}

ReplayState ReplayModel::state_at(Cursor c) const {
  ReplayState s;
  s.cursor = c;
  if (c.seq > order_.size()) c.seq = static_cast<uint32_t>(order_.size());
  s.last_event = c.seq > 0 ? order_.event_at(c.seq - 1) : kNoEvent;
  if (reference_device_ >= 0) {
    if (const PhaseMark* mark = device_phase(reference_device_, c)) {
      s.step = mark->step;
      s.phase = mark->phase;
    }
  }
  fill_devices(s, c);
  fill_transfers(s, c);
  fill_buckets(s, c);
  fill_chunks(s, c);
  fill_stalled(s, c);
  // The reduction and the losses that have happened.
  auto red = std::lower_bound(reductions_.begin(), reductions_.end(), c.seq,
                              [](const Reduction& r, uint32_t seq) { return r.first_pos < seq; });
  s.reduction = static_cast<int>(red - reductions_.begin()) - 1;
  s.losses_so_far =
      static_cast<size_t>(std::lower_bound(losses_.begin(), losses_.end(), c.seq,
                                           [](const LossPoint& l, uint32_t seq) { return l.pos < seq; }) -
                          losses_.begin());
  return s;
}

}  // namespace dpscope::viz
