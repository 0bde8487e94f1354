// A trace file's text, read (and decoded, when its content is a zstd stream) a piece at a time
// on a thread of its own while the caller parses the previous piece (internal to libdpscope).
//
// Why: reading a 10M-event trace is decoding (about a quarter of the time) plus parsing; on two
// cores they overlap, and only a few pieces of text (megabytes) are ever held, never the whole file
// or its decoded text (docs/benchmarks.md, "10M events").
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "text_buffer.hpp"

namespace dpscope::trace::detail {

// A line is gathered whole before it is parsed. A line of gigabytes (a zstd bomb: 92 KiB that
// decode to a 3 GB line of spaces; a file of a single 1 GB line) was gathered into memory twice
// its size (5.8 GB resident for 3 GB) and then read as "0 events". The longest lines dpscope and
// dpscope_torch write are a huge model's header (1,000,000 parameters: 64 MB) and a samples event
// of a huge batch; 256 MiB leaves room for both.
constexpr size_t kMaxLineBytes = size_t{256} << 20;
// Throws Error(kFormat) "PATH:LINE: a line longer than 256 MiB ..." when `bytes` > kMaxLineBytes.
void check_line_length(std::string_view path, uint32_t line, size_t bytes);

class TextPieces {
 public:
  // Opens `path` and starts reading `piece_bytes` of it at a time (0: the defaults of
  // ReadOptions::piece_bytes). Throws kIo when it cannot be opened or is a directory.
  explicit TextPieces(const std::filesystem::path& path, size_t piece_bytes = 0);
  ~TextPieces();  // stops the reader thread (a caller that threw leaves pieces unread)
  TextPieces(const TextPieces&) = delete;
  TextPieces& operator=(const TextPieces&) = delete;

  // The next piece of text, swapped into `out` (any length, cut anywhere, possibly mid-line);
  // false at the end of the file. What `out` held is handed back to the reader to fill again.
  // Rethrows the reader's error (kIo for a read error, kFormat for a broken zstd stream) where the
  // text stops.
  bool next(TextBuffer& out);
  // Reads the rest of the file, discarding it: rethrows an error the rest holds.
  void drain();

  bool compressed() const { return compressed_; }
  // The file's size when it was opened (0 for a pipe), for sizing what its content becomes.
  uint64_t file_bytes() const { return file_bytes_; }
  // After next() returned false: the zstd frame ends before the file does (cut off).
  bool cut_off() const { return cut_off_; }

 private:
  void read_all();          // the reader thread
  TextBuffer take_spare();  // an emptied piece to fill, reused when the parser gave one back

  std::string path_;
  int fd_ = -1;
  bool compressed_ = false;
  uint64_t file_bytes_ = 0;
  size_t piece_bytes_ = 0;
  TextBuffer head_;  // the bytes read to look for zstd's magic number, the start of the first piece

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<TextBuffer> ready_;   // at most kQueued pieces wait
  std::vector<TextBuffer> spare_;  // pieces the parser is done with
  bool done_ = false;              // the reader has put its last piece
  bool stop_ = false;              // the caller is gone
  std::exception_ptr error_;
  bool cut_off_ = false;
  std::thread reader_;
};

}  // namespace dpscope::trace::detail
