// Parsing the lines of one trace file on two threads (internal to libdpscope).
//
// Each run of complete lines handed to parse() is cut at line ends into chunks of about a megabyte,
// and both threads take the next chunk not yet taken, each parsed into a side trace of its own
// with line numbers counted from the chunk's start. The side traces' events, payloads and problems
// are appended to the trace in file order (event_copy.hpp), their line numbers shifted by the lines
// before them, so the trace is exactly what one parser would have read: the same events, line
// numbers, problems and first error.
//
// The append is the one serial part, so it is done one call late: while this thread appends the
// chunks of the previous run, the other is already parsing the chunks of this one. parse() returns
// once every chunk of its text is parsed (the caller may then reuse the text), and finish() appends
// what is left. With the file decoded on a third thread (text_pieces.hpp), both cores stay busy: a
// 10M-event trace reads in well under half the time one thread takes (docs/benchmarks.md,
// "10M events").
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "dpscope/trace_tools/reader.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace::detail {

class SplitParser {
 public:
  SplitParser(TraceData& data, ReadOptions options);
  ~SplitParser();

  // Parses the complete lines at the start of `text`, from line next_line(), and appends those of
  // the previous call to the trace. Returns the bytes consumed (through the last '\n'). Throws as
  // TraceParser does for a bad header, and in strict mode for the first malformed line (of this
  // text or the previous call's).
  size_t parse(std::string_view text);
  // Appends the lines parsed by the last parse(): then the trace, next_line() and the problems are
  // complete. Throws in strict mode for the first malformed line among them.
  void finish();
  uint32_t next_line() const { return next_line_; }
  bool has_header() const { return has_header_; }

 private:
  struct Side;  // a chunk's parser and trace (split_parser.cpp)

  // A side to parse a chunk into: an emptied one, or a new one.
  std::unique_ptr<Side> take_side();
  // Appends the pending sides to the trace in order, returning each to the free ones.
  void append_pending();
  // Appends `side`'s events, payloads and problems to the trace, lines shifted to follow the
  // trace's. In strict mode, throws for its first problem instead.
  void append_side(Side& side);
  // Empties `side` of its chunk and returns it to the free ones.
  void recycle(std::unique_ptr<Side> side);

  TraceData& data_;
  ReadOptions options_;
  TraceParser header_parser_;                   // the header, and the device ids the sides check
  std::vector<std::unique_ptr<Side>> pending_;  // parsed, in file order, not yet appended
  std::vector<std::unique_ptr<Side>> free_;
  uint32_t next_line_ = 1;
  bool has_header_ = false;
};

}  // namespace dpscope::trace::detail
