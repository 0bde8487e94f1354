// ReplayModel: a loaded trace, indexed so the visualizer can answer "what is the state at time t,
// or after event k" in a few binary searches, for traces of a million events.
//
// Built once per trace (or per poll of a live trace) from trace::TraceData, which it references
// and must not outlive. Indexes:
//   * the global time order of all events (stable by file order on equal `ts`, time_order.hpp); a
//     Cursor counts how many of them have happened, so "after event k" and "at time t" are the same
//     kind of position;
//   * one lane per (device, stream) with spans and transfers split into nesting levels (lanes.hpp);
//   * per device: memory counters, sample indices, instants, bucket instants, phase changes;
//   * loss points, value samples grouped into reductions, bucket assignments, step and phase marks;
//   * per device busy intervals for the HTA time breakdown (breakdown.hpp).
// state_at() (replay_state.cpp) turns a Cursor into a ReplayState for the views.
// No GL, no ImGui: unit-tested in tests/visualizer on traces written by the real TraceRecorder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"
#include "replay/breakdown.hpp"
#include "replay/lanes.hpp"
#include "replay/replay_state.hpp"
#include "replay/run_errors.hpp"
#include "replay/sampled_keys.hpp"
#include "replay/time_order.hpp"

namespace dpscope::viz {

// A device as the visualizer shows it: from the trace header, or found only in events.
struct ModelDevice {
  int32_t id = -1;       // the trace's device id (what events call `dev`)
  std::string name;      // "sim:0", "host"
  std::string kind;      // "sim", "cpu", "cuda", "host", "switch"
  std::string hardware;  // "NVIDIA H100 SXM5 80GB"
  uint64_t capacity_bytes = 0;
  int32_t rank = -1;  // the rank of its first event; -1 when it has none
  bool is_host = false;
  bool is_switch = false;  // a network node of the header (NVSwitch, PCIe switch): no events
  bool in_header = true;   // false: only events name it
};

// One collective (all transfers sharing a `coll` number), for the chunk view (chunk_state.cpp).
struct Collective {
  int64_t id = -1;
  std::string op;                   // "all-reduce", "broadcast" (its collective span's name); "" unknown
  std::vector<uint32_t> transfers;  // its transfer events, in time order
  std::vector<uint8_t> reduces;     // per transfer: adds into the destination (else copies over it)
  std::vector<int32_t> members;     // device indices of its ranks, ordered by rank
  int slices = 1;                   // pipeline slices per data chunk (the collective span's `slices`)
  int trace_chunks = 0;             // largest `chunk` + 1 (data chunk x slices + slice)
  int32_t first_algo_step = -1;
  int32_t last_algo_step = -1;
  int64_t begin_ns = 0;  // first transfer starts
  int64_t end_ns = 0;    // last transfer arrives
  int64_t step = -1;     // step and phase of its first transfer
  Phase phase = Phase::kNone;
  std::vector<std::pair<int32_t, uint32_t>> avg_scales;  // (device index, event) of its "avg scale" spans
  int data_chunks() const { return (trace_chunks + slices - 1) / slices; }
};

struct ModelLane {
  int32_t device = -1;  // index into devices()
  StreamKind stream = StreamKind::kCompute;
  LaneLevels levels;  // event indices by nesting level; ReplayModel::level() reads their times
};

// Where the reference rank's (step, phase) changes, in time order.
struct PhaseMark {
  uint32_t pos = 0;  // position in time order of the first event of the phase
  int64_t ts_ns = 0;
  int64_t step = -1;
  Phase phase = Phase::kNone;
};

struct StepMark {
  uint32_t pos = 0;  // first event of the step, any device
  int64_t ts_ns = 0;
  int64_t step = 0;
};

struct LossPoint {
  uint32_t pos = 0;
  int64_t ts_ns = 0;
  int64_t step = -1;
  int32_t rank = 0;
  double loss = 0.0;
};

// The loss of one training step, as `dpscope train` reports it: the mean over the ranks that
// logged a loss in that step (one rank in single/dp runs). `last` is the index in losses() of the
// last of those points, so the step's loss has happened once that point has.
struct StepLoss {
  int64_t step = -1;
  double loss = 0.0;
  int ranks = 0;
  size_t last = 0;
};

// The value samples of one tensor around one reduction: each rank's values before, and after.
// Reductions are in the order they start (first value sample), so first_pos increases.
struct Reduction {
  int64_t step = -1;
  int32_t param = -1;
  uint32_t name = trace::kNoString;  // "grad"
  uint32_t first_pos = 0;            // time-order position of its first value sample
  std::vector<uint32_t> before;      // `values` events with when=before_reduce, by rank
  std::vector<uint32_t> after;       // when=after_reduce, by rank
  std::vector<uint32_t> local;       // when=local, by rank
  std::vector<uint32_t> after_step;  // when=after_step, by rank
};

class ReplayModel {
 public:
  // Indexes `data`, which must outlive the model. Never throws on odd content: events naming a
  // device id the header lacks get a device of their own; impossible ones are skipped and counted
  // in warnings().
  explicit ReplayModel(const trace::TraceData& data);

