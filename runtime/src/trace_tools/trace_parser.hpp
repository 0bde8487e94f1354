// The line parser behind read_trace, parse_trace and TraceFollower (internal to libdpscope).
//
// It turns complete '\n'-terminated lines of a dpscope trace (docs/trace-format.md) into Events
// appended to a TraceData, with simdjson's DOM parser (one reused parser; each line is parsed on
// its own so one malformed line cannot hide the lines after it). It keeps state between calls
// (the interned-string cache, the header's device ids) so a follower can feed it appended bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <simdjson.h>

#include "dpscope/trace_tools/reader.hpp"
#include "recent_strings.hpp"

namespace dpscope::trace::detail {

class Fields;  // an event line's fields by key (trace_parser.cpp)

// Hash for string keys that also accepts string_view, so lookups do not allocate.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class TraceParser {
 public:
  explicit TraceParser(ReadOptions options) : options_(options) {}

  // Parses the complete lines at the start of `text` into `data`; the first of them is line
  // `next_line`, which is advanced past them. Reads the header first when `has_header` is false
  // and sets it. Returns the bytes consumed: everything up to and including the last '\n'.
  // Throws Error(kFormat) for a bad header, and in strict mode for the first malformed event.
  size_t parse(TraceData& data, std::string_view text, uint32_t& next_line, bool& has_header);

  // Bytes of `text` the last parse() got through, including a line it threw for (so a follower
  // can resume after that line).
  size_t consumed() const { return consumed_; }

  // Forgets everything learned from a previous file (strings, devices).
  void reset();

  // Takes the header's devices and rank from `first`, a parser of the same file that read its
  // header, to parse later lines of it into another TraceData (split_parser.hpp).
  void continue_file_of(const TraceParser& first);

  // Appends `e` to data.events, widening data's time range (min_ts_ns, max_end_ns) to cover it;
  // also used by the rank merge (rank_traces.cpp).
  static void append(TraceData& data, const Event& e);

 private:
  void parse_header(TraceData& data, std::string_view line, uint32_t line_no);
  // `padded`: at least SIMDJSON_PADDING readable bytes follow the line.
  void parse_event(TraceData& data, std::string_view line, uint32_t line_no, bool padded);
  // The parts of parse_event: the fields every event has, then each type's own.
  void read_common(const Fields& f, Event& e);
  int32_t read_device(const Fields& f, int key);
  void read_name(TraceData& data, const Fields& f, Event& e);  // also resolves Event::known
  void read_stream(const Fields& f, Event& e);
  void read_args(TraceData& data, const Fields& f, Event& e);
  void read_span(TraceData& data, const Fields& f, Event& e);
  void read_counter(TraceData& data, const Fields& f, Event& e);
  void read_transfer(TraceData& data, const Fields& f, Event& e);
  void read_values(TraceData& data, const Fields& f, Event& e);
  void read_samples(TraceData& data, const Fields& f, Event& e);
  void read_buckets(TraceData& data, const Fields& f, Event& e);
  uint32_t intern(TraceData& data, std::string_view s);
  bool known_device(int64_t id) const {
    return id >= 0 && id < static_cast<int64_t>(device_known_.size()) && device_known_[id] != 0;
  }

  ReadOptions options_;
  simdjson::dom::parser json_;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> strings_;
  RecentStrings recent_;               // in front of strings_
  std::vector<uint8_t> device_known_;  // indexed by header device id
  int32_t own_rank_ = -1;              // the header's run.process.rank (a process rank's file), else -1
  // Typed names of the interned strings, indexed by string index (resolved once per string).
  std::vector<EventName> known_names_;
  std::vector<SpanCategory> known_categories_;
  size_t consumed_ = 0;
  // One line's args or counter values, reused (then appended to TraceData's pools).
  std::vector<ArgValue> arg_values_;
  std::vector<ArgText> arg_texts_;
};

}  // namespace dpscope::trace::detail
