// zstd-compressed traces (compressed.hpp): the streaming decoder and the trace file writer.
// read_trace_text lives in trace_file.cpp, beside the plain file reader.
#include "dpscope/trace_tools/compressed.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <utility>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/format_bytes.hpp"
#include "text_buffer.hpp"

namespace dpscope::trace {

namespace {
constexpr unsigned char kZstdMagic[4] = {0x28, 0xB5, 0x2F, 0xFD};  // ZSTD_MAGICNUMBER, little-endian
}  // namespace

bool starts_with_zstd_magic(std::string_view bytes) {
  return bytes.size() >= 4 && std::memcmp(bytes.data(), kZstdMagic, 4) == 0;
}

bool could_be_zstd_magic(std::string_view bytes) {
  return bytes.size() < 4 && std::memcmp(bytes.data(), kZstdMagic, bytes.size()) == 0;
}

bool names_zstd_file(const std::filesystem::path& path) { return path.extension() == ".zst"; }

// ---- reading ----

ZstdDecoder::ZstdDecoder(std::string name) : name_(std::move(name)), context_(ZSTD_createDCtx()) {
  DPS_ASSERT(context_ != nullptr, "ZSTD_createDCtx failed (out of memory)");
}

ZstdDecoder::~ZstdDecoder() { ZSTD_freeDCtx(context_); }

void ZstdDecoder::reset() {
  ZSTD_DCtx_reset(context_, ZSTD_reset_session_only);
  frame_end_ = true;
  taken_ = decoded_ = 0;
}

void ZstdDecoder::check_expansion(uint64_t taken) const {
  if (decoded_ <= kExpansionFloorBytes || decoded_ / kMaxExpansion <= taken) return;
  throw Error(ErrorKind::kFormat,
              fmt::format("{}: decodes to more than {} times its compressed size ({} from {}): not a trace "
                          "(a trace compresses about 10 times)",
                          name_, kMaxExpansion, format_bytes(decoded_), format_bytes(taken)));
}

namespace {

// The two kinds of output decode() fills, seen alike: free room of at least `n` bytes, then the
// bytes written into it.
struct StringRoom {
  std::string& out;
  size_t used = out.size();
  std::span<char> room(size_t n) {
    // Capacity grows geometrically, but only the `n` bytes asked for are zeroed: a string kept
    // between calls (a follower's undecoded tail) is not zero-filled to twice its size each time.
    if (out.size() - used < n) {
      if (out.capacity() < used + n) out.reserve(std::max(used + n, 2 * used));
      out.resize(used + n);
    }
    return {out.data() + used, out.size() - used};
  }
  void grow(size_t n) { used += n; }
  void finish() { out.resize(used); }
};
struct BufferRoom {
  detail::TextBuffer& out;
  std::span<char> room(size_t n) { return {out.room(n), out.free_bytes()}; }
  void grow(size_t n) { out.grow(n); }
  void finish() {}
};

}  // namespace

// decode(): all of it, as decode_some() without a bound on what it makes.
void ZstdDecoder::decode(std::string_view compressed, std::string& out) {
  size_t consumed = 0;
  decode_some(compressed, &consumed, out, SIZE_MAX);
}

void ZstdDecoder::decode(std::string_view compressed, detail::TextBuffer& out) {
  size_t consumed = 0;
  decode_some(compressed, &consumed, out, SIZE_MAX);
}

template <class Room>
bool ZstdDecoder::decode_some_into(std::string_view compressed, size_t* consumed, Room& out, size_t max_out) {
  if (compressed.empty()) return false;  // as decode(): no bytes fed leave the frame state alone
  ZSTD_inBuffer in{compressed.data(), compressed.size(), *consumed};
  const size_t in_start = in.pos;
  const size_t chunk = ZSTD_DStreamOutSize();
  size_t produced = 0;
  bool limited = true;
  while (produced < max_out) {
    const size_t want = std::min(chunk, max_out - produced);
    ZSTD_outBuffer dst{out.room(want).data(), want, 0};
    const size_t hint = ZSTD_decompressStream(context_, &dst, &in);
    out.grow(dst.pos);
    produced += dst.pos;
    decoded_ += dst.pos;
    if (ZSTD_isError(hint)) {
      out.finish();
      ZSTD_DCtx_reset(context_, ZSTD_reset_session_only);
      throw Error(ErrorKind::kFormat,
                  fmt::format("{}: not a valid zstd stream ({})", name_, ZSTD_getErrorName(hint)));
    }
    try {
      check_expansion(taken_ + (in.pos - in_start));
    } catch (const Error&) {
      out.finish();
      throw;
    }
    frame_end_ = hint == 0;
    // Done once the input is taken and the output had room to spare (zstd holds nothing back).
    if (in.pos == in.size && dst.pos < dst.size) {
      limited = false;
      break;
    }
  }
  out.finish();
  taken_ += in.pos - in_start;
  *consumed = in.pos;
  return limited;
}

bool ZstdDecoder::decode_some(std::string_view compressed, size_t* consumed, detail::TextBuffer& out,
                              size_t max_out) {
  BufferRoom room{out};
  return decode_some_into(compressed, consumed, room, max_out);
}

bool ZstdDecoder::decode_some(std::string_view compressed, size_t* consumed, std::string& out,
                              size_t max_out) {
  StringRoom room{out};
  return decode_some_into(compressed, consumed, room, max_out);
}

std::string cut_off_message(std::string_view name) {
  return fmt::format(
      "{}: the zstd frame is cut off (the file ends mid-frame: still being written, or truncated)", name);
}

TraceText decode_trace_bytes(std::string_view bytes, std::string_view name) {
  TraceText result;
  result.compressed = true;
  // A frame written in one go records its size; a streamed one does not (then grow as decoded).
  const unsigned long long size = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
  // (the size a frame declares is a hint believed only as far as a trace's could be: a few bytes may
  // declare a terabyte; past it the text grows as decoded)
  if (size != ZSTD_CONTENTSIZE_UNKNOWN && size != ZSTD_CONTENTSIZE_ERROR)
    result.text.reserve(std::min<uint64_t>(size, uint64_t{64} * bytes.size()));
  ZstdDecoder decoder{std::string(name)};
  decoder.decode(bytes, result.text);
  result.cut_off = !decoder.at_frame_end();
  return result;
}

// ---- writing ----

namespace {

// A trace is written in place as it grows (a viewer follows it), so it cannot be renamed into
// place: the file is opened without blocking (a FIFO without a reader is an error, never a wait),
// and only a regular file, or a device the user named under /dev, is written (base/file_guard.hpp).
std::FILE* open_for_streaming(const std::filesystem::path& path) {
  const PathStatus before = path_status(path);
  const bool device = written_in_place(path);
  DPS_CHECK(device || before.kind == FileKind::kMissing || before.kind == FileKind::kRegular,
            ErrorKind::kUsage, "cannot write trace '{}': {}; refusing to write over it", path.string(),
            why_not_regular(before));
  const int fd = open_output_without_waiting(path, O_WRONLY | (device ? O_APPEND : O_CREAT | O_TRUNC));
  DPS_CHECK(fd >= 0, ErrorKind::kIo, "cannot write trace '{}': {}", path.string(),
            errno == ENXIO ? "no process reads it" : std::strerror(errno));
  std::FILE* file = ::fdopen(fd, "wb");
  if (file == nullptr) {
    const int err = errno;
    ::close(fd);
    throw Error(ErrorKind::kIo,
                fmt::format("cannot write trace '{}': {}", path.string(), std::strerror(err)));
  }
  return file;
}

// The offset just past the last newline among the first `size` bytes of `in` (0: none), or -1
// when they cannot be read.
off_t end_of_last_line(int in, off_t size) {
  char chunk[4096];
  for (off_t end = size; end > 0;) {
    const off_t start = std::max<off_t>(0, end - static_cast<off_t>(sizeof chunk));
    if (::pread(in, chunk, static_cast<size_t>(end - start), start) != end - start) return -1;
    for (off_t i = end - start; i > 0; --i)
      if (chunk[i - 1] == '\n') return start + i;
    end = start;
  }
  return 0;
}

// Cuts a plain trace that a failed write left mid-line back to its last whole line: what the run
// wrote before the disk filled reads as a finished trace (a reader otherwise warns that the file
// ends with an incomplete line, as one still being written does, and leaves that line out). `fd` is
// the trace's write-only descriptor; the bytes are read through `path`, opened again, if it is still
// the same file. Only a regular file: a device or a pipe keeps what reached it.
void cut_back_to_last_line(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (in < 0) return;
  struct stat again {};
  const bool same = ::fstat(in, &again) == 0 && again.st_dev == st.st_dev && again.st_ino == st.st_ino;
  const off_t keep = same ? end_of_last_line(in, st.st_size) : -1;
  ::close(in);
  if (keep >= 0 && keep < st.st_size) (void)!::ftruncate(fd, keep);
}

}  // namespace

TraceFileWriter::TraceFileWriter(const std::filesystem::path& path, bool compress) : path_(path.string()) {
  file_ = open_for_streaming(path);
  if (compress) {
    context_ = ZSTD_createCCtx();
    DPS_ASSERT(context_ != nullptr, "ZSTD_createCCtx failed (out of memory)");
    ZSTD_CCtx_setParameter(context_, ZSTD_c_compressionLevel, ZSTD_CLEVEL_DEFAULT);
    ZSTD_CCtx_setParameter(context_, ZSTD_c_checksumFlag, 1);  // a reader notices a damaged frame
    out_.resize(ZSTD_CStreamOutSize());
  }
}

TraceFileWriter::~TraceFileWriter() {
  try {
    close();
  } catch (...) {
    // Destructors must not throw; close() reports to callers that call it.
  }
  ZSTD_freeCCtx(context_);
}

void TraceFileWriter::compress(std::string_view text, int mode) {
  const auto directive = static_cast<ZSTD_EndDirective>(mode);
  ZSTD_inBuffer in{text.data(), text.size(), 0};
  for (;;) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    const size_t remaining = ZSTD_compressStream2(context_, &out, &in, directive);
    DPS_ASSERT(!ZSTD_isError(remaining), "zstd compression of trace '{}' failed: {}", path_,
               ZSTD_getErrorName(remaining));
    if (out.pos > 0) write_bytes(out_.data(), out.pos);
    // ZSTD_e_continue: done once the input is taken; flush and end: once nothing is left inside.
    const bool done = directive == ZSTD_e_continue ? in.pos == in.size : remaining == 0;
    if (done) break;
  }
}

