// AtomicFileWriter: temporary file + fsync + rename (see base/atomic_file.hpp).
#include "dpscope/base/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/process.hpp"

namespace dpscope {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

std::filesystem::path directory_of(const std::filesystem::path& path) {
  std::filesystem::path dir = path.parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

// Makes a completed rename durable. Best effort: some filesystems refuse fsync on directories
// (EINVAL), and the data itself is already safe by then.
void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

// "<name>.tmp.<pid>.<n>" → pid, when `file_name` has that shape and <name> starts with `prefix`.
std::optional<pid_t> temp_file_writer(std::string_view file_name, std::string_view prefix) {
  if (file_name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const size_t counter_dot = file_name.rfind('.');
  if (counter_dot == std::string_view::npos || counter_dot == 0) return std::nullopt;
  const size_t pid_dot = file_name.rfind('.', counter_dot - 1);
  if (pid_dot == std::string_view::npos || pid_dot < 4) return std::nullopt;
  if (file_name.substr(pid_dot - 4, 4) != ".tmp" || pid_dot - 4 < prefix.size()) return std::nullopt;
  const auto all_digits = [](std::string_view s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
  };
  const std::string_view pid_text = file_name.substr(pid_dot + 1, counter_dot - pid_dot - 1);
  if (!all_digits(pid_text) || !all_digits(file_name.substr(counter_dot + 1))) return std::nullopt;
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (ec != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0) return std::nullopt;
  return pid;
}

// An existing destination that is not a regular file is never renamed over (it might be
// /dev/full, a FIFO another program reads, a directory): refused with the reason.
void refuse_unless_replaceable(const std::filesystem::path& path) {
  const PathStatus status = path_status(path);
  if (status.kind == FileKind::kMissing || status.kind == FileKind::kRegular) return;
  throw Error(ErrorKind::kUsage,
              fmt::format("{}: {}; refusing to write over it", path.string(),
                          status.kind == FileKind::kDirectory ? "is a directory" : why_not_regular(status)));
}

}  // namespace

std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& dir,
                                                           std::string_view name_prefix) {
  std::vector<std::filesystem::path> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::optional<pid_t> pid = temp_file_writer(name, name_prefix);
    if (!pid || *pid == ::getpid() || process_exists(*pid)) continue;
    std::error_code remove_ec;
    if (std::filesystem::remove(entry.path(), remove_ec)) removed.push_back(entry.path());
  }
  return removed;
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)) {
  static std::atomic<uint64_t> counter{0};
  DPS_CHECK(!path_.empty() && path_.has_filename(), ErrorKind::kIo, "'{}': not a file path", path_.string());
  if (written_in_place(path_)) {
    // A FIFO without a reader is an error now rather than a wait forever.
    in_place_ = true;
    fd_ = open_output_without_waiting(path_, O_WRONLY | O_APPEND);
    if (fd_ < 0) {
      const int err = errno;
      throw Error(ErrorKind::kIo, fmt::format("{}: cannot open for writing: {}", path_.string(),
                                              err == ENXIO ? "no process reads it" : errno_text(err)));
    }
    return;
  }
  refuse_unless_replaceable(path_);
  // A writer killed mid-write (SIGTERM, SIGKILL, a crash) left its temporary file; the next writer
  // of the same file removes it (its process is gone), so none piles up.
  remove_stale_temp_files(path_.has_parent_path() ? path_.parent_path() : std::filesystem::path("."),
                          path_.filename().string());
  temp_path_ = path_;
  temp_path_ += fmt::format(".tmp.{}.{}", ::getpid(), counter.fetch_add(1));
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    throw Error(ErrorKind::kIo, fmt::format("{}: cannot create a file in '{}': {}", path_.string(),
                                            directory_of(path_).string(), errno_text(err)));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) discard();
}

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (in_place_) return;  // a device: nothing of ours to remove
  std::error_code ignored;
  std::filesystem::remove(temp_path_, ignored);
}

void AtomicFileWriter::write(const void* data, uint64_t size_bytes) {
  DPS_ASSERT(fd_ >= 0 && !committed_, "write() after commit() on {}", path_.string());
  const char* p = static_cast<const char*>(data);
  uint64_t left = size_bytes;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      throw Error(ErrorKind::kWriteFailed, fmt::format("{}: write failed after {} bytes: {}", path_.string(),
                                                       bytes_written_, errno_text(err)));
    }
    p += n;
    left -= static_cast<uint64_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
}

void AtomicFileWriter::commit() {
  DPS_ASSERT(fd_ >= 0 && !committed_, "commit() called twice on {}", path_.string());
  if (in_place_) {
    const int close_rc = ::close(fd_);
    fd_ = -1;
    committed_ = true;
    if (close_rc != 0) {
      const int err = errno;
      throw Error(ErrorKind::kWriteFailed,
                  fmt::format("{}: close failed: {}", path_.string(), errno_text(err)));
    }
    return;
  }
  if (::fsync(fd_) != 0) {
    const int err = errno;
    throw Error(ErrorKind::kWriteFailed,
                fmt::format("{}: fsync failed: {}", path_.string(), errno_text(err)));
  }
  const int close_rc = ::close(fd_);
  fd_ = -1;
  if (close_rc != 0) {
    const int err = errno;
    throw Error(ErrorKind::kWriteFailed,
                fmt::format("{}: close failed: {}", path_.string(), errno_text(err)));
  }
  try {
    refuse_unless_replaceable(path_);  // it may have been replaced while we wrote
  } catch (...) {
    discard();
    throw;
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    throw Error(ErrorKind::kWriteFailed,
                fmt::format("{}: cannot replace the file: {}", path_.string(), errno_text(err)));
  }
  committed_ = true;
  fsync_directory(directory_of(path_));
}

}  // namespace dpscope
