// Reading dpscope traces (docs/trace-format.md) into a compact, indexed in-memory form.
//
// Used by `dpscope trace export|stats`, by lessons (triggers and answers are predicates on events)
// and by the visualizer's replay model. Event names, categories and tags are interned into one
// string table; variable-size parts (counter values, value samples, sample indices, buckets, args)
// live in side tables indexed by Event::payload. A 1M-event trace loads in about a second.
//
// Errors: a malformed line is reported as "TRACE:LINE: reason"; in strict mode the first one
// throws Error(kFormat), otherwise it is collected in TraceData::problems and skipped. A partial
// last line (no trailing '\n') is never an error: it is left for the next poll (live files).
// A header whose major version is newer than kTraceFormatMajor is refused in both modes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dpscope/core/device.hpp"
#include "dpscope/trace/recorder.hpp"

namespace dpscope::trace {

enum class EventType : uint8_t { kSpan, kInstant, kCounter, kTransfer, kValues, kSamples, kBuckets };
const char* to_string(EventType type);

inline constexpr uint32_t kNoString = UINT32_MAX;
inline constexpr int32_t kNoPayload = -1;

// One event, fixed size. Fields a type does not use keep their defaults.
struct Event {
  EventType type = EventType::kInstant;
  StreamKind stream = StreamKind::kCompute;  // spans and transfers
  Phase phase = Phase::kNone;
  int32_t rank = 0;
  int32_t dev = -1;
  int64_t step = -1;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;            // 0 for instants, counters, values, samples, buckets
  uint32_t name = kNoString;     // string table index
  uint32_t cat = kNoString;      // spans: category
  // transfers
  int32_t src = -1;
  int32_t dst = -1;
  uint64_t bytes = 0;
  uint64_t flow = 0;
  int64_t coll = -1;             // collective sequence number, -1 for copies
  uint32_t algo = kNoString;
  int32_t algo_step = -1;
  int32_t chunk = -1;
  // counters, values, samples, buckets: index into the matching TraceData table;
  // spans and instants: index into TraceData::args (or kNoPayload when they had none)
  int32_t payload = kNoPayload;
  uint32_t line = 0;             // 1-based line in the file

  int64_t end_ns() const { return ts_ns + dur_ns; }
};

// Numeric args of a span or instant ("param": 5, "flops": 1e9); non-numeric args are dropped.
struct Args {
  std::vector<std::pair<uint32_t, double>> values;  // (key string index, value)
};
struct CounterValues {
  std::vector<std::pair<uint32_t, double>> values;  // (key string index, value), file order
};
struct ValueSample {
  int32_t param = -1;
  uint32_t when = kNoString;  // "before_reduce", ...
  std::vector<float> values;
  double norm = 0.0;
};
struct SampleIndices {
  std::vector<int64_t> indices;
};
struct BucketAssignment {
  uint32_t reason = kNoString;  // "initial", "rebuilt"
  std::vector<TraceBucketInfo> buckets;
};

struct Problem {
  uint32_t line = 0;
  std::string reason;
};

struct TraceData {
  std::string path;      // for messages
  std::string version;   // "1.0"
  TraceHeader header;    // header.run_json holds the raw "run" object
  std::vector<Event> events;  // in file order
  std::vector<std::string> strings;
  std::vector<Args> args;
  std::vector<CounterValues> counters;
  std::vector<ValueSample> values;
  std::vector<SampleIndices> samples;
  std::vector<BucketAssignment> buckets;
  std::vector<Problem> problems;  // non-strict mode: malformed lines that were skipped
  int64_t min_ts_ns = 0;          // over all events (0 when none)
  int64_t max_end_ns = 0;

  std::string_view str(uint32_t index) const;      // "" for kNoString
  uint32_t find_string(std::string_view s) const;  // kNoString when absent
  // A numeric arg of a span/instant, if present.
  std::optional<double> arg(const Event& e, std::string_view key) const;
  // The header device with this id, or nullptr.
  const TraceDeviceInfo* device(int32_t id) const;

  // internal: string interning during parsing
  uint32_t intern(std::string_view s);
  std::unordered_map<std::string, uint32_t> string_index;
};

struct ReadOptions {
  bool strict = true;  // throw on the first malformed line instead of collecting it
};

// Reads a whole file. Throws Error(kIo) when it cannot be opened, Error(kFormat) for an empty file,
// a bad header, a newer major version, or (strict) a malformed event line.
TraceData read_trace(const std::filesystem::path& path, ReadOptions options = {});
// Same, from memory (`name` is used in messages).
TraceData parse_trace(std::string_view text, std::string_view name = "<memory>", ReadOptions options = {});

// Follows a file that is still being written (dpscope-viz --follow): each poll() parses the
// complete lines appended since the last one and appends their events to data().
class TraceFollower {
 public:
  explicit TraceFollower(std::filesystem::path path, ReadOptions options = {.strict = false});
  // Returns the number of new events; 0 when nothing complete was added. Reads the header on the
  // first poll that finds a complete first line. Throws like read_trace for a bad header.
  size_t poll();
  bool has_header() const { return has_header_; }
  const TraceData& data() const { return data_; }
  TraceData& data() { return data_; }

 private:
  std::filesystem::path path_;
  ReadOptions options_;
  TraceData data_;
  uint64_t offset_ = 0;   // bytes consumed (complete lines only)
  uint32_t next_line_ = 1;
  bool has_header_ = false;
};

}  // namespace dpscope::trace
