// The input and output guards (base/file_guard.hpp).
#include "dpscope/base/file_guard.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "dpscope/base/error.hpp"

namespace dpscope {

namespace fs = std::filesystem;

namespace {

FileKind kind_of(mode_t mode) {
  if (S_ISREG(mode)) return FileKind::kRegular;
  if (S_ISDIR(mode)) return FileKind::kDirectory;
  if (S_ISFIFO(mode)) return FileKind::kFifo;
  if (S_ISSOCK(mode)) return FileKind::kSocket;
  if (S_ISCHR(mode)) return FileKind::kCharDevice;
  if (S_ISBLK(mode)) return FileKind::kBlockDevice;
  return FileKind::kUnreadable;
}

// strerror's text with a lower-case first letter, to continue a sentence.
std::string error_text(int err) {
  std::string text = std::strerror(err);
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z' &&
      (text.size() < 2 || text[1] < 'A' || text[1] > 'Z'))
    text[0] = static_cast<char>(text[0] - 'A' + 'a');
  return text;
}

bool is_dangling_symlink(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

[[noreturn]] void refuse_input(const fs::path& path, std::string_view what, const std::string& reason) {
  throw Error(ErrorKind::kIo, what.empty()
                                  ? fmt::format("cannot read '{}': {}", path.string(), reason)
                                  : fmt::format("cannot read {} '{}': {}", what, path.string(), reason));
}

void check_size(const fs::path& path, std::string_view what, uint64_t size_bytes, uint64_t max_bytes) {
  if (size_bytes > max_bytes)
    refuse_input(
        path, what,
        fmt::format("it holds {} bytes, more than the {} bytes such a file may have", size_bytes, max_bytes));
}

// Two spellings of one file ("out/w.safetensors", "./out/../out/w.safetensors", a symlink or a hard
// link to it); for paths that do not exist yet, the same path once resolved.
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool same = fs::equivalent(a, b, ec);
    return same && !ec;
  }
  // Absolute first: weakly_canonical resolves only what exists, so of a new file "./x" and "x"
  // would stay two different relative spellings.
  const auto resolved = [&ec](const fs::path& p) {
    const fs::path absolute = fs::absolute(p, ec);
    return ec ? fs::path() : fs::weakly_canonical(absolute, ec).lexically_normal();
  };
  const fs::path ca = resolved(a);
  if (ec) return false;
  const fs::path cb = resolved(b);
  return !ec && ca == cb;
}

// `file` lies directly inside `dir` (both resolved).
bool directly_inside(const fs::path& file, const fs::path& dir) {
  std::error_code ec;
  const fs::path parent = fs::weakly_canonical(fs::absolute(file, ec).parent_path(), ec);
  if (ec) return false;
  const fs::path resolved_dir = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  return !ec && parent == resolved_dir;
}

fs::path directory_of(const fs::path& file) {
  return file.has_parent_path() ? file.parent_path() : fs::path(".");
}

bool writable_directory(const fs::path& dir) { return ::access(dir.c_str(), W_OK | X_OK) == 0; }

}  // namespace

PathStatus path_status(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    return {.kind = err == ENOENT || err == ENOTDIR ? FileKind::kMissing : FileKind::kUnreadable,
            .size_bytes = 0,
            .error = err};
  }
  return {.kind = kind_of(st.st_mode), .size_bytes = static_cast<uint64_t>(st.st_size), .error = 0};
}

std::string describe_kind(FileKind kind) {
  switch (kind) {
    case FileKind::kMissing: return "missing";
    case FileKind::kRegular: return "a regular file";
    case FileKind::kDirectory: return "a directory";
    case FileKind::kFifo: return "a FIFO (named pipe)";
    case FileKind::kSocket: return "a socket";
    case FileKind::kCharDevice: return "a character device";
    case FileKind::kBlockDevice: return "a block device";
    case FileKind::kUnreadable: return "unreadable";
  }
  return "unknown";
}

std::string why_not_regular(const PathStatus& status) {
  switch (status.kind) {
    case FileKind::kRegular: return "";
    case FileKind::kMissing:
      return status.error == ENOTDIR ? "a part of its path is not a directory" : "no such file";
    case FileKind::kUnreadable: return error_text(status.error);
    case FileKind::kDirectory: return "is a directory";
    default: return fmt::format("is {}, not a regular file", describe_kind(status.kind));
  }
}

