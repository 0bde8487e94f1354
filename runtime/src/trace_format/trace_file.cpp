// One trace file read whole: parse_trace and read_trace_file (reader.hpp), with TraceParser, and
// read_trace_text (compressed.hpp). A file whose content is a zstd stream is decoded piece by piece
// into the parser, so its decoded text (about 40 times the file) is never in memory whole.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_format/compressed.hpp"
#include "dpscope/trace_format/reader.hpp"
#include "posix_file.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace {

namespace {

// The end of reading a whole trace: whether text after the last complete line is left over
// (`rest`), and one line for a file without a complete header line.
void finish_whole_read(TraceData& data, std::string_view rest, bool has_header, uint32_t next_line) {
  data.partial_last_line = !detail::is_blank_text(rest);
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

namespace {

// A whole file's bytes.
struct FileBytes {
  std::unique_ptr<char[]> bytes;
  uint64_t size = 0;
  std::string_view view() const { return {bytes.get(), size}; }
};

FileBytes read_file_bytes(const std::filesystem::path& path) {
  detail::FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  DPS_CHECK(file.fd >= 0, ErrorKind::kIo, "cannot open trace '{}': {}", path.string(), std::strerror(errno));
  struct stat st {};
  DPS_CHECK(::fstat(file.fd, &st) == 0, ErrorKind::kIo, "cannot read trace '{}': {}", path.string(),
            std::strerror(errno));
  DPS_CHECK(!S_ISDIR(st.st_mode), ErrorKind::kIo, "cannot read trace '{}': it is a directory", path.string());
  // Read into an uninitialised buffer (a large trace is hundreds of MB; zero-filling it first costs
  // time for nothing). Not mmap: a trace truncated by a new run while mapped would raise SIGBUS.
  uint64_t capacity = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  FileBytes result{std::make_unique_for_overwrite<char[]>(capacity), 0};
  for (;;) {
    if (result.size == capacity) {  // a pipe, or a file that grew: read on until EOF
      capacity = std::max<uint64_t>(2 * capacity, 1 << 16);
      std::unique_ptr<char[]> bigger = std::make_unique_for_overwrite<char[]>(capacity);
      std::memcpy(bigger.get(), result.bytes.get(), result.size);
      result.bytes = std::move(bigger);
    }
    const ssize_t n = ::read(file.fd, result.bytes.get() + result.size, capacity - result.size);
    if (n < 0 && errno == EINTR) continue;
    DPS_CHECK(n >= 0, ErrorKind::kIo, "cannot read trace '{}': {}", path.string(), std::strerror(errno));
    if (n == 0) break;
    result.size += static_cast<uint64_t>(n);
  }
  return result;
}

}  // namespace

TraceText read_trace_text(const std::filesystem::path& path) {
  const FileBytes file = read_file_bytes(path);
  if (starts_with_zstd_magic(file.view())) return decode_trace_bytes(file.view(), path.string());
  return {.text = std::string(file.view())};
}

namespace {

// vector.reserve(count), capped at a quarter of physical memory.
template <typename T>
void reserve_address_space(std::vector<T>& v, size_t count) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGESIZE);
  const size_t cap_bytes = pages > 0 && page_bytes > 0 ? static_cast<size_t>(pages) * page_bytes / 4 : 0;
  v.reserve(std::min(count, cap_bytes / sizeof(T)));
}

// A zstd-compressed trace, decoded a piece at a time straight into the parser: only the lines of
// one piece (tens of MB) are held as text at once. Errors read as if the whole file had been
// decoded first (as read_trace_text does): a broken zstd stream, then (strict) a frame cut off,
// take precedence over a malformed line found earlier in the text.
TraceData parse_compressed_trace(std::string_view bytes, const std::string& name, ReadOptions options) {
  // Compressed bytes per piece: about 10 MB of text at the 40:1 typical of traces.
  constexpr size_t kPieceBytes = size_t{256} << 10;
  TraceData data;
  data.path = name;
  // A streamed frame does not record its decoded size. Traces compress to about 5 bytes an event:
  // reserve for one event per 2 compressed bytes, and room for 2 args or counter values each, so
  // the large vectors are not regrown (a regrowth briefly holds the old copy and the new one).
  // Reserved pages that are never written cost address space, not memory; the reservation is
  // capped by a quarter of physical memory per vector so a huge file cannot fail to allocate.
  const size_t events = bytes.size() / 2 + 1024;
  reserve_address_space(data.events, events);
  reserve_address_space(data.args, events);
  reserve_address_space(data.counters, events / 2);
  reserve_address_space(data.transfers, events / 2);
  reserve_address_space(data.value_pool, 2 * events);
  ZstdDecoder decoder{name};
  detail::TraceParser parser(options);
  uint32_t next_line = 1;
  bool has_header = false;
  std::string text;  // decoded lines not parsed yet (the last one incomplete)
  size_t offset = 0;
  // Decodes the rest of the file into scratch: a zstd error there outranks a parse error.
  auto drain = [&] {
    while (offset < bytes.size()) {
      text.clear();
      const std::string_view piece = bytes.substr(offset, kPieceBytes);
      offset += piece.size();
      decoder.decode(piece, text);
    }
  };
  while (offset < bytes.size()) {
    const std::string_view piece = bytes.substr(offset, kPieceBytes);
    offset += piece.size();
    decoder.decode(piece, text);  // throws for a broken stream
    size_t consumed = 0;
    try {
      consumed = parser.parse(data, text, next_line, has_header);
    } catch (const Error&) {
      drain();
      DPS_CHECK(decoder.at_frame_end() || !options.strict, ErrorKind::kFormat, "{}", cut_off_message(name));
      throw;
    }
    text.erase(0, consumed);
  }
  const bool cut_off = !decoder.at_frame_end();
  DPS_CHECK(!(cut_off && options.strict), ErrorKind::kFormat, "{}", cut_off_message(name));
  finish_whole_read(data, text, has_header, next_line);
  if (cut_off) {
    // Lenient: the lines decoded so far are kept, and the cut is reported after them.
    data.problems.push_back(
        {.line = data.events.empty() ? 2 : data.events.back().line + 1,
         .reason = "the zstd frame is cut off (the file ends mid-frame): later lines are lost"});
  }
  return data;
}

}  // namespace

TraceData read_trace_file(const std::filesystem::path& path, ReadOptions options) {
  const FileBytes file = read_file_bytes(path);
  // By content, not by name: a zstd stream is decoded, anything else read as plain text.
  if (!starts_with_zstd_magic(file.view())) return parse_trace(file.view(), path.string(), options);
  return parse_compressed_trace(file.view(), path.string(), options);
}

}  // namespace dpscope::trace
