// Reading dpscope traces (docs/trace-format.md) into a compact, indexed in-memory form.
//
// Used by `dpscope trace export|stats`, by lessons (triggers and answers are predicates on events)
// and by the visualizer's replay model. A trace is one file, or a directory of process ranks'
// rank-K.jsonl files, which are merged into one timeline on rank 0's clock as they are read
// (trace_format/rank_traces.hpp). Event names, categories and tags are interned into one
// string table; variable-size parts (counter values, value samples, sample indices, buckets, args)
// live in side tables indexed by Event::payload. A 1M-event trace loads in about a second. A file
// whose content is a zstd stream (`run.jsonl.zst`) is decoded on the way (trace_format/compressed.hpp).
//
// Errors: a malformed line is reported as "TRACE:LINE: reason" (for a directory, TRACE is the rank
// file); in strict mode the first one throws Error(kFormat), otherwise it is collected in
// TraceData::problems and skipped. A partial
// last line (no trailing '\n') is never an error: it is left for the next poll (live files).
// A header whose major version is newer than kTraceFormatMajor is refused in both modes.
#pragma once

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

// One event, fixed size. Fields a type does not use keep their defaults.
struct Event {
  EventType type = EventType::kInstant;
  StreamKind stream = StreamKind::kCompute;  // spans and transfers
  Phase phase = Phase::kNone;
  EventName known = EventName::kOther;           // `name` resolved at parse time (kOther: free-form)
  SpanCategory category = SpanCategory::kOther;  // spans: `cat` resolved at parse time
  int32_t rank = 0;
  int32_t dev = -1;
  int64_t step = -1;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;         // 0 for instants, counters, values, samples, buckets
  uint32_t name = kNoString;  // string table index
  uint32_t cat = kNoString;   // spans: category
  // transfers
  int32_t src = -1;
  int32_t dst = -1;
  uint64_t bytes = 0;
  uint64_t flow = 0;
  int64_t coll = -1;  // collective sequence number, -1 for copies
  uint32_t algo = kNoString;
  int32_t algo_step = -1;
  int32_t chunk = -1;
  // counters, values, samples, buckets: index into the matching TraceData table;
  // spans and instants: index into TraceData::args (or kNoPayload when they had none);
  // transfers: index into TraceData::remote_ends when an end lies on another process's device
  // (src_rank/dst_rank), kNoPayload when both ends are this trace's devices
  int32_t payload = kNoPayload;
  uint32_t line = 0;  // 1-based line in the file

  int64_t end_ns() const { return ts_ns + dur_ns; }
};

// A (key string index, number) of args or counter values, and a (key, value string index) of args.
using ArgValue = std::pair<uint32_t, double>;
using ArgText = std::pair<uint32_t, uint32_t>;
// Entries [begin, begin + count) of one of TraceData's pools (value_pool, text_pool). Pools, not a
// vector per event: two thirds of a training trace's events carry args, and a heap block each
// cost about 50 bytes an event (docs/benchmarks.md, "10M events").
struct PoolRange {
  uint32_t begin = 0;
  uint32_t count = 0;
};
// Args of a span or instant: numbers ("param": 5, "flops": 1e9) and strings ("message": "...",
// "op": "all_reduce"); other values (objects, arrays, booleans) are dropped. Read them with
// TraceData::arg_values / arg_texts.
struct Args {
  PoolRange values;  // ArgValue entries of TraceData::value_pool, file order
  PoolRange texts;   // ArgText entries of TraceData::text_pool, file order
};
struct CounterValues {
  PoolRange values;  // ArgValue entries of TraceData::value_pool, file order (TraceData::counter_values)
};
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
};

struct TraceData {
  std::string path;           // for messages; a directory's path when the trace is its merged ranks
  std::string version;        // "1.0"
  TraceHeader header;         // header.run_json holds the raw "run" object
  std::vector<Event> events;  // in file order
  std::vector<std::string> strings;
  std::vector<Args> args;
  std::vector<CounterValues> counters;
  std::vector<ArgValue> value_pool;  // the numbers of every Args and CounterValues
  std::vector<ArgText> text_pool;    // the strings of every Args
  std::vector<ValueSample> values;
  std::vector<SampleIndices> samples;
  std::vector<BucketAssignment> buckets;
  std::vector<RemoteEnds> remote_ends;  // transfers with an end on another process (Event::payload)
  std::vector<Problem> problems;        // non-strict mode: malformed lines that were skipped
  // The text ended with an incomplete line (no '\n'), which was left out (a file being written).
  bool partial_last_line = false;
  int64_t min_ts_ns = 0;  // over all events (0 when none)
  int64_t max_end_ns = 0;
  // A directory of process ranks' files: each rank, in rank order (empty for a single file).
  std::vector<RankSource> ranks;
  // Set while a directory is followed (TraceFollower): the latest time every rank has written,
  // on rank 0's clock (the earliest of the ranks' latest event starts); events after it may still
  // be joined by earlier ones of a slower rank. INT64_MIN while some rank has written no event.
  std::optional<int64_t> ranks_written_until_ns;

  std::string_view str(uint32_t index) const;  // "" for kNoString
  // The entries of args and counters, in file order.
  std::span<const ArgValue> arg_values(const Args& a) const { return pool(value_pool, a.values); }
  std::span<const ArgText> arg_texts(const Args& a) const { return pool(text_pool, a.texts); }
  std::span<const ArgValue> counter_values(const CounterValues& c) const {
    return pool(value_pool, c.values);
  }
  // Appends `entries` to a pool and returns their range (how parsers and merges fill Args).
  // Throws Error(kFormat) when a pool would pass 2^32 entries.
  PoolRange add_values(std::span<const ArgValue> entries);
  PoolRange add_texts(std::span<const ArgText> entries);
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
  // A transfer's ends on other processes' devices; nullptr when both are this trace's.
  const RemoteEnds* remote_ends_of(const Event& e) const;
  // The header device with this id, or nullptr.
  const TraceDeviceInfo* device(int32_t id) const;

  // internal: string interning during parsing
  uint32_t intern(std::string_view s);
  std::unordered_map<std::string, uint32_t> string_index;

 private:
  template <typename T>
  static std::span<const T> pool(const std::vector<T>& entries, PoolRange r) {
    return r.begin + uint64_t{r.count} <= entries.size()
               ? std::span<const T>(entries.data() + r.begin, r.count)
               : std::span<const T>();
  }
};

struct ReadOptions {
  bool strict = true;  // throw on the first malformed line instead of collecting it
};

// Reads a whole file. Throws Error(kIo) when it cannot be opened, Error(kFormat) for an empty file,
// a bad header, a newer major version, or (strict) a malformed event line.
// A directory is read as the rank-K.jsonl files of a run whose ranks are processes, merged into one
// trace on rank 0's clock (read_rank_directory, trace_format/rank_traces.hpp, which says how and
// which directories it refuses).
TraceData read_trace(const std::filesystem::path& path, ReadOptions options = {});
// read_trace of one file; a directory is refused (kIo).
TraceData read_trace_file(const std::filesystem::path& path, ReadOptions options = {});
// Same, from memory (`name` is used in messages).
TraceData parse_trace(std::string_view text, std::string_view name = "<memory>", ReadOptions options = {});

namespace detail {
class FileFollower;       // runtime/src/trace_format/file_follower.hpp
class DirectoryFollower;  // runtime/src/trace_format/directory_follower.hpp
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
