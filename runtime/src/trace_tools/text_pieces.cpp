// TextPieces (text_pieces.hpp): the reader thread and the hand-over of its pieces.
#include "text_pieces.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/trace_tools/compressed.hpp"

namespace dpscope::trace::detail {

namespace {

// Bytes read from the file per piece. Compressed: about 10 MB of text at the 40:1 typical of traces.
constexpr size_t kCompressedPieceBytes = size_t{256} << 10;
constexpr size_t kPlainPieceBytes = size_t{8} << 20;
// Pieces decoded ahead of the parser: enough to keep both threads busy, few enough to hold little.
constexpr size_t kQueued = 2;
// The most text one compressed piece decodes to (a typical one: about 10 MB). zstd's ratio has no
// useful bound (92 KiB decoded to 3 GB in one piece), so the decoded text is cut into pieces of at
// most this, and memory stays bounded by the queue and the reader's longest line.
constexpr size_t kMaxDecodedPieceBytes = size_t{32} << 20;

// Appends up to `want` bytes to `out`; false at the end of the file.
bool read_some(int fd, TextBuffer& out, size_t want, const std::string& path) {
  char* room = out.room(want);
  size_t done = 0;
  while (done < want) {
    const ssize_t n = ::read(fd, room + done, want - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.grow(done);
      throw Error(ErrorKind::kIo, fmt::format("cannot read trace '{}': {}", path, std::strerror(errno)));
    }
    if (n == 0) {
      out.grow(done);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  out.grow(done);
  return true;
}

}  // namespace

void check_line_length(std::string_view path, uint32_t line, size_t bytes) {
  DPS_CHECK(bytes <= kMaxLineBytes, ErrorKind::kFormat,
            "{}:{}: a line longer than {} MiB (a trace line is at most a few MiB): not a dpscope trace, or "
            "a damaged one",
            path, line, kMaxLineBytes >> 20);
}

TextPieces::TextPieces(const std::filesystem::path& path, size_t piece_bytes) : path_(path.string()) {
  InputFile file = InputFile::open(path, "trace");  // a regular file, never a FIFO: reading never blocks
  file_bytes_ = file.size_bytes();
  fd_ = file.release();
  try {
    read_some(fd_, head_, 4, path_);  // by content, not by name
  } catch (...) {
    ::close(fd_);
    throw;
  }
  compressed_ = starts_with_zstd_magic(head_.view());
  piece_bytes_ = piece_bytes > 0 ? piece_bytes : compressed_ ? kCompressedPieceBytes : kPlainPieceBytes;
  reader_ = std::thread([this] { read_all(); });
}

TextPieces::~TextPieces() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  reader_.join();
  ::close(fd_);
}

TextBuffer TextPieces::take_spare() {
  std::lock_guard lock(mutex_);
  if (spare_.empty()) return {};
  TextBuffer piece = std::move(spare_.back());
  spare_.pop_back();
  piece.clear();
  return piece;
}

void TextPieces::read_all() {
  std::exception_ptr error;
  bool cut_off = false;
  try {
    std::optional<ZstdDecoder> decoder;
    if (compressed_) decoder.emplace(path_);
    TextBuffer bytes = std::move(head_);  // compressed: the file's bytes for one piece
    // Queues a piece for next() (an empty one goes back to the spares); false once stopped.
    auto hand_over = [this](TextBuffer& piece) {
      std::unique_lock lock(mutex_);
      if (piece.empty()) {
        spare_.push_back(std::move(piece));
        return true;
      }
      changed_.wait(lock, [&] { return ready_.size() < kQueued || stop_; });
      if (stop_) return false;
      ready_.push_back(std::move(piece));
      lock.unlock();
      changed_.notify_all();
      return true;
    };
    bool more = true;
    while (more) {
      TextBuffer piece = take_spare();
      if (!decoder && !bytes.empty()) std::swap(piece, bytes);  // the head starts the first piece
      TextBuffer& raw = decoder ? bytes : piece;
      more = read_some(fd_, raw, piece_bytes_ - std::min(piece_bytes_, raw.size()), path_);
      if (decoder) {
        size_t consumed = 0;  // throws for a broken stream
        while (decoder->decode_some(raw.view(), &consumed, piece, kMaxDecodedPieceBytes - piece.size())) {
          if (!hand_over(piece)) return;
          piece = take_spare();
        }
        raw.clear();
      }
      if (!hand_over(piece)) return;
    }
    cut_off = decoder && !decoder->at_frame_end();
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard lock(mutex_);
    error_ = error;
    cut_off_ = cut_off;
    done_ = true;
  }
  changed_.notify_all();
}

bool TextPieces::next(TextBuffer& out) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || done_; });
  if (!ready_.empty()) {
    std::swap(out, ready_.front());
    if (ready_.front().capacity() > 0) spare_.push_back(std::move(ready_.front()));  // what `out` held
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

void TextPieces::drain() {
  TextBuffer discarded;
  while (next(discarded)) {
  }
}

}  // namespace dpscope::trace::detail
