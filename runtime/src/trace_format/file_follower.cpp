// FileFollower (file_follower.hpp): one growing trace file, read a poll at a time.
#include "file_follower.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dpscope/base/error.hpp"
#include "posix_file.hpp"

namespace dpscope::trace::detail {

namespace {
constexpr uint64_t kHeadFingerprintBytes = 256;  // compared each poll to notice a rewritten file
constexpr uint64_t kTailFingerprintBytes = 64;
}  // namespace

FileFollower::FileFollower(std::filesystem::path path, ReadOptions options)
    : path_(std::move(path)), options_(options), parser_(std::make_unique<TraceParser>(options)) {
  data_.path = path_.string();
}

void FileFollower::restart() {
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

size_t FileFollower::poll() {
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
  data_.partial_last_line = !is_blank_text(std::string_view(text).substr(consumed));
  if (has_header_ && offset_ > 0) {
    if (header_line_.empty()) {
      header_line_ = read_at(file.fd, 0, std::min(offset_, kHeadFingerprintBytes), path_.string());
    }
    const uint64_t tail = std::min<uint64_t>(consumed, kTailFingerprintBytes);
    if (tail > 0) consumed_tail_ = text.substr(consumed - tail, tail);
  }
  return data_.events.size() - events_before;
}

}  // namespace dpscope::trace::detail
