// A temporary directory for one process's lesson runs: `dpscope lesson check` keeps its traces and
// scratch directories there, dpscope-viz's lesson mode its re-runs. Nothing is left behind on any
// way out (docs/lessons.md, "Limits"; docs/reliability.md, "Lessons"):
//   - a normal return or an exception: the destructor removes it;
//   - SIGINT or SIGTERM, once remove_on_signal() was called: a watcher thread ends the process's
//     children and parks its other threads (either would write into it, and make it, again),
//     removes it, then the signal ends the process as it would have (same status);
//   - SIGKILL, a crash, a power cut: the next TempRunDir of the same prefix sweeps the directories
//     of processes that no longer run (the PID is in the name; io/atomic_file.cpp's
//     remove_stale_temp_files() sweeps its temporary files the same way).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dpscope::lesson {

class TempRunDir {
 public:
  // Sweeps PARENT/PREFIX-<pid>-* of dead processes, then makes PARENT/PREFIX-<pid>-XXXXXX with
  // mkdtemp (mode 0700, a fresh name: never an existing directory or a planted link). Throws
  // Error(kIo) when it cannot be made.
  explicit TempRunDir(std::string_view prefix,
                      const std::filesystem::path& parent = std::filesystem::temp_directory_path());
  ~TempRunDir();
  TempRunDir(const TempRunDir&) = delete;
  TempRunDir& operator=(const TempRunDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // From now on SIGINT and SIGTERM remove the directory before they end the process. Installs
  // process-wide handlers (once; a signal that is ignored, as under nohup, stays ignored) and a
  // watcher thread; the directory leaves the list when this object is destroyed.
  void remove_on_signal();

 private:
  std::filesystem::path path_;
  bool on_signal_ = false;
};

// Removes PARENT/PREFIX-<pid>-* and PARENT/PREFIX-<pid> directories owned by this user whose process
// no longer runs (kill(pid, 0) fails with ESRCH); links are never followed. Returns what it removed.
std::vector<std::filesystem::path> remove_stale_run_dirs(const std::filesystem::path& parent,
                                                         std::string_view prefix);

}  // namespace dpscope::lesson
