// SplitParser (split_parser.hpp).
#include "split_parser.hpp"

#include <atomic>
#include <exception>
#include <thread>

#include "dpscope/base/error.hpp"
#include "event_copy.hpp"

namespace dpscope::trace::detail {

namespace {

// Runs of complete lines shorter than this are parsed on this thread alone (a second thread is not
// worth starting for them: a line cut between two pieces of the file, a short file).
constexpr size_t kSplitBytes = size_t{64} << 10;
// About the bytes of a chunk (ReadOptions::chunk_bytes): small enough that the thread still parsing
// when the other runs out of chunks finishes soon, large enough that a side's tables stay warm.
constexpr size_t kChunkBytes = size_t{1} << 20;

}  // namespace

// A chunk's own parser and trace: the parser's interned strings and arg shapes name the side's
// tables, so each side keeps its parser, and the maps that copy its strings into the trace.
struct SplitParser::Side {
  explicit Side(ReadOptions options) : parser(options) {}
  TraceParser parser;
  TraceData trace;
  std::vector<uint32_t> strings;  // trace's string index -> the main trace's (event_copy.hpp)
  std::vector<uint32_t> shapes;
  std::vector<uint64_t> runs;   // the chunk's runs of values, as copied (emptied with its events)
  std::string_view text;        // the chunk, while it waits to be parsed
  uint32_t lines = 0;           // the chunk's lines, blank and malformed ones included
  uint32_t strings_copied = 0;  // trace.strings[0, strings_copied) are in the main trace
  uint32_t shapes_copied = 0;
};

SplitParser::SplitParser(TraceData& data, ReadOptions options)
    : data_(data), options_(options), header_parser_(options) {}

SplitParser::~SplitParser() = default;

std::unique_ptr<SplitParser::Side> SplitParser::take_side() {
  if (!free_.empty()) {
    std::unique_ptr<Side> side = std::move(free_.back());
    free_.pop_back();
    return side;
  }
  ReadOptions lenient = options_;  // problems are kept in order; append_side throws in strict mode
  lenient.strict = false;
  auto side = std::make_unique<Side>(lenient);
  side->trace.path = data_.path;  // for messages
  side->trace.version = data_.version;
  side->parser.continue_file_of(header_parser_);
  return side;
}

size_t SplitParser::parse(std::string_view text) {
  const size_t last_newline = text.rfind('\n');
  if (last_newline == std::string_view::npos) return 0;
  std::string_view lines = text.substr(0, last_newline + 1);
  size_t header_bytes = 0;
  while (!has_header_ && !lines.empty()) {  // the header line (after blank ones) first, alone
    const size_t line_end = lines.find('\n') + 1;
    header_parser_.parse(data_, lines.substr(0, line_end), next_line_, has_header_);
    header_bytes += line_end;
    lines.remove_prefix(line_end);
  }
  if (lines.empty()) return header_bytes;

  std::vector<std::unique_ptr<Side>> chunks;
  const size_t chunk_bytes = options_.chunk_bytes > 0 ? options_.chunk_bytes : kChunkBytes;
  for (std::string_view rest = lines; !rest.empty();) {
    const size_t end =
        rest.size() <= chunk_bytes + chunk_bytes / 2 ? rest.size() : rest.find('\n', chunk_bytes) + 1;
    chunks.push_back(take_side());
    chunks.back()->text = rest.substr(0, end);
    rest.remove_prefix(end);
  }
  std::atomic<size_t> next_chunk{0};
  std::atomic<bool> stop{false};  // an earlier line failed (strict): the rest is not wanted
  auto take_chunks = [&] {
    for (size_t i = next_chunk++; i < chunks.size() && !stop; i = next_chunk++) {
      Side& side = *chunks[i];
      uint32_t line = 0;
      bool header = true;
      side.parser.parse(side.trace, side.text, line, header);  // lenient: reports lines, never throws
      side.lines = line;
    }
  };
  // What escapes a lenient parse is no line's error (out of memory, a value pool past 2^32 entries);
  // the helper hands it over.
  std::exception_ptr helper_error;
  std::thread helper;
  if (lines.size() >= kSplitBytes) {
    helper = std::thread([&] {
      try {
        take_chunks();
      } catch (...) {
        helper_error = std::current_exception();
        stop = true;
      }
    });
  }
  auto join = [&] {
    if (helper.joinable()) helper.join();
  };
  try {
    append_pending();  // the previous call's chunks, while the helper parses this call's
    take_chunks();
  } catch (...) {
    stop = true;  // what comes later in the file is not wanted
    join();
    for (auto& side : chunks) recycle(std::move(side));
    throw;
  }
  join();
  if (helper_error) std::rethrow_exception(helper_error);
  for (auto& side : chunks) pending_.push_back(std::move(side));
  return header_bytes + lines.size();
}

void SplitParser::finish() { append_pending(); }

void SplitParser::append_pending() {
  try {
    for (auto& side : pending_) {
      append_side(*side);
      recycle(std::move(side));
    }
  } catch (...) {
    for (auto& side : pending_)  // reading stops: the rest is not wanted
      if (side != nullptr) recycle(std::move(side));
    pending_.clear();
    throw;
  }
  pending_.clear();
}

void SplitParser::recycle(std::unique_ptr<Side> side) {
  drop_events(side->trace);  // its strings and shapes stay, as its parser and maps know them
  side->runs.clear();
  free_.push_back(std::move(side));
}

void SplitParser::append_side(Side& side) {
  const uint32_t base = next_line_;  // the chunk's first line
  if (options_.strict && !side.trace.problems.empty()) {
    const Problem& p = side.trace.problems.front();
    throw Error(ErrorKind::kFormat, fmt::format("{}:{}: {}", data_.path, base + p.line, p.reason));
  }
  CopyMaps maps{side.strings, side.shapes, &side.runs};
  // The strings and arg shapes this chunk named first go over first, in the order its lines named
  // them (a malformed line's too): the trace's tables come out in the order one parser makes them.
  for (; side.strings_copied < side.trace.strings.size(); ++side.strings_copied)
    copy_string(data_, side.trace, side.strings_copied, maps);
  for (; side.shapes_copied < side.trace.shapes.size(); ++side.shapes_copied)
    copy_shape(data_, side.trace, side.shapes_copied, maps);
  for (const Event& e : side.trace.events) {
    Event copy = copy_event(data_, side.trace, e, maps, /*keep_remote_ends=*/true);
    copy.line += base;
    TraceParser::append(data_, copy);
  }
  for (Problem& p : side.trace.problems) {
    p.line += base;
    data_.problems.push_back(std::move(p));
  }
  next_line_ = base + side.lines;
}

}  // namespace dpscope::trace::detail
