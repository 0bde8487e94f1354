// Parsing the lines of one trace file on two threads (internal to libdpscope).
//
// Each large run of complete lines is cut at line ends into chunks of about a megabyte. This
// thread parses the first chunk into the trace; then both threads take the next chunk not yet
// taken, each parsed into a side trace of its own, with line numbers counted from the chunk's
// start. The side traces' events, payloads and problems are then appended in file order
// (event_copy.hpp), their line numbers shifted by the lines before them, so the trace is exactly
// what one parser would have read: the same events, line numbers, problems and first error.
// Taking small chunks, rather than halving the run, keeps both cores busy to the end of the run
// while the file is decoded on a third thread (text_pieces.hpp): a 10M-event trace loads in about
// half the time on two cores (docs/benchmarks.md, "10M events").
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "dpscope/trace_format/reader.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace::detail {

class SplitParser {
 public:
  SplitParser(TraceData& data, ReadOptions options);
  ~SplitParser();

  // As TraceParser::parse into the trace: the complete lines at the start of `text`, from line
  // next_line(). Returns the bytes consumed (through the last '\n'). Throws as TraceParser does,
  // for the first malformed line of `text` in strict mode.
  size_t parse(std::string_view text);
  uint32_t next_line() const { return next_line_; }
  bool has_header() const { return has_header_; }

 private:
  struct Side;  // a chunk's parser and trace (split_parser.cpp)

  // Parses `chunks` (each ending a line; the first into the trace, the others into sides).
  void parse_chunks(const std::vector<std::string_view>& chunks);
  // Appends side `i`'s events, payloads and problems to the trace, lines shifted to follow the
  // trace's, then empties it. In strict mode, throws for its first problem instead.
  void append_side(Side& side);

  TraceData& data_;
  ReadOptions options_;
  TraceParser first_;
  std::vector<std::unique_ptr<Side>> sides_;  // grown to the most chunks a run was cut into
  uint32_t next_line_ = 1;
  bool has_header_ = false;
};

}  // namespace dpscope::trace::detail
