// File and memory byte sources for the npy and safetensors readers.
#include "io/byte_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"

namespace dpscope::io_detail {

namespace {

// Opens `path` read-only when it is a regular file, without blocking on a FIFO (base/file_guard.hpp).
int open_regular_file(const std::filesystem::path& path) { return InputFile::open(path, "").release(); }

uint64_t file_size_of(int fd) {
  struct stat st {};
  (void)::fstat(fd, &st);
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

FileByteSource::FileByteSource(const std::filesystem::path& path)
    : FileByteSource(path, open_regular_file(path)) {}

FileByteSource::FileByteSource(const std::filesystem::path& path, int fd)
    : ByteSource(path.string(), file_size_of(fd)), fd_(fd) {}

FileByteSource::~FileByteSource() { ::close(fd_); }

void FileByteSource::read_at(uint64_t offset_bytes, void* dst, uint64_t count_bytes) const {
  char* p = static_cast<char*>(dst);
  while (count_bytes > 0) {
    const ssize_t n = ::pread(fd_, p, count_bytes, static_cast<off_t>(offset_bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      throw Error(ErrorKind::kIo,
                  fmt::format("{}: read failed at byte {}: {}", name(), offset_bytes,
                              n == 0 ? "the file shrank while being read" : std::strerror(err)));
    }
    p += n;
    offset_bytes += static_cast<uint64_t>(n);
    count_bytes -= static_cast<uint64_t>(n);
  }
}

void MemoryByteSource::read_at(uint64_t offset_bytes, void* dst, uint64_t count_bytes) const {
  DPS_ASSERT(offset_bytes <= bytes_.size() && count_bytes <= bytes_.size() - offset_bytes,
             "read [{}, +{}) past the {}-byte buffer of {}; check ranges against size_bytes() first",
             offset_bytes, count_bytes, bytes_.size(), name());
  if (count_bytes > 0) std::memcpy(dst, bytes_.data() + offset_bytes, count_bytes);
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

}  // namespace dpscope::io_detail