// Why a path where a directory is expected is not one ("" when it is).
std::string why_not_directory(const PathStatus& status) {
  switch (status.kind) {
    case FileKind::kDirectory: return "";
    case FileKind::kMissing: return "does not exist";
    case FileKind::kRegular: return "is a file, not a directory";
    case FileKind::kUnreadable: return error_text(status.error);
    default: return fmt::format("is {}, not a directory", describe_kind(status.kind));
  }
}

// ---- input guard ----

std::string why_not_readable(const fs::path& path) {
  const PathStatus status = path_status(path);
  if (status.kind == FileKind::kMissing && status.error == ENOENT && is_dangling_symlink(path))
    return "is a symbolic link to a missing file";
  return why_not_regular(status);
}

InputFile InputFile::open(const fs::path& path, std::string_view what, uint64_t max_bytes) {
  if (const std::string why = why_not_readable(path); !why.empty()) refuse_input(path, what, why);
  const PathStatus status = path_status(path);
  check_size(path, what, status.size_bytes, max_bytes);
  // O_NONBLOCK: if the path became a FIFO since the stat, open returns at once instead of waiting
  // for a writer; fstat below then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) refuse_input(path, what, error_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const PathStatus now{.kind = kind_of(st.st_mode), .size_bytes = 0, .error = errno};
    ::close(fd);
    refuse_input(path, what, why_not_regular(now));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  InputFile file(fd, static_cast<uint64_t>(st.st_size), path.string());
  check_size(path, what, file.size_bytes_, max_bytes);
  return file;
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(other.fd_), size_bytes_(other.size_bytes_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    size_bytes_ = other.size_bytes_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int InputFile::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

std::string InputFile::read_all(std::string_view what) const {
  DPS_ASSERT(fd_ >= 0, "read_all() on a released InputFile ({})", path_);
  std::string bytes(size_bytes_, '\0');
  uint64_t done = 0;
  while (done < size_bytes_) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, size_bytes_ - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) refuse_input(path_, what, error_text(errno));
    if (n == 0) break;  // the file shrank while being read: what is there
    done += static_cast<uint64_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

// ---- output guard ----

int open_output_without_waiting(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0666);
  if (fd < 0) return -1;
  const int now = ::fcntl(fd, F_GETFL);
  if (now >= 0) (void)::fcntl(fd, F_SETFL, now & ~O_NONBLOCK);
  return fd;
}

bool written_in_place(const fs::path& path) {
  std::error_code ec;
  const std::string resolved = fs::absolute(path, ec).lexically_normal().string();
  if (ec) return false;
  const bool under_dev = resolved.rfind("/dev/", 0) == 0 || resolved.rfind("/proc/", 0) == 0;
  if (!under_dev) return false;
  struct stat named {};
  if (::lstat(path.c_str(), &named) != 0) return false;
  if (S_ISLNK(named.st_mode)) {  // /dev/stdout, /dev/fd/1: whatever the descriptor is, not a disk
    const PathStatus target = path_status(path);
    return target.kind != FileKind::kDirectory && target.kind != FileKind::kBlockDevice &&
           target.kind != FileKind::kMissing && target.kind != FileKind::kUnreadable;
  }
  // A FIFO named under /dev (/dev/shm/f) is a file like any other FIFO: refused (only a descriptor
  // the process holds, above, may be a pipe: `--trace /dev/stdout | ...`).
  return S_ISCHR(named.st_mode);
}

void OutputGuard::add_input(std::string flag, fs::path path) {
  inputs_.push_back({std::move(flag), std::move(path), {}});
}

void OutputGuard::add_input_dir(std::string flag, fs::path dir, NameFilter reads) {
  input_dirs_.push_back({std::move(flag), std::move(dir), std::move(reads)});
}

void OutputGuard::add_output(std::string flag, fs::path path) {
  outputs_.push_back({std::move(flag), std::move(path), {}});
}

void OutputGuard::add_output_dir(std::string flag, fs::path dir, NameFilter writes) {
  output_dirs_.push_back({std::move(flag), std::move(dir), std::move(writes)});
}

void OutputGuard::check() const {
  for (const Entry& out : outputs_) {
    const std::string& flag = out.flag;
    const std::string shown = out.path.string();
    DPS_CHECK(!out.path.empty() && out.path.has_filename(), ErrorKind::kUsage,
              "{} '{}': not a file name; give the file to write", flag, shown);
    if (written_in_place(out.path)) {  // a device named on purpose: nothing is replaced
      // ...but it must take writes now, not once the work is done: /dev/tty without a terminal.
      // (Opening and closing a character device is harmless; a pipe is not probed: closing a writer
      // could end its reader.)
      if (path_status(out.path).kind == FileKind::kCharDevice) {
        const int fd = open_output_without_waiting(out.path, O_WRONLY);
        DPS_CHECK(fd >= 0, ErrorKind::kUsage, "{} {}: cannot write there: {}", flag, shown,
                  std::strerror(errno));
        ::close(fd);
      }
      continue;
    }
    const PathStatus status = path_status(out.path);
    DPS_CHECK(status.kind != FileKind::kDirectory, ErrorKind::kUsage,
              "{} {} is a directory; give a file name", flag, shown);
    DPS_CHECK(status.kind == FileKind::kMissing || status.kind == FileKind::kRegular, ErrorKind::kUsage,
              "{} {}: {}; refusing to write over it", flag, shown, why_not_regular(status));
    const fs::path dir = directory_of(out.path);
    const PathStatus dir_status = path_status(dir);
    DPS_CHECK(dir_status.kind == FileKind::kDirectory, ErrorKind::kUsage,
              "{} {}: cannot write there: directory '{}' {}", flag, shown, dir.string(),
              why_not_directory(dir_status));
    DPS_CHECK(writable_directory(dir), ErrorKind::kUsage, "{} {}: directory '{}' is not writable", flag,
              shown, dir.string());
  }
  for (const Entry& out : output_dirs_) {
    std::error_code ec;
    fs::path existing = fs::absolute(out.path, ec);
    while (path_status(existing).kind == FileKind::kMissing && existing.has_parent_path() &&
           existing != existing.parent_path())
      existing = existing.parent_path();
    const PathStatus status = path_status(existing);
    DPS_CHECK(status.kind == FileKind::kDirectory, ErrorKind::kUsage, "{} {}: '{}' {}", out.flag,
              out.path.string(), existing.string(), why_not_directory(status));
    DPS_CHECK(writable_directory(existing), ErrorKind::kUsage, "{} {}: directory '{}' is not writable",
              out.flag, out.path.string(), existing.string());
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Entry& out = outputs_[i];
    // The directories first: "one of the files DIR holds" says more than a rank file's own name.
    for (const Entry& in : input_dirs_) {
      DPS_CHECK(!same_file(out.path, in.path), ErrorKind::kUsage, "{} {} is the input directory {} {}",
                out.flag, out.path.string(), in.flag, in.path.string());
      DPS_CHECK(!(directly_inside(out.path, in.path) && in.names(out.path.filename().string())),
                ErrorKind::kUsage, "{} {} is one of the files the input {} {} holds: it would be overwritten",
                out.flag, out.path.string(), in.flag, in.path.string());
    }
    for (const Entry& in : inputs_)
      DPS_CHECK(!same_file(out.path, in.path), ErrorKind::kUsage,
                "{} {} is the same file as the input {} {}: it would be overwritten", out.flag,
                out.path.string(), in.flag, in.path.string());
    for (size_t j = 0; j < i; ++j)
      DPS_CHECK(!same_file(out.path, outputs_[j].path), ErrorKind::kUsage,
                "{} {} is the same file as {} {}: give them different names", out.flag, out.path.string(),
                outputs_[j].flag, outputs_[j].path.string());
    for (const Entry& dir : output_dirs_)
      DPS_CHECK(
          !(directly_inside(out.path, dir.path) && dir.names(out.path.filename().string())),
          ErrorKind::kUsage,
          "{} {} is a name {} {} writes its own files under (and deletes old ones): choose another name",
          out.flag, out.path.string(), dir.flag, dir.path.string());
  }
  for (const Entry& dir : output_dirs_)
    for (const Entry& in : inputs_)
      DPS_CHECK(
          !(directly_inside(in.path, dir.path) && dir.names(in.path.filename().string())), ErrorKind::kUsage,
          "the input {} {} is a file {} {} writes and deletes: copy it elsewhere or choose another directory",
          in.flag, in.path.string(), dir.flag, dir.path.string());
}

}  // namespace dpscope
