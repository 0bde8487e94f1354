// Child processes (base/process.hpp): run_process() and wait_process() bound their wait, and a child
// that runs past its time is killed with everything it started (a viewer under xvfb-run, a Python's
// own children), not left behind as an orphan.
#include "dpscope/base/process.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
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

}  // namespace
}  // namespace dpscope
