// Reading dpscope traces (docs/trace-format.md) into a compact, indexed in-memory form.
//
// Used by `dpscope trace export|stats`, by lessons (triggers and answers are predicates on events)
// and by the visualizer's replay model. A trace is one file, or a directory of process ranks'
// rank-K.jsonl files, which are merged into one timeline on rank 0's clock as they are read
// (trace_tools/rank_traces.hpp). Event names, categories and tags are interned into one
// string table; variable-size parts (counter values, value samples, sample indices, buckets, args)
// live in side tables indexed by Event::payload. A 1M-event trace loads in about a second. A file
// whose content is a zstd stream (`run.jsonl.zst`) is decoded on the way (trace_tools/compressed.hpp).
//
// Errors: a malformed line is reported as "TRACE:LINE: reason" (for a directory, TRACE is the rank
// file); in strict mode the first one throws Error(kFormat), otherwise it is collected in
// TraceData::problems and skipped. A partial
// last line (no trailing '\n') is never an error: it is left for the next poll (live files).
// A header whose major version is newer than kTraceFormatMajor is refused in both modes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dpscope/trace_format/events.hpp"
#include "dpscope/trace_format/schema.hpp"

namespace dpscope::trace {

// The vocabulary (trace_format/events.hpp), also reachable as trace::EventType, ...
using dpscope::BucketReason;
using dpscope::EventName;
using dpscope::EventType;
using dpscope::SpanCategory;
using dpscope::to_string;
using dpscope::ValuesWhen;

inline constexpr uint32_t kNoString = UINT32_MAX;
inline constexpr int32_t kNoPayload = -1;

// One event, 48 bytes: a 10M-event trace is read into memory whole (docs/benchmarks.md, "10M
// events"). Fields a type does not use keep their defaults; what only some types carry lives in
// TraceData's side tables, indexed by `payload`.
struct Event {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;  // 0 for instants, counters, values, samples, buckets
  int32_t step = -1;   // the reader refuses steps above INT32_MAX
  int32_t rank = 0;
  int32_t dev = -1;
  uint32_t name = kNoString;  // string table index
  uint32_t cat = kNoString;   // spans: category
  // spans and instants: index into TraceData::args (kNoPayload when they had none); counters,
  // transfers, values, samples, buckets: index into the matching TraceData table (counters,
  // transfers, values, samples, buckets)
  int32_t payload = kNoPayload;
  uint32_t line = 0;  // 1-based line in the file
  EventType type : 3 = EventType::kInstant;
  StreamKind stream : 2 = StreamKind::kCompute;  // spans and transfers
  Phase phase : 3 = Phase::kNone;
  EventName known = EventName::kOther;           // `name` resolved at parse time (kOther: free-form)
  SpanCategory category = SpanCategory::kOther;  // spans: `cat` resolved at parse time

