// AtomicFileWriter: writes a file so that a crash never leaves it half-written.
//
// Bytes go to a temporary file next to the destination ("<name>.tmp.<pid>.<n>", same directory, so
// the final rename stays on one filesystem); commit() flushes it to disk (fsync), renames it over
// the destination (atomic on POSIX) and fsyncs the directory so the rename itself survives a crash.
// Until commit() the destination is untouched; a writer destroyed without commit() (an exception
// while serializing, a full disk) removes its temporary file.
// It never renames over anything that is not a regular file: a destination that exists as a
// directory, a FIFO, a socket or a device is refused (Error(kUsage)), except a device the user named
// under /dev (written_in_place() in base/file_guard.hpp: /dev/stdout, /dev/null), which is written
// in place, appended to, with nothing renamed.
// A writer killed before commit() (SIGKILL, power loss) leaves its temporary file behind;
// remove_stale_temp_files() sweeps those of processes that no longer exist (checkpointing calls it
// on every save).
// Used by save_npy, save_safetensors, checkpointing, trace merge and export, dpscope-viz's
// screenshots and lesson handouts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace dpscope {

class AtomicFileWriter {
 public:
  // Creates the temporary file (or opens the device); throws Error(kIo) naming `path` when the
  // directory is not writable, Error(kUsage) when `path` is not a regular file nor a device.
  explicit AtomicFileWriter(std::filesystem::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends bytes; throws Error(kWriteFailed, exit code 1) with the system's reason on a failed
  // write (disk full, ...); commit() likewise when fsync, close or the rename fails.
  void write(const void* data, uint64_t size_bytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // fsync + rename over the destination + fsync of the directory (in place: close). Call once.
  void commit();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_path_; }  // empty when in place
  bool in_place() const { return in_place_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  void discard() noexcept;

  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
  bool in_place_ = false;
};

// Removes the files in `dir` named "<name>.tmp.<pid>.<n>" (an AtomicFileWriter's temporary file)
// whose <name> starts with `name_prefix` and whose writer process <pid> no longer runs; a live
// process's files (a write in progress) are left alone. Returns the files removed. Best effort: a
// file that cannot be removed stays and is not reported.
std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& dir,
                                                           std::string_view name_prefix);

}  // namespace dpscope
