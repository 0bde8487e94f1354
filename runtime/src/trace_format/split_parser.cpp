// SplitParser (split_parser.hpp).
#include "split_parser.hpp"

#include <atomic>
#include <cstring>
#include <exception>
#include <thread>

#include "dpscope/base/error.hpp"
#include "event_copy.hpp"

namespace dpscope::trace::detail {

namespace {

// Runs of complete lines shorter than this are parsed on one thread (a thread is not worth it).
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
  std::vector<uint64_t> runs;  // the chunk's runs of values, as copied (emptied with its events)
  uint32_t lines = 0;          // the chunk's lines, blank and malformed ones included
};

SplitParser::SplitParser(TraceData& data, ReadOptions options)
    : data_(data), options_(options), first_(options) {}

SplitParser::~SplitParser() = default;

size_t SplitParser::parse(std::string_view text) {
  const size_t last_newline = text.rfind('\n');
  if (last_newline == std::string_view::npos) return 0;
  std::string_view lines = text.substr(0, last_newline + 1);
  size_t header_bytes = 0;
  while (!has_header_ && !lines.empty()) {  // the header line (after blank ones) first, alone
    const size_t line_end = lines.find('\n') + 1;
    first_.parse(data_, lines.substr(0, line_end), next_line_, has_header_);
    header_bytes += line_end;
    lines.remove_prefix(line_end);
  }
  if (lines.size() < kSplitBytes) return header_bytes + first_.parse(data_, lines, next_line_, has_header_);

  const size_t chunk_bytes = options_.chunk_bytes > 0 ? options_.chunk_bytes : kChunkBytes;
  std::vector<std::string_view> chunks;
  for (std::string_view rest = lines; !rest.empty();) {
    const size_t end =
        rest.size() <= chunk_bytes + chunk_bytes / 2 ? rest.size() : rest.find('\n', chunk_bytes) + 1;
    chunks.push_back(rest.substr(0, end));
    rest.remove_prefix(end);
  }
  parse_chunks(chunks);
  return header_bytes + lines.size();
}

void SplitParser::parse_chunks(const std::vector<std::string_view>& chunks) {
  while (sides_.size() < chunks.size()) {
    ReadOptions lenient = options_;  // problems are kept, in order (append_side throws in strict mode)
    lenient.strict = false;
    auto side = std::make_unique<Side>(lenient);
    side->trace.path = data_.path;  // for messages
    side->trace.version = data_.version;
    side->parser.continue_file_of(first_);
    sides_.push_back(std::move(side));
  }
  // Chunk 0 goes straight into the trace; chunks 1... to whichever thread takes them first.
  std::atomic<size_t> next_chunk{1};
  std::atomic<bool> stop{false};  // the first chunk failed (strict): the rest is not wanted
  auto take_chunks = [&] {
    for (size_t i = next_chunk++; i < chunks.size() && !stop; i = next_chunk++) {
      Side& side = *sides_[i];
      uint32_t line = 0;
      bool header = true;
      side.parser.parse(side.trace, chunks[i], line, header);  // lenient: does not throw
      side.lines = line;
    }
  };
  std::exception_ptr helper_error;  // only out of memory: lenient parsing reports lines, never throws
  std::thread helper([&] {
    try {
      take_chunks();
    } catch (...) {
      helper_error = std::current_exception();
      stop = true;
    }
  });
  try {
    first_.parse(data_, chunks[0], next_line_, has_header_);
    take_chunks();
  } catch (...) {
    stop = true;  // the first chunk's error comes first in the file; reading stops there
    helper.join();
    for (size_t i = 1; i < chunks.size(); ++i) drop_events(sides_[i]->trace);
    throw;
  }
  helper.join();
  if (helper_error) std::rethrow_exception(helper_error);
  for (size_t i = 1; i < chunks.size(); ++i) {
    try {
      append_side(*sides_[i]);
    } catch (...) {
      for (size_t j = i; j < chunks.size(); ++j) drop_events(sides_[j]->trace);
      throw;
    }
  }
}

void SplitParser::append_side(Side& side) {
  const uint32_t base = next_line_;  // the chunk's first line
  if (options_.strict && !side.trace.problems.empty()) {
    const Problem& p = side.trace.problems.front();
    throw Error(ErrorKind::kFormat, fmt::format("{}:{}: {}", data_.path, base + p.line, p.reason));
  }
  CopyMaps maps{side.strings, side.shapes, &side.runs};
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
  drop_events(side.trace);  // for the next run of lines
  side.runs.clear();
}

}  // namespace dpscope::trace::detail