  int64_t end_ns() const { return ts_ns + dur_ns; }
};
static_assert(sizeof(Event) == 48, "Event's size is part of the 10M-event memory budget");
static_assert(static_cast<int>(EventType::kBuckets) < 8 && kStreamCount <= 4 &&
                  static_cast<int>(Phase::kCheckpoint) < 8,
              "Event's bit-fields hold every value of their enums");

// What a transfer carries beyond an Event (TraceData::transfers, indexed by its payload).
struct Transfer {
  int32_t src = -1;
  int32_t dst = -1;
  uint64_t bytes = 0;
  uint64_t flow = 0;
  int64_t coll = -1;  // collective sequence number, -1 for copies
  uint32_t algo = kNoString;
  int32_t algo_step = -1;
  int32_t chunk = -1;
  // Index into TraceData::remote_ends when an end lies on another process's device
  // (src_rank/dst_rank), kNoPayload when both ends are this trace's devices.
  int32_t remote = kNoPayload;
};

// A (key string index, number) of args or counter values, and a (key, value string index) of args.
using ArgValue = std::pair<uint32_t, double>;
using ArgText = std::pair<uint32_t, uint32_t>;

// The keys of one args object (or one counter's values), interned: the events of a trace repeat a
// few key lists ("flops", "bytes") millions of times, so each is stored once (TraceData::shapes).
struct ArgShape {
  std::vector<uint32_t> number_keys;  // file order
  std::vector<uint32_t> text_keys;    // file order
  bool operator==(const ArgShape&) const = default;
};

// Args of a span or instant, or the values of a counter: numbers ("param": 5, "flops": 1e9) and
// strings ("message": "...", "op": "all_reduce"); other values (objects, arrays, booleans) are
// dropped. The shape's numbers, then its string values' string indices, lie in
// TraceData::value_pool from `begin` (8 bytes each, keys not repeated). Events with equal entries
// usually share them: a kernel's flops and bytes, or the memory counters, repeat every step. Read
// them with TraceData::arg_values / arg_texts / counter_values.
struct Args {
  uint32_t shape = 0;  // index into TraceData::shapes
  uint32_t begin = 0;  // first entry in TraceData::value_pool
};
using CounterValues = Args;  // a counter's values: a shape with numbers only

// The (key, entry) pairs of one Args, by value: a random-access range over a shape's keys and
// the pool's entries (ArgValue for numbers, ArgText for strings).
template <typename Pair>
class ArgRange {
 public:
  ArgRange() = default;
  ArgRange(const uint32_t* keys, const double* entries, size_t count)
      : keys_(keys), entries_(entries), count_(count) {}
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  Pair operator[](size_t i) const { return {keys_[i], static_cast<typename Pair::second_type>(entries_[i])}; }
  Pair front() const { return (*this)[0]; }

  class iterator {
   public:
    using value_type = Pair;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const uint32_t* keys, const double* entries) : keys_(keys), entries_(entries) {}
    Pair operator*() const { return {*keys_, static_cast<typename Pair::second_type>(*entries_)}; }
    iterator& operator++() {
      ++keys_;
      ++entries_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const iterator& o) const { return keys_ == o.keys_; }

   private:
    const uint32_t* keys_ = nullptr;
    const double* entries_ = nullptr;
  };
  iterator begin() const { return {keys_, entries_}; }
  iterator end() const { return {keys_ + count_, entries_ + count_}; }

 private:
  const uint32_t* keys_ = nullptr;
  const double* entries_ = nullptr;
  size_t count_ = 0;
};
using ArgValues = ArgRange<ArgValue>;
using ArgTexts = ArgRange<ArgText>;

struct ValueSample {
  int32_t param = -1;
  uint32_t when = kNoString;                  // "before_reduce", ...
  ValuesWhen when_kind = ValuesWhen::kOther;  // `when` resolved at parse time
  std::vector<float> values;                  // the tensor's elements 0, stride, 2 * stride, ...
  double norm = 0.0;
  int64_t stride = 1;
};
struct SampleIndices {
  std::vector<int64_t> indices;
  // The training loop's epoch (its pass over the sampler, 0-based), when the writer knew it.
  std::optional<int64_t> epoch;
};
struct BucketAssignment {
  uint32_t reason = kNoString;                      // "initial", "rebuilt"
  BucketReason reason_kind = BucketReason::kOther;  // `reason` resolved at parse time
  std::vector<TraceBucketInfo> buckets;
};

// The ends of a transfer of one process rank's file (docs/trace-format.md, `src_rank`/`dst_rank`)
// that lie on another rank's device: that rank and the device id in that rank's header, exactly as
// the file wrote them. -1 for an end on this file's own device (then Event::src/dst holds it).
// Such an end reads as device -1 (unknown) in Event::src/dst until the ranks are merged; a merged
// trace (a directory, `dpscope trace merge`) has no remote ends.
struct RemoteEnds {
  int32_t src_rank = -1;
  int32_t src = -1;
  int32_t dst_rank = -1;
  int32_t dst = -1;
};

struct Problem {
  uint32_t line = 0;
  std::string reason;
  std::string file;  // the file the line is in, when it is not TraceData::path (a rank file)
};

