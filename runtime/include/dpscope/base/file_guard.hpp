// The file guards every reader and writer of dpscope goes through (docs/reliability.md).
//
// Input guard: InputFile::open() opens a file for reading only when it is a regular file, and never
// blocks on the way: a FIFO, a socket or a device named as an input is refused with its kind
// ("is a FIFO (named pipe), not a regular file") instead of waiting forever for a writer, and the
// reason a path cannot be read is the true one (no such file, a directory, a symlink loop, ...).
//
// Output guard: OutputGuard collects what a command reads and what it will write, and check()
// refuses, before any work starts, an output that is an input (by any spelling, a hard link
// included), another output, a file an output directory writes (a checkpoint's name inside
// --checkpoint-dir), a directory, or anything that exists and is not a regular file — except a
// device the user named on purpose under /dev (/dev/stdout, /dev/null), which is written in place.
// AtomicFileWriter (base/atomic_file.hpp) writes the files themselves and never renames over
// anything that is not a regular file.
//
// Used by: the npy, safetensors and checkpoint readers, the trace readers and followers, the
// lesson loader; train's outputs, trace merge and export, dpscope-viz --screenshot/--stage-boxes,
// lesson handout, bench --trace.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace dpscope {

// What is at a path (symlinks followed).
enum class FileKind {
  kMissing,
  kRegular,
  kDirectory,
  kFifo,
  kSocket,
  kCharDevice,
  kBlockDevice,
  kUnreadable
};

struct PathStatus {
  FileKind kind = FileKind::kMissing;
  uint64_t size_bytes = 0;  // regular files
  int error = 0;            // errno of stat() when kind is kMissing or kUnreadable (ENOENT, ELOOP, EACCES)
};

PathStatus path_status(const std::filesystem::path& path);

// "a directory", "a FIFO (named pipe)", "a character device", ...: for error messages.
std::string describe_kind(FileKind kind);

// Why `status` is not a readable regular file, as the end of an error line ("no such file",
// "is a directory", "is a FIFO (named pipe), not a regular file", "too many levels of symbolic
// links"); "" for a regular file.
std::string why_not_regular(const PathStatus& status);

// Why `path` cannot be read as a regular file, "" when it can: why_not_regular() of its status, and
// "is a symbolic link to a missing file" for a dangling link. Never opens the path.
std::string why_not_readable(const std::filesystem::path& path);

// A regular file open for reading (O_RDONLY | O_CLOEXEC), closed by the destructor.
class InputFile {
 public:
  // Opens `path` without blocking: stat first, then open(O_NONBLOCK) and fstat again (the path may
  // have been replaced in between), then blocking reads again. Throws Error(kIo)
  // "cannot read WHAT 'PATH': REASON" when it is not a regular file, cannot be opened, or holds
  // more than `max_bytes`. `what` names the file for the user ("trace", "lesson file", "--init").
  static InputFile open(const std::filesystem::path& path, std::string_view what,
                        uint64_t max_bytes = std::numeric_limits<uint64_t>::max());

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  uint64_t size_bytes() const { return size_bytes_; }
  // Gives the descriptor to the caller, who closes it.
  int release();
  // The whole file (at most the size it had when opened).
  std::string read_all(std::string_view what) const;

 private:
  InputFile(int fd, uint64_t size_bytes, std::string path)
      : fd_(fd), size_bytes_(size_bytes), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_bytes_ = 0;
  std::string path_;
};

// Opens `path` for writing with `flags` (O_WRONLY and O_APPEND, or O_CREAT | O_TRUNC, ...) without
// ever waiting: O_NONBLOCK for the open only, so a FIFO no process reads fails at once (ENXIO)
// instead of blocking until a reader comes; writes block as usual. The descriptor, or -1 with errno
// set. Used where a file is written in place (a device, a trace a viewer follows).
int open_output_without_waiting(const std::filesystem::path& path, int flags);

// True for an output that is written in place rather than replaced: a character device the user
// named under /dev (/dev/null, /dev/tty), or a descriptor the process holds, whatever it is (a pipe
// too: /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N). Anything else that exists and is not a
// regular file (a FIFO made under /dev/shm too) is refused by OutputGuard and by AtomicFileWriter;
// OutputGuard also opens such a device once, so one that cannot take writes is refused before work.
bool written_in_place(const std::filesystem::path& path);

// Everything a command reads and writes, checked together before any work starts.
class OutputGuard {
 public:
  // Which file names inside an output directory the command writes there (checkpoint-*.safetensors).
  using NameFilter = std::function<bool(std::string_view file_name)>;

  // `flag` names the path for the user: "--init", "--data", "the input trace", "OUT".
  void add_input(std::string flag, std::filesystem::path path);
  // An input directory whose files named by `reads` are read (a rank directory's rank-K.jsonl).
  void add_input_dir(std::string flag, std::filesystem::path dir, NameFilter reads);
  // A file the command will write (replaced atomically, or written in place when written_in_place()).
  void add_output(std::string flag, std::filesystem::path path);
  // A directory the command creates if needed and writes the files named by `writes` into.
  void add_output_dir(std::string flag, std::filesystem::path dir, NameFilter writes);

  // Throws Error(kUsage) naming the flag, the path and the reason for the first problem found:
  //  - an output file: its directory exists and is writable; it is not a directory, and anything
  //    that exists and is not a regular file is refused unless written_in_place();
  //  - an output directory: a directory or creatable inside the nearest existing one (writable);
  //  - no output is an input (same file by any spelling or hard link; a file an input directory
  //    reads), another output, or a file an output directory writes.
  void check() const;

 private:
  struct Entry {
    std::string flag;
    std::filesystem::path path;
    NameFilter names;  // directories only
  };
  std::vector<Entry> inputs_;
  std::vector<Entry> input_dirs_;
  std::vector<Entry> outputs_;
  std::vector<Entry> output_dirs_;
};

}  // namespace dpscope