  const trace::TraceData& data() const { return *data_; }
  const trace::Event& event(uint32_t index) const { return data_->events[index]; }
  size_t event_count() const { return order_.size(); }
  int64_t begin_ns() const { return begin_ns_; }
  int64_t end_ns() const { return end_ns_; }  // latest ts + dur
  const std::vector<std::string>& warnings() const { return warnings_; }

  // ---- positions ----
  Cursor start() const { return {begin_ns_, 0}; }
  Cursor end() const { return {end_ns_, static_cast<uint32_t>(order_.size())}; }
  // Where a live (growing) trace is complete: the latest time every GPU has written up to (the
  // earliest of the GPUs' latest event starts), so ranks that write at different moments never
  // show a mixed state. end() for a trace without GPU events. A followed directory of rank files
  // also waits for every process rank (TraceData::ranks_written_until_ns): start() while one has
  // written nothing.
  Cursor live_edge() const;
  Cursor at_time(int64_t t_ns) const;         // every event with ts <= t has happened
  Cursor after_event(size_t pos) const;       // events 0..pos (time order) have happened
  Cursor at_fraction(double fraction) const;  // 0 = start, 1 = end; clamped
  bool applied(uint32_t event, Cursor cursor) const { return order_.within_first(event, cursor.seq); }
  uint32_t event_at(size_t pos) const { return order_.event_at(pos); }
  uint32_t position_of(uint32_t event) const { return order_.position_of(event); }  // O(log n)
  int64_t ts_at(size_t pos) const { return order_.ts_at(pos); }

  // ---- navigation (the Player's buttons and keys) ----
  Cursor next_event(Cursor c) const;
  Cursor prev_event(Cursor c) const;
  Cursor next_phase(Cursor c) const;
  Cursor prev_phase(Cursor c) const;
  Cursor next_step(Cursor c) const;
  Cursor prev_step(Cursor c) const;
  // The first event of `step`, or nullopt when the trace has no such step.
  std::optional<Cursor> step_start(int64_t step) const;

  // ---- indexes ----
  const std::vector<ModelDevice>& devices() const { return devices_; }
  int device_index(int32_t id) const;  // -1 when unknown
  const std::vector<ModelLane>& lanes() const { return lanes_; }
  int lane_index(int device, StreamKind stream) const;  // -1 when the device has no such lane
  // One nesting level of a lane (0 = outermost), with the times of its items.
  EventLevel level(const ModelLane& lane, size_t depth) const {
    return {lane.levels.level(depth), data_->events, &lane.levels.sampled_starts(depth),
            &lane.levels.run_stops(depth)};
  }
  // Instants of a device in time order (as positions).
  const std::vector<uint32_t>& instants(int device) const { return per_device_[device].instants; }
  // The first index k >= from into instants(device) whose instant has ts >= t_ns (its size if none).
  size_t first_instant_at_or_after(int device, size_t from, int64_t t_ns) const;
  const std::vector<PhaseMark>& phase_marks() const { return phase_marks_; }
  const std::vector<StepMark>& step_marks() const { return step_marks_; }
  const std::vector<LossPoint>& losses() const { return losses_; }           // every rank's, in trace order
  const std::vector<StepLoss>& step_losses() const { return step_losses_; }  // by step
  const std::vector<Reduction>& reductions() const { return reductions_; }
  // The `error` instants of a failed run (empty when it ended normally), in time order.
  const RunErrors& run_errors() const { return run_errors_; }
  // [first, last] step seen (first > last when the trace has no step >= 0).
  int64_t first_step() const { return first_step_; }
  int64_t last_step() const { return last_step_; }
  // The window of a step: from its first event to the next step's first event (or the end).
  std::pair<int64_t, int64_t> step_window(int64_t step) const;
  // Algorithm steps of a collective: algo_step runs over [first, last].
  std::pair<int32_t, int32_t> algo_step_range(int64_t coll) const;
  // The collectives with transfers, in the order they start; nullptr for an unknown id.
  const std::vector<Collective>& collectives() const { return collectives_; }
  const Collective* collective(int64_t coll) const;
  // Largest memory in use on any device at any memory counter (for bar scaling), 0 when none.
  uint64_t peak_memory_bytes() const { return peak_memory_bytes_; }
  const DeviceBusy& busy(int device) const { return per_device_[device].busy; }
  // The device's HTA time breakdown over [t0, t1).
  TimeBreakdown breakdown(int device, int64_t t0_ns, int64_t t1_ns) const {
    return per_device_[device].busy.breakdown(t0_ns, t1_ns);
  }