// One process rank of a trace read from a directory (its "process" entry, docs/trace-format.md).
struct RankSource {
  int rank = 0;
  std::string path;             // DIR/rank-K.jsonl
  int64_t clock_offset_ns = 0;  // added to the rank's times to put them on rank 0's clock
  int64_t clock_uncertainty_ns = 0;
  bool partial_last_line = false;  // the file ended with an incomplete line, left out
  uint32_t partial_line = 0;       // its line number (0 when none)
};

struct TraceData {
  std::string path;           // for messages; a directory's path when the trace is its merged ranks
  std::string version;        // "1.0"
  TraceHeader header;         // header.run_json holds the raw "run" object
  std::vector<Event> events;  // in file order
  std::vector<std::string> strings;
  std::vector<Args> args;
  std::vector<CounterValues> counters;
  std::vector<Transfer> transfers;
  std::vector<ArgShape> shapes;    // the key lists of every Args and CounterValues
  std::vector<double> value_pool;  // their entries (Args), shared by equal ones
  std::vector<ValueSample> values;
  std::vector<SampleIndices> samples;
  std::vector<BucketAssignment> buckets;
  std::vector<RemoteEnds> remote_ends;  // transfers with an end on another process (Transfer::remote)
  std::vector<Problem> problems;        // non-strict mode: malformed lines that were skipped
  // The text ended with an incomplete line (no '\n'), which was left out (a file being written),
  // and its line number (0 when none; for a directory, see each of `ranks`).
  bool partial_last_line = false;
  uint32_t partial_line = 0;
  int64_t min_ts_ns = 0;  // over all events (0 when none)
  int64_t max_end_ns = 0;
  // A directory of process ranks' files: each rank, in rank order (empty for a single file).
  std::vector<RankSource> ranks;
  // Set while a directory is followed (TraceFollower): the latest time every rank has written,
  // on rank 0's clock (the earliest of the ranks' latest event starts); events after it may still
  // be joined by earlier ones of a slower rank. INT64_MIN while some rank has written no event.
  std::optional<int64_t> ranks_written_until_ns;

  std::string_view str(uint32_t index) const;  // "" for kNoString
  // The entries of args and counters, in file order (empty for a reference out of range).
  ArgValues arg_values(const Args& a) const;
  ArgTexts arg_texts(const Args& a) const;
  ArgValues counter_values(const CounterValues& c) const { return arg_values(c); }
  // Interns the keys' shape and appends the entries to value_pool (how parsers and merges fill
  // Args). Throws Error(kFormat) when the pool would pass 2^32 entries.
  Args add_args(std::span<const ArgValue> numbers, std::span<const ArgText> texts);
  // A transfer's own fields; a default Transfer for any other event or a payload out of range.
  const Transfer& transfer(const Event& e) const;
  uint32_t find_string(std::string_view s) const;  // kNoString when absent
  // A numeric arg of a span/instant, if present.
  std::optional<double> arg(const Event& e, std::string_view key) const;
  // A string arg of a span/instant, if present.
  std::optional<std::string_view> text_arg(const Event& e, std::string_view key) const;
  // Typed payloads of the well-known events; nullopt when `e` is not one or lacks the fields.
  std::optional<GradReady> grad_ready(const Event& e) const;    // EventName::kGradReady
  std::optional<BucketArgs> bucket_args(const Event& e) const;  // kBucketLaunched, kBucketDone
  std::optional<KernelArgs> kernel_args(const Event& e) const;  // spans with flops and bytes
  // EventName::kError: the message ("" when the writer gave none); its string_view points into
  // `strings`, valid while this TraceData lives unchanged.
  std::optional<RunError> run_error(const Event& e) const;
  // A `collective` span that ended in an error (`args.error`: a mismatch found when the last rank
  // arrived): the message; nullopt for any other event, a collective that ran among them. Points
  // into `strings`, like run_error's.
  std::optional<std::string_view> collective_error(const Event& e) const;
  // A transfer's ends on other processes' devices; nullptr when both are this trace's.
  const RemoteEnds* remote_ends_of(const Event& e) const;
  // The header device with this id, or nullptr.
  const TraceDeviceInfo* device(int32_t id) const;

