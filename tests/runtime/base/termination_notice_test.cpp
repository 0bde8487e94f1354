// The line a rank prints when its launcher stops it (base/termination_notice.hpp), checked in a
// forked child whose stderr is a pipe: the armed line, the process's own error once it has one
// (the first one kept), nothing extra after hold_termination(), and SIGTERM's own end either way.
#include "dpscope/base/termination_notice.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <string>

namespace dpscope {
namespace {

struct Ended {
  std::string err;
  int status = 0;
};

// Runs `body` in a child with stderr to a pipe; returns what it wrote and how it ended.
Ended in_child(const std::function<void()>& body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    body();
    ::_exit(7);
  }
  ::close(fds[1]);
  Ended e;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) e.err.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, &e.status, 0);
  return e;
}

TEST(TerminationNotice, AStoppedRankSaysTheArmedLineAndEndsBySigterm) {
  const Ended e = in_child([] {
    arm_termination_notice("dpscope: error: rank 1 was stopped by SIGTERM\n");
    ::raise(SIGTERM);
  });
  EXPECT_EQ(e.err, "dpscope: error: rank 1 was stopped by SIGTERM\n");
  ASSERT_TRUE(WIFSIGNALED(e.status));
  EXPECT_EQ(WTERMSIG(e.status), SIGTERM);
}

TEST(TerminationNotice, ARankWithItsOwnErrorSaysThatErrorTheFirstOneOnOneLine) {
  const Ended e = in_child([] {
    arm_termination_notice("dpscope: error: rank 0 was stopped by SIGTERM\n");
    own_error_on_termination("ompi-server could not start:\nit exited with status 1");
    own_error_on_termination("a later error, caused by the first");
    ::raise(SIGTERM);
  });
  EXPECT_EQ(e.err, "dpscope: error: ompi-server could not start: it exited with status 1\n");
  ASSERT_TRUE(WIFSIGNALED(e.status));
}

TEST(TerminationNotice, OutsideAJobNothingIsPrinted) {
  const Ended e = in_child([] {
    own_error_on_termination("an error");  // not armed: not a rank of a job
    ::signal(SIGTERM, SIG_DFL);
    ::raise(SIGTERM);
  });
  EXPECT_EQ(e.err, "");
  ASSERT_TRUE(WIFSIGNALED(e.status));
}

TEST(TerminationNotice, OnceHeldTheProcessPrintsAndExitsItsOwnWay) {
  const Ended e = in_child([] {
    arm_termination_notice("dpscope: error: rank 0 was stopped by SIGTERM\n");
    hold_termination();
    ::raise(SIGTERM);
    const char line[] = "dpscope: error: its own line\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line, sizeof line - 1);
    ::_exit(1);
  });
  EXPECT_EQ(e.err, "dpscope: error: its own line\n");
  ASSERT_TRUE(WIFEXITED(e.status));
  EXPECT_EQ(WEXITSTATUS(e.status), 1);
}

// An error quoting a trace's text: its escape sequence is written out, not sent to the terminal.
TEST(TerminationNotice, ARanksOwnErrorWritesOutControlCharacters) {
  const Ended e = in_child([] {
    arm_termination_notice("dpscope: error: rank 0 was stopped by SIGTERM\n");
    own_error_on_termination("'ProfilerStep#\x1b[31m5' has no step number");
    ::raise(SIGTERM);
  });
  EXPECT_EQ(e.err, "dpscope: error: 'ProfilerStep#\\x1b[31m5' has no step number\n");
  ASSERT_TRUE(WIFSIGNALED(e.status));
}

}  // namespace
}  // namespace dpscope
