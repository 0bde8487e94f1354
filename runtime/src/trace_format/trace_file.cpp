// One trace file read whole: parse_trace and read_trace_file (reader.hpp), with TraceParser, and
// read_trace_text (compressed.hpp). A file whose content is a zstd stream is decoded first.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "dpscope/base/error.hpp"
#include "dpscope/trace_format/compressed.hpp"
#include "dpscope/trace_format/reader.hpp"
#include "posix_file.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace {

TraceData parse_trace(std::string_view text, std::string_view name, ReadOptions options) {
  TraceData data;
  data.path = std::string(name);
  data.events.reserve(text.size() / 160);
  detail::TraceParser parser(options);
  uint32_t next_line = 1;
  bool has_header = false;
  const size_t consumed = parser.parse(data, text, next_line, has_header);
  const std::string_view rest = text.substr(consumed);
  data.partial_last_line = !detail::is_blank_text(rest);
  if (!has_header) {
    DPS_CHECK(data.partial_last_line, ErrorKind::kFormat, "{}: empty file, expected a dpscope trace header",
              data.path);
    throw Error(
        ErrorKind::kFormat,
        fmt::format("{}:{}: incomplete header line (the file ends before its '\\n')", data.path, next_line));
  }
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

TraceData read_trace_file(const std::filesystem::path& path, ReadOptions options) {
  const FileBytes file = read_file_bytes(path);
  // By content, not by name: a zstd stream is decoded, anything else read as plain text.
  if (!starts_with_zstd_magic(file.view())) return parse_trace(file.view(), path.string(), options);
  const TraceText decoded = decode_trace_bytes(file.view(), path.string());
  DPS_CHECK(!(decoded.cut_off && options.strict), ErrorKind::kFormat, "{}", cut_off_message(path.string()));
  TraceData data = parse_trace(decoded.text, path.string(), options);
  if (decoded.cut_off) {
    // Lenient: the lines decoded so far are kept, and the cut is reported after them.
    data.problems.push_back(
        {.line = data.events.empty() ? 2 : data.events.back().line + 1,
         .reason = "the zstd frame is cut off (the file ends mid-frame): later lines are lost"});
  }
  return data;
}

}  // namespace dpscope::trace
