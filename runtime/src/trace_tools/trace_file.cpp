// One trace file read whole: parse_trace and read_trace_file (reader.hpp), with TraceParser, and
// read_trace_text (compressed.hpp). A file is read (and decoded, when its content is a zstd
// stream) piece by piece into the parser (text_pieces.hpp), so neither the file nor its decoded
// text (about 40 times a compressed file) is ever in memory whole.
#include <algorithm>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_tools/compressed.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "posix_file.hpp"
#include "reserve.hpp"
#include "split_parser.hpp"
#include "text_pieces.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace {

namespace {

// The end of reading a whole trace: whether text after the last complete line is left over
// (`rest`), and one line for a file without a complete header line.
void finish_whole_read(TraceData& data, std::string_view rest, bool has_header, uint32_t next_line) {
  data.partial_last_line = !detail::is_blank_text(rest);
  data.partial_line = data.partial_last_line ? next_line : 0;
  if (has_header) return;
  DPS_CHECK(data.partial_last_line, ErrorKind::kFormat, "{}: empty file, expected a dpscope trace header",
            data.path);
  throw Error(
      ErrorKind::kFormat,
      fmt::format("{}:{}: incomplete header line (the file ends before its '\\n')", data.path, next_line));
}

}  // namespace

TraceData parse_trace(std::string_view text, std::string_view name, ReadOptions options) {
  TraceData data;
  data.path = std::string(name);
  data.events.reserve(text.size() / 160);
  detail::TraceParser parser(options);
  uint32_t next_line = 1;
  bool has_header = false;
  const size_t consumed = parser.parse(data, text, next_line, has_header);
  const std::string_view rest = text.substr(consumed);
  finish_whole_read(data, rest, has_header, next_line);
  return data;
}

TraceText read_trace_text(const std::filesystem::path& path) {
  detail::TextPieces pieces(path);
  TraceText result{.compressed = pieces.compressed()};
  detail::TextBuffer piece;
  while (pieces.next(piece)) result.text.append(piece.view());
  result.cut_off = pieces.cut_off();
  return result;
}

// The pieces come from TextPieces' thread; a line cut between two pieces is completed from the
// next one and parsed on its own, so a piece is parsed where it lies, never copied. Errors read as
// if the whole file had been decoded first: a broken zstd stream, then (strict) a frame cut off,
// take precedence over a malformed line found earlier in the text.
TraceData read_trace_file(const std::filesystem::path& path, ReadOptions options) {
  detail::TextPieces pieces(path, options.piece_bytes);
  TraceData data;
  data.path = path.string();
  detail::reserve_events(data, detail::estimated_events(pieces.file_bytes(), pieces.compressed()));
  detail::SplitParser parser(data, options);
  detail::TextBuffer piece;
  std::string carry;  // the start of a line the previous piece cut
  // A malformed line found before the file's end: a broken zstd stream or a cut-off frame, found
  // by reading on, is what strict reading reports. (finish() runs once the file is read: its
  // error needs no such check.)
  auto parse = [&](std::string_view text) {
    try {
      return parser.parse(text);
    } catch (const Error&) {
      pieces.drain();
      DPS_CHECK(!(pieces.cut_off() && options.strict), ErrorKind::kFormat, "{}", cut_off_message(data.path));
      throw;
    }
  };
  while (pieces.next(piece)) {
    std::string_view text = piece.view();
    if (!carry.empty()) {
      const size_t newline = text.find('\n');
      carry.append(text.substr(0, newline == std::string_view::npos ? text.size() : newline + 1));
      detail::check_line_length(data.path, parser.next_line(), carry.size());
      if (newline == std::string_view::npos) continue;
      parse(carry);
      carry.clear();
      text.remove_prefix(newline + 1);
    }
    carry.assign(text.substr(parse(text)));
  }
  const bool cut_off = pieces.cut_off();
  DPS_CHECK(!(cut_off && options.strict), ErrorKind::kFormat, "{}", cut_off_message(data.path));
  parser.finish();  // the lines of the last parse()
  finish_whole_read(data, carry, parser.has_header(), parser.next_line());
  if (cut_off) {
    // Lenient: the lines decoded so far are kept, and the cut is reported after them.
    data.problems.push_back(
        {.line = data.events.empty() ? 2 : data.events.back().line + 1,
         .reason = "the zstd frame is cut off (the file ends mid-frame): later lines are lost"});
  }
  return data;
}

}  // namespace dpscope::trace
