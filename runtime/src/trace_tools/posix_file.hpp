// Small POSIX file helpers of the trace reader and followers (internal to libdpscope).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"

namespace dpscope::trace::detail {

// Closes a file descriptor when it goes out of scope.
struct FileDescriptor {
  int fd = -1;
  FileDescriptor() = default;
  explicit FileDescriptor(int descriptor) : fd(descriptor) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens a trace file for reading: a regular file, never a FIFO or a device (the input guard of
// base/file_guard.hpp: it never blocks, and names the true reason a path cannot be read).
inline int open_trace_file(const std::string& path) { return InputFile::open(path, "trace").release(); }

// Reads `size` bytes at `offset` (fewer if the file is shorter); throws kIo on a read error.
inline std::string read_at(int fd, uint64_t offset, uint64_t size, const std::string& path) {
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

// Only spaces, tabs and line ends.
inline bool is_blank_text(std::string_view text) {
  for (char c : text)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  return true;
}

}  // namespace dpscope::trace::detail
