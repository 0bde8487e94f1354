// SplitParser (split_parser.hpp).
#include "split_parser.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

#include "event_copy.hpp"

namespace dpscope::trace::detail {

namespace {

// Runs of complete lines shorter than this are parsed on one thread (a thread is not worth it).
constexpr size_t kSplitBytes = size_t{64} << 10;

// The '\n's of `text`, found with memchr (lines are hundreds of bytes: it skips them wide).
uint32_t count_lines(std::string_view text) {
  uint32_t lines = 0;
  const char* at = text.data();
  const char* const end = at + text.size();
  while (const void* newline = std::memchr(at, '\n', static_cast<size_t>(end - at))) {
    ++lines;
    at = static_cast<const char*>(newline) + 1;
  }
  return lines;
}

}  // namespace

SplitParser::SplitParser(TraceData& data, ReadOptions options)
    : data_(data), first_(options), second_(options) {}

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

  const size_t cut = lines.find('\n', lines.size() / 2) + 1;  // the first half ends a line
  const std::string_view first_half = lines.substr(0, cut);
  const std::string_view second_half = lines.substr(cut);
  uint32_t second_line = next_line_ + count_lines(first_half);
  if (side_.path.empty()) {
    side_.path = data_.path;  // for messages
    side_.version = data_.version;
    second_.continue_file_of(first_);
  }
  std::exception_ptr second_error;
  std::thread second([&] {
    try {
      bool header = true;
      second_.parse(side_, second_half, second_line, header);
    } catch (...) {
      second_error = std::current_exception();
    }
  });
  try {
    first_.parse(data_, first_half, next_line_, has_header_);
  } catch (...) {
    second.join();  // the first half's error comes first in the file; reading stops there
    throw;
  }
  second.join();
  if (second_error) std::rethrow_exception(second_error);
  append_side();
  next_line_ = second_line;
  return header_bytes + lines.size();
}

void SplitParser::append_side() {
  CopyMaps maps{side_strings_, side_shapes_};
  for (const Event& e : side_.events)
    TraceParser::append(data_, copy_event(data_, side_, e, maps, /*keep_remote_ends=*/true));
  for (Problem& p : side_.problems) data_.problems.push_back(std::move(p));
  drop_events(side_);  // for the next run of lines
}

}  // namespace dpscope::trace::detail
