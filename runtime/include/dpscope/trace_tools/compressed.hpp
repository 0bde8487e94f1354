// zstd-compressed traces (`run.jsonl.zst`, docs/trace-format.md "Compressed traces").
//
// A trace file may be one zstd stream of the JSON Lines text. Writers (TraceRecorder, `dpscope
// trace merge`) compress when the file name ends in ".zst" and end a zstd block at every flush, so
// whatever was flushed is decodable by a reader following the file live; closing ends the frame.
// Readers (read_trace, TraceFollower, rank directories) look at the content, not the name: a file
// that starts with zstd's magic number is decoded, any other is read as plain text.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

struct ZSTD_CCtx_s;  // zstd.h's contexts, kept out of this header
struct ZSTD_DCtx_s;

namespace dpscope::trace {

namespace detail {
class TextBuffer;  // the reader's reusable text (src/trace_tools/text_buffer.hpp)
}

// The bytes start with the zstd frame magic number (28 B5 2F FD).
bool starts_with_zstd_magic(std::string_view bytes);
// `bytes` (fewer than 4) could still become the magic number as the file grows.
bool could_be_zstd_magic(std::string_view bytes);
// "run.jsonl.zst": a writer compresses it.
bool names_zstd_file(const std::filesystem::path& path);

// Decodes one zstd stream fed in pieces (a growing file: its new bytes at each poll). A piece may
// end anywhere, mid-block or mid-frame: what it completes is decoded, the rest waits for the next.
class ZstdDecoder {
 public:
  static constexpr uint64_t kMaxExpansion = 1000;
  static constexpr uint64_t kExpansionFloorBytes = uint64_t{1} << 30;

  explicit ZstdDecoder(std::string name);  // the file, for messages
  ~ZstdDecoder();
  ZstdDecoder(const ZstdDecoder&) = delete;
  ZstdDecoder& operator=(const ZstdDecoder&) = delete;

  // Appends the text decoded from the stream's next bytes `compressed` to `out`. Throws
  // Error(kFormat) "NAME: not a valid zstd stream (REASON)" for bytes zstd refuses.
  void decode(std::string_view compressed, std::string& out);
  void decode(std::string_view compressed, detail::TextBuffer& out);  // the same, into reused room
  // The same, bounded: decodes `compressed` from `*consumed` on until it is all taken or `out` grew
  // by `max_out` bytes; advances `*consumed`. True when it stopped at `max_out` (more text may
  // follow from the same bytes: call again with the same `compressed`). A zstd bomb (92 KiB that
  // decode to 3 GB) is then read in bounded pieces instead of decoded whole.
  bool decode_some(std::string_view compressed, size_t* consumed, detail::TextBuffer& out, size_t max_out);
  bool decode_some(std::string_view compressed, size_t* consumed, std::string& out, size_t max_out);
  // The bytes fed so far end a frame (or none were fed): nothing is cut off.
  bool at_frame_end() const { return frame_end_; }
  void reset();

 private:
  template <class Room>
  bool decode_some_into(std::string_view compressed, size_t* consumed, Room& out, size_t max_out);

  // Refuses a stream that has decoded to more than kMaxExpansion times the bytes it took, once past
  // kExpansionFloorBytes: a trace compresses about 10 times, a bomb thousands (32 GB of blank lines
  // from 981 KB went on past any time limit where a line of them was refused at 256 MiB).
  void check_expansion(uint64_t taken) const;

  std::string name_;
  ZSTD_DCtx_s* context_ = nullptr;
  bool frame_end_ = true;
  uint64_t taken_ = 0;    // compressed bytes consumed since the last reset()
  uint64_t decoded_ = 0;  // text bytes made from them
};

// The text of a trace file: decoded when its content is a zstd stream, as it is otherwise.
struct TraceText {
  std::string text;
  bool compressed = false;
  bool cut_off = false;  // compressed, and the file ends mid-frame (being written, or truncated)
};
// Throws kIo when the file cannot be read (a directory included), kFormat for a broken zstd stream.
TraceText read_trace_text(const std::filesystem::path& path);
// Decodes a whole file's bytes (starting with the zstd magic number); `name` is used in messages.
TraceText decode_trace_bytes(std::string_view bytes, std::string_view name);
// The message for a compressed trace cut off mid-frame, "FILE: the zstd frame is cut off ...".
std::string cut_off_message(std::string_view name);

// Writes a trace file, plain or zstd-compressed: what TraceRecorder and `dpscope trace merge`
// write through. Not thread-safe (the recorder holds its own lock).
class TraceFileWriter {
 public:
  // Creates (or truncates) `path`; compresses when `compress`. Throws kIo "cannot write trace
  // 'PATH': REASON".
  TraceFileWriter(const std::filesystem::path& path, bool compress);
  ~TraceFileWriter();  // closes without reporting errors (call close() to hear of them)
  TraceFileWriter(const TraceFileWriter&) = delete;
  TraceFileWriter& operator=(const TraceFileWriter&) = delete;

  // Appends `text`: plain, through stdio's buffer; zstd, into the current block. A failed write
  // (disk full) throws Error(kWriteFailed) "cannot write trace 'PATH': No space left on device" —
  // here, or at the flush() or close() that reaches the file.
  void write(std::string_view text);
  // Everything written so far reaches the file and is readable: zstd ends its block (ZSTD_e_flush).
  void flush();
  // Flushes, ends the zstd frame (ZSTD_e_end) and closes, throwing kWriteFailed with strerror's
  // reason when that fails. Does nothing once closed.
  void close();
  bool is_open() const { return file_ != nullptr; }
  bool compressed() const { return context_ != nullptr; }

 private:
  void compress(std::string_view text, int mode);  // mode: a ZSTD_EndDirective
  void write_bytes(const void* data, size_t size_bytes);
  [[noreturn]] void fail(int err);  // throws kWriteFailed naming the file and strerror(err)

  std::string path_;
  std::FILE* file_ = nullptr;
  ZSTD_CCtx_s* context_ = nullptr;  // null: plain text
  std::vector<char> out_;           // compressed bytes on their way to file_
};

}  // namespace dpscope::trace
