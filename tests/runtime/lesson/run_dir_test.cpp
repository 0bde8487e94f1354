// Temporary run directories (lesson/run_dir.hpp): made fresh, removed by the destructor and by
// SIGTERM, and a dead process's directory swept by the next one. `dpscope lesson check` once left
// /tmp/dpscope-lesson-check-PID behind when killed (339 MB once);
// LessonCli.CheckLeavesNoTemporaryDirectoryBehind proves it on the command.
#include "dpscope/lesson/run_dir.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "lesson_test_util.hpp"

namespace dpscope::lesson {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A PID that ran and no longer does.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(TempRunDir, IsFreshPrivateAndRemovedByItsDestructor) {
  const fs::path parent = testing::scratch_dir();
  fs::path made;
  {
    TempRunDir dir("dpscope-test", parent);
    made = dir.path();
    EXPECT_EQ(made.parent_path(), parent);
    EXPECT_TRUE(made.filename().string().starts_with(fmt::format("dpscope-test-{}-", ::getpid())));
    EXPECT_EQ(fs::status(made).permissions(), fs::perms::owner_all);
    testing::write_file(made / "a.jsonl", "x");
    fs::create_directories(made / "sub" / "deeper");
  }
  EXPECT_FALSE(fs::exists(made));
}

TEST(TempRunDir, SweepsTheDirectoriesOfProcessesThatNoLongerRun) {
  const fs::path parent = testing::scratch_dir();
  const pid_t dead = dead_pid();
  const std::string old_style = fmt::format("dpscope-test-{}", dead);  // the older naming: no suffix
  const std::string new_style = fmt::format("dpscope-test-{}-a1b2c3", dead);
  const std::string live = fmt::format("dpscope-test-{}-d4e5f6", ::getppid());
  const std::string other_prefix = fmt::format("dpscope-other-{}-a1b2c3", dead);
  const std::string not_a_pid = "dpscope-test-12x-a1b2c3";
  for (const std::string& name : {old_style, new_style, live, other_prefix, not_a_pid})
    fs::create_directories(parent / name / "ckpt");
  fs::create_directory_symlink(parent / live, parent / fmt::format("dpscope-test-{}-linked", dead));
  {
    TempRunDir dir("dpscope-test", parent);
    std::vector<std::string> expected = {dir.path().filename().string(), live, other_prefix, not_a_pid};
    expected.push_back(fmt::format("dpscope-test-{}-linked", dead));  // a link is never followed nor removed
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(names_in(parent), expected);
  }
  EXPECT_TRUE(fs::exists(parent / live / "ckpt"));
}

struct Stopped {
  int status = -1;                 // the child's wait status
  std::vector<std::string> names;  // what `parent` held when SIGTERM was sent
};

// Forks a child that makes a TempRunDir in `parent` with remove_on_signal(), calls `start(dir)`
// and waits; sends it SIGTERM once `start` has returned (and `delay` later).
Stopped stop_child_with_sigterm(const fs::path& parent, const std::function<void(const TempRunDir&)>& start,
                                std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
  Stopped stopped;
  int ready[2];
  if (::pipe(ready) != 0) return stopped;
  const pid_t child = ::fork();
  if (child == 0) {
    TempRunDir dir("dpscope-test", parent);
    dir.remove_on_signal();
    start(dir);
    const char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
    for (;;) ::pause();
  }
  char byte = 0;
  const bool started = ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  ::close(ready[1]);
  std::this_thread::sleep_for(delay);
  stopped.names = names_in(parent);
  ::kill(child, SIGTERM);
  int status = 0;
  if (::waitpid(child, &status, 0) == child && started) stopped.status = status;
  return stopped;
}

// SIGTERM (and SIGINT) remove the directory, then end the process with the same signal.
TEST(TempRunDir, SigtermRemovesItAndStillEndsTheProcess) {
  const fs::path parent = testing::scratch_dir();
  const Stopped stopped = stop_child_with_sigterm(
      parent, [](const TempRunDir& dir) { testing::write_file(dir.path() / "trace.jsonl", "x"); });
  EXPECT_EQ(stopped.names.size(), 1u);
  EXPECT_TRUE(WIFSIGNALED(stopped.status) && WTERMSIG(stopped.status) == SIGTERM) << stopped.status;
  EXPECT_TRUE(names_in(parent).empty());
}

// The rest of the process runs on while the signal is handled: a lesson that starts then makes its
// scratch directory, and with it the run directory, again (create_directories makes every missing
// parent); a CI run once found the directory of a check it had stopped. Here threads do nothing else:
// the directory goes all the same, and the process still ends with the signal.
TEST(TempRunDir, SigtermRemovesItWhileOtherThreadsKeepMakingItAgain) {
  const fs::path parent = testing::scratch_dir();
  for (int round = 0; round < 3; ++round) {
    const Stopped stopped = stop_child_with_sigterm(
        parent,
        [](const TempRunDir& dir) {
          static std::atomic<int> running{0};  // static: the threads outlive this call (0 in each child)
          for (int t = 0; t < 3; ++t)
            std::thread([&dir, t] {
              const fs::path scratch = dir.path() / fmt::format("0{}-lesson.scratch", t) / "ckpt";
              running.fetch_add(1);
              for (;;) {
                std::error_code ec;
                fs::create_directories(scratch, ec);
                std::ofstream(scratch / "trace.jsonl") << "x\n";
              }
            }).detach();
          while (running.load() < 3) std::this_thread::yield();
        },
        std::chrono::milliseconds(20));
    EXPECT_EQ(stopped.names.size(), 1u) << "round " << round;
    EXPECT_TRUE(WIFSIGNALED(stopped.status) && WTERMSIG(stopped.status) == SIGTERM)
        << "round " << round << ": " << stopped.status;
    EXPECT_TRUE(names_in(parent).empty())
        << "round " << round << ": " << fmt::format("{}", fmt::join(names_in(parent), ", "));
  }
}

}  // namespace
}  // namespace dpscope::lesson
