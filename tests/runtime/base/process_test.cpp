// Child processes (base/process.hpp): run_process() and wait_process() bound their wait, and a child
// that runs past its time is killed with everything it started (a viewer under xvfb-run, a Python's
// own children), not left behind as an orphan.
#include "dpscope/base/process.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "support/temp_files.hpp"

namespace dpscope {
namespace {

// Whether `pid` still runs: there, and not a zombie waiting for its parent.
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

TEST(Process, RunProcessReturnsTheExitStatus) {
  testing::TempDir dir;
  EXPECT_EQ(run_process({"/bin/sh", "-c", "exit 3"}, dir / "log"), 3);
  EXPECT_EQ(run_process({"/bin/sh", "-c", "exit 0"}, dir / "log", 10.0), 0);
  EXPECT_EQ(run_process({"/nonexistent/program"}, dir / "log"), -1);  // could not start
}

TEST(Process, AChildPastItsTimeIsKilledWithWhatItStarted) {
  testing::TempDir dir;
  const std::string pid_file = dir / "grandchild.pid";
  const auto begun = std::chrono::steady_clock::now();
  const int status =
      run_process({"/bin/sh", "-c", "sleep 60 & echo $! > '" + pid_file + "'; wait"}, dir / "log", 0.5);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  EXPECT_EQ(status, -1);
  EXPECT_LT(waited, 10.0);
  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild) << "the child did not start its own child";
  for (int i = 0; i < 200 && running(grandchild); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(running(grandchild)) << "the grandchild " << grandchild << " was left behind";
  if (running(grandchild)) ::kill(grandchild, SIGKILL);
}

// What Process.StopChildrenEndsEveryChildAndWhatItStarted runs in a process of its own: from
// stop_children() on, a process counts as ending. 0 when all went as it should, else the check
// that failed.
int stop_children_scenario(const std::string& dir) {
  const pid_t stubborn = spawn_process({"/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done"}, {});
  const std::string pid_file = dir + "/grandchild.pid";
  const pid_t leader = spawn_process(
      {"/bin/sh", "-c",
       "sleep 60 & echo $! > '" + pid_file + ".tmp'; mv '" + pid_file + ".tmp' '" + pid_file + "'; wait"},
      {}, /*own_group=*/true);
  pid_t grandchild = 0;
  for (int i = 0; i < 1000 && grandchild == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream(pid_file) >> grandchild;
  }
  if (stubborn <= 0 || leader <= 0 || grandchild == 0) return 1;
  const auto begun = std::chrono::steady_clock::now();
  stop_children(0.5);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  if (running(stubborn)) return 2;  // it ignores SIGTERM: SIGKILL after the grace
  if (running(leader) || running(grandchild)) return 3;
  if (waited < 0.4 || waited > 8.0) return 4;
  // A thread that waits for a child stop_children() ended does not go on to report it: it waits
  // for the process's end.
  std::atomic<bool> returned{false};
  std::thread([&returned, leader] {
    wait_process(leader);
    returned = true;
  }).detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (returned) return 5;
  // Nor is a child started any more: stop_children() would not see it, and it would outlive the
  // cleanup it was stopped for.
  return spawn_process({"/bin/true"}, {}) == -1 ? 0 : 6;
}

// A process ending on a signal ends its children first (lesson/run_dir.cpp): SIGTERM to each, to
// the whole group of one that leads its own, and SIGKILL to one that ignores SIGTERM.
TEST(Process, StopChildrenEndsEveryChildAndWhatItStarted) {
  testing::TempDir dir;
  EXPECT_EXIT(std::_Exit(stop_children_scenario(dir.path().string())), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dpscope
