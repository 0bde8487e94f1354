// Temporary files for tests. ctest runs every test in its own process, many at once, and the
// release and sanitizer builds share /tmp: a path is unique per process and per test, never fixed.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace dpscope::testing {

// The whole of a file, bytes as they are ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Removes `path` (a file or a directory with everything in it) when this process exits, if every
// test it ran passed: a failed test's files stay for a look, and a passing suite leaves nothing in
// /tmp. Only the process that asked removes (a forked child that exits does not).
inline void remove_at_exit_if_passed(const std::filesystem::path& path) {
  struct Pending {
    std::mutex mutex;
    std::vector<std::filesystem::path> paths;
    pid_t owner = 0;
  };
  static Pending* const pending = new Pending;  // never destroyed: the exit handler uses it
  std::lock_guard lock(pending->mutex);
  if (pending->owner == 0) {
    pending->owner = ::getpid();
    std::atexit([] {
      if (::getpid() != pending->owner || !::testing::UnitTest::GetInstance()->Passed()) return;
      std::lock_guard exit_lock(pending->mutex);
      std::error_code ignored;
      for (const std::filesystem::path& p : pending->paths) std::filesystem::remove_all(p, ignored);
    });
  }
  pending->paths.push_back(path);
}

// `/tmp/dpscope_<pid>_<Suite>.<Test>_<name>`: a path no other test process writes, removed when the
// process exits after its tests passed (remove_at_exit_if_passed).
inline std::filesystem::path unique_temp_path(const std::string& name) {
  std::string test = "no-test";
  if (const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    test = std::string(info->test_suite_name()) + "." + info->name();
    for (char& c : test) c = c == '/' ? '_' : c;  // parametrized names hold '/'
  }
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("dpscope_" + std::to_string(::getpid()) + "_" + test + "_" + name);
  remove_at_exit_if_passed(path);
  return path;
}

// A fresh, empty directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "dir") {
    static std::atomic<int> counter{0};
    path_ = unique_temp_path(tag + "_" + std::to_string(counter.fetch_add(1)));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // Names of the files in the directory, sorted (to check that no temporary file is left over).
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_))
      names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

// A fresh, empty directory for the running test, left in place for a look when a test of this
// process failed (unique_temp_path).
inline std::filesystem::path scratch_dir() {
  const std::filesystem::path dir = unique_temp_path("scratch");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace dpscope::testing