  // internal: string and shape interning during parsing
  uint32_t intern(std::string_view s);
  std::unordered_map<std::string, uint32_t> string_index;
  uint32_t intern_shape(const ArgShape& shape);
  std::unordered_map<std::string, uint32_t> shape_index;  // ArgShape's keys as bytes -> index
  // Where `entries` lie in value_pool: where an equal run of entries was added lately (a small
  // table by hash, so memory stays bounded however many differ), else appended. Throws
  // Error(kFormat) when the pool would pass 2^32 entries.
  uint32_t add_entries(std::span<const double> entries);
  std::vector<uint32_t> recent_entries;  // by hash of the entries: their begin + 1 (0: none)
};

struct ReadOptions {
  bool strict = true;  // throw on the first malformed line instead of collecting it
  // Bytes read from a file per piece (0: 8 MiB of a plain file, 256 KiB of a compressed one); a
  // piece may end anywhere, mid-line included. Tests make it small to cut lines everywhere.
  size_t piece_bytes = 0;
  // Bytes of lines per task of the two threads that parse a file (0: about 1 MiB); tests make it
  // small to cut many chunks.
  size_t chunk_bytes = 0;
};

// Reads a whole file. Throws Error(kIo) when it cannot be opened, Error(kFormat) for an empty file,
// a bad header, a newer major version, or (strict) a malformed event line.
// A directory is read as the rank-K.jsonl files of a run whose ranks are processes, merged into one
// trace on rank 0's clock (read_rank_directory, trace_tools/rank_traces.hpp, which says how and
// which directories it refuses).
TraceData read_trace(const std::filesystem::path& path, ReadOptions options = {});
// read_trace of one file; a directory is refused (kIo).
TraceData read_trace_file(const std::filesystem::path& path, ReadOptions options = {});
// Same, from memory (`name` is used in messages).
TraceData parse_trace(std::string_view text, std::string_view name = "<memory>", ReadOptions options = {});

namespace detail {
class FileFollower;       // runtime/src/trace_tools/file_follower.hpp
class DirectoryFollower;  // runtime/src/trace_tools/directory_follower.hpp
}  // namespace detail

// Follows a trace that is still being written (dpscope-viz --follow): each poll() parses the
// complete lines appended since the last one and appends their events to data().
//
// The path may be a file or a directory of process ranks' rank-K.jsonl files (a multi-process run
// watched from another terminal). A directory's ranks are merged as read_trace merges them, once
// every rank of the run (world_size) has written its header line; rank files that appear later
// are picked up. data().ranks_written_until_ns then says up to when every rank has written. A
// path that does not exist yet is waited for, and followed as a directory if it becomes one.
class TraceFollower {
 public:
  explicit TraceFollower(std::filesystem::path path, ReadOptions options = {.strict = false});
  ~TraceFollower();
  TraceFollower(TraceFollower&&) noexcept;
  TraceFollower& operator=(TraceFollower&&) noexcept;
  // Returns the number of new events; 0 when nothing complete was added. Reads the header on the
  // first poll that finds a complete first line. Throws like read_trace for a bad header (for a
  // directory: a rank file without its "process" entry, ranks of different runs, a rank beyond
  // the run's world size).
  size_t poll();
  // A file: its header line has been read. A directory: every rank's has, and data() is merged.
  bool has_header() const;
  const TraceData& data() const;
  TraceData& data();
  // How often the trace was found truncated or replaced; each time data() was cleared and the new
  // file (for a directory: every rank file) read from its start (a new run writing to the same path).
  size_t restarts() const;
  // Following a directory of rank files.
  bool is_directory() const { return directory_ != nullptr; }
  // What the follower waits for before it has a header, in words ("" when nothing): for a
  // directory "rank-2.jsonl (2 of 4 ranks have written their header)"; for a file "run.jsonl's
  // header line".
  std::string waiting_for() const;

 private:
  std::filesystem::path path_;
  ReadOptions options_;
  std::unique_ptr<detail::FileFollower> file_;
  std::unique_ptr<detail::DirectoryFollower> directory_;
};

}  // namespace dpscope::trace
