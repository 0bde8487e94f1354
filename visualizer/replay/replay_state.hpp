// ReplayState: everything the views draw for one position in a trace — each device's activity,
// memory and samples, the transfers in flight and bytes per link, the bucket table, the latest
// reduction, how much of the loss curve has happened. Produced by ReplayModel::state_at(); plain
// data with no GL or ImGui, so tests assert on it directly.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dpscope/trace_format/schema.hpp"
#include "replay/lanes.hpp"

namespace dpscope::viz {

// A position in a trace: `seq` events (in time order) have happened, the last of them at or
// before `t_ns`, and every later one at or after it. Seeking by time and stepping by event both
// produce cursors; ReplayModel builds them (at_time, after_event, ...).
struct Cursor {
  int64_t t_ns = 0;
  uint32_t seq = 0;
  friend bool operator==(const Cursor&, const Cursor&) = default;
};

// DDP bucket life cycle within one step, per rank:
//   pending  – some of its parameters' gradients are not ready yet;
//   ready    – all are ready (grad_ready seen for each), all-reduce not launched yet;
//   launched – bucket_launched seen: its all-reduce is running;
//   done     – bucket_done seen: the averaged gradients are back.
enum class BucketState : uint8_t { kPending, kReady, kLaunched, kDone };
const char* to_string(BucketState state);

// A step and phase as the phase lane and the presentation caption name them: "step 3 · backward";
// "step 3" where the phase is none (a process run's loss all-reduce after the optimizer step);
// the phase alone before the first step, and "set-up" there without one (DDP's broadcast of the
// parameters, before step 0).
std::string step_phase_label(int64_t step, Phase phase);
// The counting convention of everything a user reads (viewer, narration, answers, handouts): steps
// and epochs count from 1, so the trace's `"step":0` is "step 1"; code and trace fields keep
// PyTorch's 0-based values. Every step or epoch number the viewer shows goes through this.
constexpr int64_t shown_count(int64_t zero_based) { return zero_based + 1; }
// Where `step` is among the trace's steps first..last (0-based trace values), as a user reads it:
// "step 2 of 3" (a trace from step 0), "step 5 of 4–6" (a trace that starts later), "step 1" (one
// step), "set-up" (before the first step).
std::string step_position_label(int64_t step, int64_t first, int64_t last);

// What one stream of a device is doing at the cursor.
struct StreamActivity {
  StreamKind stream = StreamKind::kCompute;
  uint32_t event = kNoEvent;  // the innermost span/transfer covering the cursor; kNoEvent = idle
  std::string text;           // "forward 2.Linear", "all-reduce ring step 3/6"; "" when idle
};

// The chunks of the collective a device takes part in around the cursor, and whose contributions
// each holds on this device: what a ring (or tree) all-reduce exists to show. A ring all-reduce of
// N ranks splits the buffer into N chunks; in reduce-scatter each step adds one more rank's
// contribution to the chunk a rank receives, so after N-1 steps every rank holds one complete
// chunk; all-gather then copies the complete chunks around until every rank holds all of them.
struct ChunkSnapshot {
  int64_t coll = -1;             // -1: no collective on this device now
  std::vector<int32_t> members;  // device indices of its ranks, by rank: bit i of `held` is members[i]
  std::vector<uint64_t> held;    // per data chunk: the ranks whose contributions it holds here
  std::string stage;             // "reduce-scatter step 2/6", "all-gather step 5/6", "all-reduce complete"
  bool reduction = true;         // chunks collect contributions (all-reduce, reduce-scatter), else
                                 // copies of one owner's chunk (all-gather, broadcast)
  bool exchange = false;         // an all-to-all: block s is rank s's block for this GPU (its receive
                                 // buffer), there once rank s's transfer has arrived
  bool averaged = false;         // an average divided the sum by the number of ranks ("avg scale")
  int divisor = 0;               // that number
  // Every chunk is here: with every rank's contribution (a reduction), or at all (a copy).
  bool complete() const;
};

// A collective this device is in that ends in an error instead of running (a `collective` span
// with `args.error`, docs/trace-format.md): no chunk moves; the device waits in it until every
// member of its group has called its own collective, and then the check fails (lesson 13: rank 0
// alone all-reduces its loss, the others' next collective is a gradient bucket).
struct StalledCollective {
  uint32_t event = kNoEvent;         // the span covering the cursor; kNoEvent: none
  int64_t coll = -1;                 // the group's sequence number
  std::string op;                    // "all_reduce"
  std::vector<int32_t> waiting_for;  // ranks of its group whose call has not started yet, ascending
  std::string error;                 // the message it ends with
};

// "ranks 1-3", "ranks 1, 3", "rank 2" ("" for none): ranks as the viewer names a set of them.
std::string rank_list_label(const std::vector<int32_t>& ranks);

struct DeviceSnapshot {
  int64_t step = -1;  // of the device's latest event so far
  Phase phase = Phase::kNone;
  std::vector<StreamActivity> activity;  // one per lane of the device, in stream order
  bool memory_known = false;             // a memory counter has been seen
  // The trace reports this GPU's memory, but not yet at the cursor (the first report comes after the
  // first kernel): the card keeps its memory row, empty, from the trace's start.
  bool memory_pending = false;
  std::array<uint64_t, kMemoryCategoryCount> memory_bytes{};
  uint64_t capacity_bytes = 0;
  int64_t samples_step = -1;                      // step of the samples below; -1 when none yet
  const std::vector<int64_t>* samples = nullptr;  // dataset rows the device holds (null: none)
  // A shuffling run whose device holds the very rows it held at this earlier step: the
  // `no-set-epoch` pitfall showing (every epoch draws the same order); -1 when not.
  int64_t samples_repeat_of = -1;
  ChunkSnapshot chunks;
  StalledCollective stalled;

  bool busy() const;
  uint64_t memory_in_use_bytes() const;
};

struct TransferSnapshot {
  uint32_t event = kNoEvent;
  int32_t src = -1;  // device indices (not ids) in ReplayModel::devices()
  int32_t dst = -1;
  uint64_t bytes = 0;
  double progress = 0.0;  // 0 at start, 1 on arrival
  bool collective = false;
};

struct LinkSnapshot {
  int32_t a = -1;  // device indices, a < b
  int32_t b = -1;
  uint64_t bytes_in_flight = 0;
  int transfers = 0;
};

struct BucketSnapshot {
  int id = 0;
  std::vector<int> params;  // parameter indices in packing order
  uint64_t bytes = 0;
  std::vector<BucketState> state;  // per entry of ReplayState::bucket_devices
  std::vector<int> ready_params;   // how many of `params` are ready, per entry of bucket_devices
};

struct ReplayState {
  Cursor cursor;
  int64_t step = -1;  // the reference device's step and phase
  Phase phase = Phase::kNone;
  uint32_t last_event = kNoEvent;       // the latest event that has happened
  std::vector<DeviceSnapshot> devices;  // parallel to ReplayModel::devices()
  std::vector<TransferSnapshot> transfers;
  std::vector<LinkSnapshot> links;              // only links with bytes in flight
  std::vector<int> bucket_devices;              // device indices that report bucket events
  std::vector<BucketSnapshot> buckets;          // the assignment in force, state for the current step
  uint32_t bucket_assignment_event = kNoEvent;  // the `buckets` event in force (kNoEvent: header)
  int reduction = -1;                           // index into ReplayModel::reductions(): latest one started
  size_t losses_so_far = 0;                     // prefix of ReplayModel::losses() that has happened
};

}  // namespace dpscope::viz
