// FileFollower (file_follower.hpp): one growing trace file, read a poll at a time.
#include "file_follower.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dpscope/base/error.hpp"
#include "posix_file.hpp"
#include "text_pieces.hpp"

namespace dpscope::trace::detail {

namespace {
constexpr uint64_t kHeadFingerprintBytes = 256;  // compared each poll to notice a rewritten file
constexpr uint64_t kTailFingerprintBytes = 64;
constexpr size_t kDecodeStepBytes = size_t{32} << 20;  // zstd text decoded per step (text_pieces.cpp's piece)
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
  encoding_ = Encoding::kUnknown;
  decoder_.reset();
  decoded_.clear();
  ++restarts_;
}

size_t FileFollower::poll() {
  // Not written yet, or removed: keep what we have and look again at the next poll. Anything but
  // a regular file (a FIFO would block the viewer forever) is refused by the input guard.
  const PathStatus status = path_status(path_);
  if (status.kind == FileKind::kMissing && status.error == ENOENT) return 0;
  FileDescriptor file{open_trace_file(path_.string())};
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
  // zstd: a bad header already decoded is reported again at every poll, as a plain file's is.
  const bool header_decoded = encoding_ == Encoding::kZstd && !has_header_ && !decoded_.empty();
  if (size == offset_ && !header_decoded) return 0;

  const std::string raw = read_at(file.fd, offset_, size - offset_, path_.string());
  if (encoding_ == Encoding::kUnknown) {
    // By content, not by name (compressed.hpp): a zstd stream's first four bytes are its magic number.
    if (could_be_zstd_magic(raw)) return 0;
    encoding_ = starts_with_zstd_magic(raw) ? Encoding::kZstd : Encoding::kPlain;
    if (encoding_ == Encoding::kZstd) decoder_ = std::make_unique<ZstdDecoder>(path_.string());
  }
  const bool zstd = encoding_ == Encoding::kZstd;
  if (zstd) {
    // A frame cut off is more to come: it waits in the decoder. Decoded in bounded steps, each
    // line's length checked as it grows: a zstd bomb (92 KiB that decode to a 3 GB line) took
    // 4.4 GB in `dpscope-viz --follow` before any line was looked at.
    size_t used = 0;
    size_t searched = decoded_.size();
    size_t line_begin = decoded_.rfind('\n') == std::string::npos ? 0 : decoded_.rfind('\n') + 1;
    uint32_t line = next_line_ + static_cast<uint32_t>(std::count(decoded_.begin(), decoded_.end(), '\n'));
    for (bool more = true; more;) {
      more = decoder_->decode_some(raw, &used, decoded_, kDecodeStepBytes);
      for (size_t at = decoded_.find('\n', searched); at != std::string::npos;
           at = decoded_.find('\n', at + 1)) {
        line_begin = at + 1;
        ++line;
      }
      searched = decoded_.size();
      check_line_length(path_.string(), line, decoded_.size() - line_begin);
    }
    offset_ += raw.size();
  } else {
    // A plain file's unread rest is read whole; its last, incomplete line is bounded as well.
    const size_t last_newline = raw.rfind('\n');
    check_line_length(path_.string(),
                      next_line_ + static_cast<uint32_t>(std::count(raw.begin(), raw.end(), '\n')),
                      raw.size() - (last_newline == std::string::npos ? 0 : last_newline + 1));
  }
  const std::string_view text = zstd ? std::string_view(decoded_) : std::string_view(raw);
  const size_t events_before = data_.events.size();
  const uint32_t line_before = next_line_;
  size_t consumed = 0;
  try {
    consumed = parser_->parse(data_, text, next_line_, has_header_);
  } catch (...) {
    if (has_header_) {
      // strict mode: resume after the bad event line
      if (zstd) {
        decoded_.erase(0, parser_->consumed());
      } else {
        offset_ += parser_->consumed();
      }
    } else {
      next_line_ = line_before;  // a bad header: report it again at every poll
    }
    throw;
  }
  data_.partial_last_line = !is_blank_text(text.substr(consumed));
  data_.partial_line = data_.partial_last_line ? next_line_ : 0;
  if (zstd) {
    decoded_.erase(0, consumed);
  } else {
    offset_ += consumed;
  }
  // Fingerprints of the file's bytes as stored (compressed or not): its first ones, and the last
  // ones consumed.
  const std::string_view consumed_raw =
      zstd ? std::string_view(raw) : std::string_view(raw).substr(0, consumed);
  if (has_header_ && offset_ > 0) {
    if (header_line_.empty()) {
      header_line_ = read_at(file.fd, 0, std::min(offset_, kHeadFingerprintBytes), path_.string());
    }
    const uint64_t tail = std::min<uint64_t>(consumed_raw.size(), kTailFingerprintBytes);
    if (tail > 0) consumed_tail_ = std::string(consumed_raw.substr(consumed_raw.size() - tail, tail));
  }
  return data_.events.size() - events_before;
}

}  // namespace dpscope::trace::detail