// A write failure after the run started (the disk filled up, an I/O error) is a runtime failure
// (kWriteFailed, exit code 1), reported with the system's reason at the first write that fails.
// The file is closed quietly first: nothing more is written, and close() then has nothing to report
// twice. A plain trace then ends at its last whole line (stdio's buffer may have reached the file in
// part, at the failed write or at fclose: the cut comes after both).
void TraceFileWriter::fail(int err) {
  if (file_ != nullptr) {
    const int fd = context_ == nullptr ? ::dup(::fileno(file_)) : -1;
    std::fclose(std::exchange(file_, nullptr));
    if (fd >= 0) {
      cut_back_to_last_line(fd, path_);
      ::close(fd);
    }
  }
  throw Error(ErrorKind::kWriteFailed, fmt::format("cannot write trace '{}': {}", path_,
                                                   err != 0 ? std::strerror(err) : "write error"));
}

void TraceFileWriter::write_bytes(const void* data, size_t size_bytes) {
  errno = 0;
  // stdio may count bytes as taken while the write(2) under it failed: its error flag says so.
  if (std::fwrite(data, 1, size_bytes, file_) != size_bytes || std::ferror(file_) != 0) fail(errno);
}

void TraceFileWriter::write(std::string_view text) {
  if (file_ == nullptr || text.empty()) return;
  if (context_ == nullptr) {
    write_bytes(text.data(), text.size());
  } else {
    compress(text, ZSTD_e_continue);
  }
}

void TraceFileWriter::flush() {
  if (file_ == nullptr) return;
  if (context_ != nullptr) compress({}, ZSTD_e_flush);
  errno = 0;
  if (std::fflush(file_) != 0 || std::ferror(file_) != 0) fail(errno);
}

void TraceFileWriter::close() {
  if (file_ == nullptr) return;
  if (context_ != nullptr) compress({}, ZSTD_e_end);  // a failed write closes the file and throws
  errno = 0;
  if (std::fflush(file_) != 0 || std::ferror(file_) != 0) fail(errno != 0 ? errno : EIO);
  errno = 0;
  if (std::fclose(std::exchange(file_, nullptr)) != 0) fail(errno != 0 ? errno : EIO);
}

}  // namespace dpscope::trace
