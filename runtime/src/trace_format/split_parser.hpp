// Parsing the lines of one trace file on two threads (internal to libdpscope).
//
// Each large run of complete lines is cut at a line end near its middle: this thread parses the
// first half into the trace while a second thread parses the other half into a side trace, whose
// events are then appended (event_copy.hpp), so the trace is exactly what one parser would have
// read, in file order, with the same line numbers, problems and first error. With the file read
// on a third thread (text_pieces.hpp) a 10M-event trace loads in about half the time on two
// cores (docs/benchmarks.md, "10M events").
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dpscope/trace_format/reader.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace::detail {

class SplitParser {
 public:
  SplitParser(TraceData& data, ReadOptions options);

  // As TraceParser::parse into the trace: the complete lines at the start of `text`, from line
  // next_line(). Returns the bytes consumed (through the last '\n'). Throws as TraceParser does,
  // for the first malformed line of `text` in strict mode.
  size_t parse(std::string_view text);
  uint32_t next_line() const { return next_line_; }
  bool has_header() const { return has_header_; }

 private:
  // Appends the side trace's events, payloads and problems to the trace, then empties it.
  void append_side();

  TraceData& data_;
  TraceParser first_;
  TraceParser second_;
  TraceData side_;
  std::vector<uint32_t> side_strings_;  // side_'s string index -> data_'s (event_copy.hpp)
  std::vector<uint32_t> side_shapes_;
  uint32_t next_line_ = 1;
  bool has_header_ = false;
};

}  // namespace dpscope::trace::detail