  // The state of every device, link, bucket and reduction at `cursor` (replay_state.cpp).
  ReplayState state_at(Cursor cursor) const;

  // Interned strings the model compares against, looked up once.
  // String-table indices of the counter keys (event names are matched as Event::known).
  struct Names {
    uint32_t loss, capacity;
    uint32_t memory_category[kMemoryCategoryCount];
  };
  const Names& names() const { return names_; }

 private:
  struct PerDevice {
    std::vector<uint32_t> memory;   // positions of memory counters
    std::vector<uint32_t> samples;  // positions of samples events
    // Per samples event: the step of this device's first earlier samples event with the very
    // same rows, when the run shuffles (the sampler draws new ones every epoch unless
    // set_epoch() was forgotten); -1 otherwise.
    std::vector<int64_t> samples_repeat_of;
    std::vector<uint32_t> instants;       // positions of all instants
    SampledKeys instant_ts;               // every 8th instant's ts, for the Timeline's searches
    std::vector<uint32_t> bucket_events;  // grad_ready / bucket_launched / bucket_done
    std::vector<PhaseMark> phases;        // this device's (step, phase) changes
    DeviceBusy busy;
  };

  void build_devices();
  void add_device(ModelDevice d);  // appends to devices_ and both id tables
  void build_order();
  void build_lanes();
  void build_busy();
  void build_step_losses();
  void build_live_edge();
  void build_per_device();
  // PerDevice::samples_repeat_of, from the samples events build_per_device collected.
  void flag_repeated_samples();
  void build_marks();
  void build_reductions();
  void build_collectives();
  void build_failed_collectives();  // stalled_collective.cpp
  // The (step, phase) of a device at a cursor, from its phase marks.
  const PhaseMark* device_phase(int device, Cursor c) const;
  // The parts of state_at (replay_state.cpp).
  uint32_t covering_event(const ModelLane& lane, size_t level, Cursor c) const;  // kNoEvent: none
  std::string describe_activity(const ModelLane& lane, uint32_t event, size_t level, Cursor c) const;
  void fill_devices(ReplayState& s, Cursor c) const;
  void fill_transfers(ReplayState& s, Cursor c) const;
  void fill_buckets(ReplayState& s, Cursor c) const;
  void fill_chunks(ReplayState& s, Cursor c) const;   // chunk_state.cpp
  void fill_stalled(ReplayState& s, Cursor c) const;  // stalled_collective.cpp
  friend class StateBuilder;

  const trace::TraceData* data_;
  Names names_{};
  std::vector<ModelDevice> devices_;
  std::unordered_map<int32_t, int> device_by_id_;
  // [id] -> index or -1 for ids 0..the largest valid one (< 65536): device_index() runs once an
  // event in several passes, and a table read is several times faster than a hash lookup.
  std::vector<int> device_by_small_id_;
  TimeOrder order_;
  RunErrors run_errors_;
  int64_t begin_ns_ = 0;
  int64_t end_ns_ = 0;
  std::optional<int64_t> live_edge_ns_;  // nullopt: no GPU events
  std::vector<ModelLane> lanes_;
  std::vector<int> lane_by_device_stream_;  // device * kStreamCount + stream -> lane or -1
  std::vector<PerDevice> per_device_;
  std::vector<PhaseMark> phase_marks_;
  std::vector<StepMark> step_marks_;
  std::vector<LossPoint> losses_;
  std::vector<StepLoss> step_losses_;
  std::vector<Reduction> reductions_;
  std::vector<uint32_t> bucket_assignments_;               // positions of `buckets` events
  std::vector<Collective> collectives_;                    // by begin_ns
  std::unordered_map<int64_t, size_t> collective_index_;   // coll id -> index into collectives_
  std::vector<std::vector<uint32_t>> device_collectives_;  // per device: indices into collectives_
  // The collective spans that ended in an error (`args.error`), in file order: few (one per rank
  // of a failed run), so fill_stalled scans them all.
  struct FailedCollective {
    uint32_t event = kNoEvent;
    int32_t rank = -1;
    int64_t group = 0;
    int64_t coll = -1;
  };
  std::vector<FailedCollective> failed_collectives_;
  int64_t first_step_ = 0;
  int64_t last_step_ = -1;
  uint64_t peak_memory_bytes_ = 0;
  int reference_device_ = -1;  // whose phases drive the global phase marks
  std::vector<std::string> warnings_;
};

}  // namespace dpscope::viz
