// Reading dpscope traces: read_trace, parse_trace, TraceFollower and the TraceData lookups.
// The line-by-line parsing lives in trace_parser.cpp; this file deals with files and followers.
#include "dpscope/trace_format/reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "dpscope/base/error.hpp"
#include "trace_parser.hpp"

namespace dpscope::trace {

// ---- TraceData lookups ----

std::string_view TraceData::str(uint32_t index) const {
  return index < strings.size() ? std::string_view(strings[index]) : std::string_view();
}

uint32_t TraceData::find_string(std::string_view s) const {
  const auto it = string_index.find(std::string(s));
  return it == string_index.end() ? kNoString : it->second;
}

uint32_t TraceData::intern(std::string_view s) {
  auto [it, inserted] = string_index.try_emplace(std::string(s), static_cast<uint32_t>(strings.size()));
  if (inserted) strings.emplace_back(s);
  return it->second;
}

std::optional<double> TraceData::arg(const Event& e, std::string_view key) const {
  if ((e.type != EventType::kSpan && e.type != EventType::kInstant) || e.payload < 0 ||
      static_cast<size_t>(e.payload) >= args.size()) {
    return std::nullopt;
  }
  const uint32_t k = find_string(key);
  if (k == kNoString) return std::nullopt;
  for (const auto& [key_index, value] : args[e.payload].values)
    if (key_index == k) return value;
  return std::nullopt;
}

std::optional<std::string_view> TraceData::text_arg(const Event& e, std::string_view key) const {
  if ((e.type != EventType::kSpan && e.type != EventType::kInstant) || e.payload < 0 ||
      static_cast<size_t>(e.payload) >= args.size()) {
    return std::nullopt;
  }
  const uint32_t k = find_string(key);
  if (k == kNoString) return std::nullopt;
  for (const auto& [key_index, text] : args[e.payload].texts)
    if (key_index == k) return str(text);
  return std::nullopt;
}

std::optional<RunError> TraceData::run_error(const Event& e) const {
  if (e.type != EventType::kInstant || e.known != EventName::kError) return std::nullopt;
  return RunError{.message = text_arg(e, trace_key::kMessage).value_or("")};
}

std::optional<GradReady> TraceData::grad_ready(const Event& e) const {
  if (e.type != EventType::kInstant || e.known != EventName::kGradReady) return std::nullopt;
  const std::optional<double> param = arg(e, trace_key::kParam);
  if (!param) return std::nullopt;
  return GradReady{.param = static_cast<int>(*param)};
}

std::optional<BucketArgs> TraceData::bucket_args(const Event& e) const {
  if (e.type != EventType::kInstant ||
      (e.known != EventName::kBucketLaunched && e.known != EventName::kBucketDone))
    return std::nullopt;
  const std::optional<double> bucket = arg(e, trace_key::kBucket);
  if (!bucket) return std::nullopt;
  return BucketArgs{.bucket = static_cast<int>(*bucket),
                    .bytes = static_cast<uint64_t>(arg(e, trace_key::kBytes).value_or(0.0)),
                    .params = static_cast<uint64_t>(arg(e, trace_key::kParams).value_or(0.0))};
}

std::optional<KernelArgs> TraceData::kernel_args(const Event& e) const {
  if (e.type != EventType::kSpan) return std::nullopt;
  const std::optional<double> flops = arg(e, trace_key::kFlops);
  const std::optional<double> bytes = arg(e, trace_key::kBytes);
  if (!flops || !bytes) return std::nullopt;
  return KernelArgs{.flops = *flops, .bytes = *bytes};
}

const TraceDeviceInfo* TraceData::device(int32_t id) const {
  for (const TraceDeviceInfo& d : header.devices)
    if (d.id == id) return &d;
  return nullptr;
}

namespace {

bool is_blank(std::string_view text) {
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  return true;
}

// Closes a file descriptor when it goes out of scope.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads `size` bytes at `offset` (fewer if the file is shorter); throws kIo on a read error.
std::string read_at(int fd, uint64_t offset, uint64_t size, const std::string& path) {
  std::string bytes(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    DPS_CHECK(n >= 0, ErrorKind::kIo, "cannot read trace '{}': {}", path, std::strerror(errno));
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace

// ---- whole files ----

TraceData parse_trace(std::string_view text, std::string_view name, ReadOptions options) {
  TraceData data;
  data.path = std::string(name);
  data.events.reserve(text.size() / 160);
  detail::TraceParser parser(options);
  uint32_t next_line = 1;
  bool has_header = false;
  const size_t consumed = parser.parse(data, text, next_line, has_header);
  const std::string_view rest = text.substr(consumed);
  data.partial_last_line = !is_blank(rest);
  if (!has_header) {
    DPS_CHECK(data.partial_last_line, ErrorKind::kFormat, "{}: empty file, expected a dpscope trace header",
              data.path);
    throw Error(
        ErrorKind::kFormat,
        fmt::format("{}:{}: incomplete header line (the file ends before its '\\n')", data.path, next_line));
  }
  return data;
}

TraceData read_trace(const std::filesystem::path& path, ReadOptions options) {
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  DPS_CHECK(file.fd >= 0, ErrorKind::kIo, "cannot open trace '{}': {}", path.string(), std::strerror(errno));
  struct stat st {};
  DPS_CHECK(::fstat(file.fd, &st) == 0, ErrorKind::kIo, "cannot read trace '{}': {}", path.string(),
            std::strerror(errno));
  DPS_CHECK(!S_ISDIR(st.st_mode), ErrorKind::kIo, "cannot read trace '{}': it is a directory", path.string());
  // Read into an uninitialised buffer (a large trace is hundreds of MB; zero-filling it first costs
  // time for nothing). Not mmap: a trace truncated by a new run while mapped would raise SIGBUS.
  uint64_t capacity = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  std::unique_ptr<char[]> bytes = std::make_unique_for_overwrite<char[]>(capacity);
  uint64_t size = 0;
  for (;;) {
    if (size == capacity) {  // a pipe, or a file that grew: read on until EOF
      capacity = std::max<uint64_t>(2 * capacity, 1 << 16);
      std::unique_ptr<char[]> bigger = std::make_unique_for_overwrite<char[]>(capacity);
      std::memcpy(bigger.get(), bytes.get(), size);
      bytes = std::move(bigger);
    }
    const ssize_t n = ::read(file.fd, bytes.get() + size, capacity - size);
    if (n < 0 && errno == EINTR) continue;
    DPS_CHECK(n >= 0, ErrorKind::kIo, "cannot read trace '{}': {}", path.string(), std::strerror(errno));
    if (n == 0) break;
    size += static_cast<uint64_t>(n);
  }
  return parse_trace(std::string_view(bytes.get(), size), path.string(), options);
}

// ---- following a growing file ----

namespace {
constexpr uint64_t kHeadFingerprintBytes = 256;  // compared each poll to notice a rewritten file
constexpr uint64_t kTailFingerprintBytes = 64;
}  // namespace

TraceFollower::TraceFollower(std::filesystem::path path, ReadOptions options)
    : path_(std::move(path)), options_(options), parser_(std::make_unique<detail::TraceParser>(options)) {
  data_.path = path_.string();
}

TraceFollower::~TraceFollower() = default;
TraceFollower::TraceFollower(TraceFollower&&) noexcept = default;
TraceFollower& TraceFollower::operator=(TraceFollower&&) noexcept = default;

void TraceFollower::restart() {
  data_ = TraceData{};
  data_.path = path_.string();
  offset_ = 0;
  next_line_ = 1;
  has_header_ = false;
  parser_->reset();
  header_line_.clear();
  consumed_tail_.clear();
  ++restarts_;
}

size_t TraceFollower::poll() {
  FileDescriptor file{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    // Not written yet, or removed: keep what we have and look again at the next poll.
    DPS_CHECK(errno == ENOENT, ErrorKind::kIo, "cannot open trace '{}': {}", path_.string(),
              std::strerror(errno));
    return 0;
  }
  struct stat st {};
  DPS_CHECK(::fstat(file.fd, &st) == 0, ErrorKind::kIo, "cannot read trace '{}': {}", path_.string(),
            std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t dev = static_cast<uint64_t>(st.st_dev);
  const uint64_t ino = static_cast<uint64_t>(st.st_ino);

  // A different file at the path, a shorter one, or one whose consumed bytes changed: a new run.
  bool rewritten = (file_dev_ != 0 || file_ino_ != 0) && (dev != file_dev_ || ino != file_ino_);
  rewritten = rewritten || size < offset_;
  if (!rewritten && !header_line_.empty()) {
    rewritten = read_at(file.fd, 0, header_line_.size(), path_.string()) != header_line_ ||
                read_at(file.fd, offset_ - consumed_tail_.size(), consumed_tail_.size(), path_.string()) !=
                    consumed_tail_;
  }
  if (rewritten) restart();
  file_dev_ = dev;
  file_ino_ = ino;
  if (size == offset_) return 0;

  const std::string text = read_at(file.fd, offset_, size - offset_, path_.string());
  const size_t events_before = data_.events.size();
  const uint32_t line_before = next_line_;
  size_t consumed = 0;
  try {
    consumed = parser_->parse(data_, text, next_line_, has_header_);
  } catch (...) {
    if (has_header_) {
      offset_ += parser_->consumed();  // strict mode: resume after the bad event line
    } else {
      next_line_ = line_before;  // a bad header: report it again at every poll
    }
    throw;
  }
  offset_ += consumed;
  data_.partial_last_line = !is_blank(std::string_view(text).substr(consumed));
  if (has_header_ && offset_ > 0) {
    if (header_line_.empty()) {
      header_line_ = read_at(file.fd, 0, std::min(offset_, kHeadFingerprintBytes), path_.string());
    }
    const uint64_t tail = std::min<uint64_t>(consumed, kTailFingerprintBytes);
    if (tail > 0) consumed_tail_ = text.substr(consumed - tail, tail);
  }
  return data_.events.size() - events_before;
}

}  // namespace dpscope::trace
