// ReplayModel: builds the indexes (time order, lanes, per-device tables, marks, reductions) and
// answers positions and navigation. state_at() lives in replay_state.cpp.
#include "replay/replay_model.hpp"
#include "replay/run_info.hpp"

#include "dpscope/trace_tools/stats.hpp"

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <span>
#include <tuple>

#include <fmt/format.h>

namespace dpscope::viz {

namespace {

constexpr int32_t kMaxDeviceId = 1 << 16;  // ids beyond this are treated as corrupt

uint32_t lookup(const trace::TraceData& data, std::string_view s) { return data.find_string(s); }

}  // namespace

ReplayModel::ReplayModel(const trace::TraceData& data) : data_(&data) {
  names_.loss = lookup(data, trace_key::kLoss);
  names_.capacity = lookup(data, trace_key::kCapacity);
  for (int c = 0; c < kMemoryCategoryCount; ++c)
    names_.memory_category[c] = lookup(data, to_string(static_cast<MemoryCategory>(c)));

  // The passes run in two stages of two threads each. Every pass writes only its own members and
  // reads the events and the members of passes of an earlier stage (or earlier on its own thread),
  // so no member is written by one thread while the other reads it, and each pass computes what it
  // would alone: the model is the same as a single-threaded build. The split (a 10M-event trace,
  // 2 cores) puts about the same time on each side; std::async's future joins its thread even when
  // the other side throws.
  // Stage 1: the time order (the largest single pass) beside the devices and their lanes.
  std::future<void> order_done = std::async(std::launch::async, [this] {
    build_order();
    run_errors_ = RunErrors::from_trace(*data_, order_);
  });
  build_devices();
  build_lanes();
  build_live_edge();
  order_done.get();
  // Stage 2: the per-device tables, marks and collectives beside the busy unions (per_device_ is
  // sized here; build_busy writes only PerDevice::busy, build_per_device every other field).
  per_device_.resize(devices_.size());
  std::future<void> tables_done = std::async(std::launch::async, [this] {
    build_per_device();
    build_step_losses();
    build_marks();
    build_collectives();
    build_failed_collectives();
  });
  build_busy();
  build_reductions();
  tables_done.get();
}

void ReplayModel::build_live_edge() {
  std::vector<int64_t> latest(devices_.size(), INT64_MIN);
  for (const trace::Event& e : data_->events) {
    const int d = device_index(e.dev);
    if (d >= 0 && !devices_[d].is_host && !devices_[d].is_switch) latest[d] = std::max(latest[d], e.ts_ns);
  }
  live_edge_ns_.reset();
  for (int64_t t : latest)
    if (t != INT64_MIN) live_edge_ns_ = live_edge_ns_ ? std::min(*live_edge_ns_, t) : t;
  // A followed directory: a process rank that is behind, or has not written yet, holds the edge too.
  if (const std::optional<int64_t> ranks = data_->ranks_written_until_ns)
    live_edge_ns_ = live_edge_ns_ ? std::min(*live_edge_ns_, *ranks) : *ranks;
}

Cursor ReplayModel::live_edge() const {
  if (!live_edge_ns_) return end();
  if (*live_edge_ns_ < begin_ns_) return start();
  return at_time(*live_edge_ns_);
}

void ReplayModel::build_step_losses() {
  std::map<int64_t, StepLoss> by_step;
  for (size_t i = 0; i < losses_.size(); ++i) {
    const LossPoint& l = losses_[i];
    StepLoss& s = by_step[l.step];
    s.step = l.step;
    s.loss += l.loss;
    ++s.ranks;
    s.last = i;
  }
  step_losses_.clear();
  for (auto& [step, s] : by_step) {
    s.loss /= static_cast<double>(s.ranks);
    step_losses_.push_back(s);
  }
}

int ReplayModel::device_index(int32_t id) const {
  if (id >= 0 && static_cast<size_t>(id) < device_by_small_id_.size())
    return device_by_small_id_[static_cast<size_t>(id)];
  auto it = device_by_id_.find(id);
  return it == device_by_id_.end() ? -1 : it->second;
}

int ReplayModel::lane_index(int device, StreamKind stream) const {
  if (device < 0 || static_cast<size_t>(device) >= devices_.size()) return -1;
  return lane_by_device_stream_[static_cast<size_t>(device) * kStreamCount + static_cast<size_t>(stream)];
}

void ReplayModel::add_device(ModelDevice d) {
  const int index = static_cast<int>(devices_.size());
  device_by_id_[d.id] = index;
  if (d.id >= 0 && d.id < kMaxDeviceId) {
    const size_t id = static_cast<size_t>(d.id);
    if (id >= device_by_small_id_.size()) device_by_small_id_.resize(id + 1, -1);
    device_by_small_id_[id] = index;
  }
  devices_.push_back(std::move(d));
}

void ReplayModel::build_devices() {
  for (const TraceDeviceInfo& info : data_->header.devices) {
    if (device_by_id_.count(info.id) != 0) {
      warnings_.push_back(
          fmt::format("the header lists device id {} twice; the first entry is used", info.id));
      continue;
    }
    ModelDevice d;
    d.id = info.id;
    d.name = info.name;
    d.kind = info.kind;
    d.hardware = info.hardware;
    d.capacity_bytes = info.memory_bytes;
    d.is_host = info.kind == "host";
    d.is_switch = info.kind == "switch";
    add_device(std::move(d));
  }
  size_t no_device = 0;
  auto ensure = [&](int32_t id) {
    if (id < 0 || id >= kMaxDeviceId || device_index(id) >= 0) return;
    ModelDevice d;
    d.id = id;
    d.name = fmt::format("dev {}", id);
    d.kind = "unknown";
    d.in_header = false;
    add_device(std::move(d));
  };
  for (const trace::Event& e : data_->events) {
    if (e.dev < 0 || e.dev >= kMaxDeviceId) ++no_device;
    ensure(e.dev);
    if (e.type == trace::EventType::kTransfer) {
      const trace::Transfer& t = data_->transfer(e);
      ensure(t.src);
      ensure(t.dst);
    }
    const int d = device_index(e.dev);
    if (d >= 0 && devices_[d].rank < 0) devices_[d].rank = e.rank;
  }
  if (no_device > 0)
    warnings_.push_back(
        fmt::format("{} event(s) name no valid device id; they appear only in the event order", no_device));
  for (const ModelDevice& d : devices_)
    if (!d.in_header)
      warnings_.push_back(fmt::format("events name device id {}, which the header does not list", d.id));
}

void ReplayModel::build_order() {
  order_ = TimeOrder(data_->events);
  if (order_.size() == 0) return;
  begin_ns_ = order_.ts_at(0);
  end_ns_ = order_.ts_at(order_.size() - 1);
  for (const trace::Event& e : data_->events) end_ns_ = std::max(end_ns_, lane_end_ns(e));
}

void ReplayModel::build_lanes() {
  const std::vector<trace::Event>& events = data_->events;
  const size_t lane_keys = devices_.size() * kStreamCount;
  auto lane_key = [&](const trace::Event& e) -> std::optional<size_t> {
    if (e.type != trace::EventType::kSpan && e.type != trace::EventType::kTransfer) return std::nullopt;
    const int d = device_index(e.dev);
    if (d < 0) return std::nullopt;
    return static_cast<size_t>(d) * kStreamCount + static_cast<size_t>(e.stream);
  };
  // Every lane's event indices (4 bytes an item), each vector allocated once at its counted size:
  // growing them by doubling would briefly hold two copies of the largest.
  std::vector<std::vector<uint32_t>> items(lane_keys);
  {
    std::vector<size_t> item_count(lane_keys, 0);
    for (const trace::Event& e : events)
      if (const std::optional<size_t> key = lane_key(e)) ++item_count[*key];
    for (size_t key = 0; key < lane_keys; ++key) items[key].reserve(item_count[key]);
  }
  for (uint32_t i = 0; i < events.size(); ++i)
    if (const std::optional<size_t> key = lane_key(events[i])) items[*key].push_back(i);
  lane_by_device_stream_.assign(lane_keys, -1);
  for (size_t key = 0; key < lane_keys; ++key) {
    if (items[key].empty()) continue;
    ModelLane lane;
    lane.device = static_cast<int32_t>(key / kStreamCount);
    lane.stream = static_cast<StreamKind>(key % kStreamCount);
    lane.levels = LaneLevels(std::move(items[key]), events);  // frees this lane's unsorted indices
    lane_by_device_stream_[key] = static_cast<int>(lanes_.size());
    lanes_.push_back(std::move(lane));
  }
}

void ReplayModel::build_busy() {
  // Busy time is classified as `dpscope trace stats` classifies it (trace_tools/stats.hpp): compute
  // is spans on the compute lane, comm is spans and transfers on the comm and copy lanes, phase
  // spans are neither. Those are the lanes' items, so the unions are built from the lanes' sorted
  // levels in order of start, with no copy of the intervals.
  const std::vector<trace::Event>& events = data_->events;
  auto busy_union = [&](int device, std::initializer_list<StreamKind> streams) {
    std::vector<EventLevel> levels;
    for (const StreamKind stream : streams)
      if (const int li = lane_index(device, stream); li >= 0)
        for (size_t depth = 0; depth < lanes_[li].levels.size(); ++depth)
          levels.push_back(level(lanes_[li], depth));
    BusyIntervals busy;
    for_each_by_start(levels, [&](uint32_t event) {
      const trace::Event& e = events[event];
      if (trace::busy_class(e) != trace::BusyClass::kNone) busy.add(e.ts_ns, lane_end_ns(e));
    });
    busy.shrink_to_fit();
    return busy;
  };
  for (size_t d = 0; d < devices_.size(); ++d) {
    DeviceBusy& busy = per_device_[d].busy;
    const int device = static_cast<int>(d);
    busy.compute = busy_union(device, {StreamKind::kCompute});
    busy.comm = busy_union(device, {StreamKind::kComm, StreamKind::kCopy});
    busy.both = BusyIntervals::intersection(busy.compute, busy.comm);
  }
}

void ReplayModel::build_per_device() {
  std::vector<std::pair<int64_t, Phase>> last_phase(devices_.size(), {INT64_MIN, Phase::kNone});
  for (uint32_t p = 0; p < order_.size(); ++p) {
    const trace::Event& e = data_->events[order_.event_at(p)];
    if (e.type == trace::EventType::kBuckets) bucket_assignments_.push_back(p);
    const int d = device_index(e.dev);
    if (d < 0) continue;
    PerDevice& pd = per_device_[d];
    if (last_phase[d].first != e.step || last_phase[d].second != e.phase) {
      pd.phases.push_back({p, e.ts_ns, e.step, e.phase});
      last_phase[d] = {e.step, e.phase};
    }
    switch (e.type) {
      case trace::EventType::kCounter: {
        if (e.payload < 0 || static_cast<size_t>(e.payload) >= data_->counters.size()) break;
        const trace::ArgValues values =
            data_->counter_values(data_->counters[static_cast<size_t>(e.payload)]);
        if (e.known == EventName::kMemory) {
          pd.memory.push_back(p);
          uint64_t in_use = 0;
          for (const auto& [key, value] : values)
            for (int c = 0; c < kMemoryCategoryCount; ++c)
              if (key == names_.memory_category[c] && value > 0) in_use += static_cast<uint64_t>(value);
          peak_memory_bytes_ = std::max(peak_memory_bytes_, in_use);
        } else if (e.known == EventName::kLoss) {
          for (const auto& [key, value] : values) {
            if (key == names_.loss || values.size() == 1) {
              losses_.push_back({p, e.ts_ns, e.step, e.rank, value});
              break;
            }
          }
        }
        break;
      }
      case trace::EventType::kSamples:
        if (e.payload >= 0 && static_cast<size_t>(e.payload) < data_->samples.size()) pd.samples.push_back(p);
        break;
      case trace::EventType::kInstant:
        pd.instants.push_back(p);
        if (e.known == EventName::kGradReady || e.known == EventName::kBucketLaunched ||
            e.known == EventName::kBucketDone)
          pd.bucket_events.push_back(p);
        break;
      default: break;
    }
  }
  for (PerDevice& pd : per_device_)
    pd.instant_ts = SampledKeys(pd.instants.size(), [&](size_t k) { return order_.ts_at(pd.instants[k]); });
  flag_repeated_samples();
}

void ReplayModel::flag_repeated_samples() {
  const bool shuffles = parse_run_info(data_->header.run_json).shuffle;
  for (PerDevice& pd : per_device_) {
    pd.samples_repeat_of.assign(pd.samples.size(), -1);
    if (!shuffles) continue;  // without shuffling every epoch repeats the last: that is no pitfall
    std::map<std::vector<int64_t>, int64_t> first_step;  // rows -> the first step that held them
    for (size_t k = 0; k < pd.samples.size(); ++k) {
      const trace::Event& e = data_->events[order_.event_at(pd.samples[k])];
      const std::vector<int64_t>& rows = data_->samples[static_cast<size_t>(e.payload)].indices;
      if (rows.empty()) continue;
      const auto [it, fresh] = first_step.try_emplace(rows, e.step);
      if (!fresh && it->second != e.step) pd.samples_repeat_of[k] = it->second;
    }
  }
}

void ReplayModel::build_marks() {
  // The reference device: the lowest rank among devices with events (the host only as a last resort).
  for (size_t d = 0; d < devices_.size(); ++d) {
    if (per_device_[d].phases.empty()) continue;
    if (reference_device_ < 0) {
      reference_device_ = static_cast<int>(d);
      continue;
    }
    const ModelDevice& best = devices_[reference_device_];
    const ModelDevice& cand = devices_[d];
    if (std::make_tuple(cand.is_host, cand.rank) < std::make_tuple(best.is_host, best.rank))
      reference_device_ = static_cast<int>(d);
  }
  if (reference_device_ >= 0) phase_marks_ = per_device_[reference_device_].phases;

  // A step starts where the reference device enters it (the picture then says "step N"; another
  // rank may have begun it a little earlier), or at its first event where that device has none.
  std::map<int64_t, uint32_t> first_pos;
  if (reference_device_ >= 0)
    for (const PhaseMark& m : per_device_[reference_device_].phases)
      if (m.step >= 0) first_pos.emplace(m.step, m.pos);  // keeps the first
  // Only steps the reference device never entered are added here. An event of the same step as
  // the one before it cannot be a step's first: skipping those saves a map lookup an event.
  int64_t previous_step = -1;
  for (uint32_t p = 0; p < order_.size(); ++p) {
    const int64_t step = data_->events[order_.event_at(p)].step;
    if (step >= 0 && step != previous_step) first_pos.emplace(step, p);
    previous_step = step;
  }
  for (const auto& [step, p] : first_pos) step_marks_.push_back({p, order_.ts_at(p), step});
  std::sort(step_marks_.begin(), step_marks_.end(),
            [](const StepMark& a, const StepMark& b) { return a.pos < b.pos; });
  if (!first_pos.empty()) {
    first_step_ = first_pos.begin()->first;
    last_step_ = first_pos.rbegin()->first;
  }
}

void ReplayModel::build_reductions() {
  // Value samples are grouped by (step, tensor, name); within a group, each rank's k-th
  // before_reduce and k-th after_reduce belong to the group's k-th reduction, so several
  // all-reduces of one tensor in one step (or of unnamed tensors, param -1) stay apart.
  using Key = std::tuple<int64_t, int32_t, uint32_t>;
  struct Group {
    std::vector<size_t> reductions;
    std::map<int32_t, size_t> befores;  // per rank
    std::map<int32_t, size_t> afters;
  };
  std::map<Key, Group> groups;
  for (uint32_t p = 0; p < order_.size(); ++p) {
    const uint32_t i = order_.event_at(p);
    const trace::Event& e = data_->events[i];
    if (e.type != trace::EventType::kValues) continue;
    if (e.payload < 0 || static_cast<size_t>(e.payload) >= data_->values.size()) continue;
    const trace::ValueSample& v = data_->values[static_cast<size_t>(e.payload)];
    Group& g = groups[{e.step, v.param, e.name}];
    auto reduction = [&](size_t k) -> Reduction& {
      while (g.reductions.size() <= k) {
        g.reductions.push_back(reductions_.size());
        reductions_.push_back({.step = e.step, .param = v.param, .name = e.name, .first_pos = p});
      }
      return reductions_[g.reductions[k]];
    };
    if (v.when_kind == ValuesWhen::kBeforeReduce) {
      reduction(g.befores[e.rank]++).before.push_back(i);
    } else if (v.when_kind == ValuesWhen::kAfterReduce) {
      reduction(g.afters[e.rank]++).after.push_back(i);
    } else {
      const size_t seen = std::max(g.befores[e.rank], g.afters[e.rank]);
      Reduction& r = reduction(seen > 0 ? seen - 1 : 0);
      (v.when_kind == ValuesWhen::kAfterStep ? r.after_step : r.local).push_back(i);
    }
  }
  auto by_rank = [this](uint32_t a, uint32_t b) { return data_->events[a].rank < data_->events[b].rank; };
  for (Reduction& r : reductions_) {
    std::stable_sort(r.before.begin(), r.before.end(), by_rank);
    std::stable_sort(r.after.begin(), r.after.end(), by_rank);
    std::stable_sort(r.local.begin(), r.local.end(), by_rank);
    std::stable_sort(r.after_step.begin(), r.after_step.end(), by_rank);
  }
}

std::pair<int64_t, int64_t> ReplayModel::step_window(int64_t step) const {
  auto it =
      std::find_if(step_marks_.begin(), step_marks_.end(), [&](const StepMark& m) { return m.step == step; });
  if (it == step_marks_.end()) return {begin_ns_, end_ns_};
  int64_t next = end_ns_;
  for (const StepMark& m : step_marks_)
    if (m.step > step) next = std::min(next, m.ts_ns);
  return {it->ts_ns, next};
}

// ---- positions ----

Cursor ReplayModel::at_time(int64_t t_ns) const {
  return {t_ns, static_cast<uint32_t>(order_.count_until(t_ns))};
}

Cursor ReplayModel::after_event(size_t pos) const {
  if (pos >= order_.size()) return end();
  return {order_.ts_at(pos), static_cast<uint32_t>(pos + 1)};
}

Cursor ReplayModel::at_fraction(double fraction) const {
  if (!(fraction > 0.0)) return start();  // also NaN
  if (fraction >= 1.0) return end();
  const double span = static_cast<double>(end_ns_ - begin_ns_);
  return at_time(begin_ns_ + static_cast<int64_t>(std::llround(fraction * span)));
}

Cursor ReplayModel::next_event(Cursor c) const { return c.seq < order_.size() ? after_event(c.seq) : end(); }

Cursor ReplayModel::prev_event(Cursor c) const {
  if (c.seq == 0) return start();
  // Between events: snap back to the latest one that happened.
  if (c.t_ns > order_.ts_at(c.seq - 1) || c.seq > order_.size()) return after_event(c.seq - 1);
  return c.seq >= 2 ? after_event(c.seq - 2) : start();
}

namespace {

// Shared by phase and step navigation: marks sorted by pos.
template <typename Mark>
Cursor next_mark(const ReplayModel& m, const std::vector<Mark>& marks, Cursor c) {
  auto it = std::lower_bound(marks.begin(), marks.end(), c.seq,
                             [](const Mark& mk, uint32_t seq) { return mk.pos < seq; });
  return it == marks.end() ? m.end() : m.after_event(it->pos);
}

template <typename Mark>
Cursor prev_mark(const ReplayModel& m, const std::vector<Mark>& marks, Cursor c) {
  // The mark whose section holds the cursor: the last one that has happened.
  auto it = std::lower_bound(marks.begin(), marks.end(), c.seq,
                             [](const Mark& mk, uint32_t seq) { return mk.pos < seq; });
  if (it == marks.begin()) return m.start();
  --it;
  // Already at that mark's start: go to the one before.
  if (m.after_event(it->pos) == c) {
    if (it == marks.begin()) return m.start();
    --it;
  }
  return m.after_event(it->pos);
}

}  // namespace

Cursor ReplayModel::next_phase(Cursor c) const { return next_mark(*this, phase_marks_, c); }
Cursor ReplayModel::prev_phase(Cursor c) const { return prev_mark(*this, phase_marks_, c); }
Cursor ReplayModel::next_step(Cursor c) const { return next_mark(*this, step_marks_, c); }
Cursor ReplayModel::prev_step(Cursor c) const { return prev_mark(*this, step_marks_, c); }

std::optional<Cursor> ReplayModel::step_start(int64_t step) const {
  for (const StepMark& m : step_marks_)
    if (m.step == step) return after_event(m.pos);
  return std::nullopt;
}

size_t ReplayModel::first_instant_at_or_after(int device, size_t from, int64_t t_ns) const {
  const PerDevice& pd = per_device_[device];
  return pd.instant_ts.lower_bound(from, pd.instants.size(), t_ns,
                                   [&](size_t k) { return order_.ts_at(pd.instants[k]); });
}

const PhaseMark* ReplayModel::device_phase(int device, Cursor c) const {
  const std::vector<PhaseMark>& marks = per_device_[device].phases;
  auto it = std::lower_bound(marks.begin(), marks.end(), c.seq,
                             [](const PhaseMark& mk, uint32_t seq) { return mk.pos < seq; });
  return it == marks.begin() ? nullptr : &*(it - 1);
}

}  // namespace dpscope::viz
