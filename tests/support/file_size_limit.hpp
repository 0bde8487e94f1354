// A file-size limit for the current test process: a write past it fails with EFBIG, as a write to a
// full disk fails with ENOSPC, without filling a disk. SIGXFSZ (which would end the process) is
// ignored meanwhile; both are restored when the limit goes out of scope.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdint>

namespace dpscope::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes) {
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_), 0);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    EXPECT_EQ(::sigaction(SIGXFSZ, &ignore, &previous_), 0);
    struct rlimit limit = saved_;
    limit.rlim_cur = static_cast<rlim_t>(bytes);
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::sigaction(SIGXFSZ, &previous_, nullptr);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  struct rlimit saved_ {};
  struct sigaction previous_ {};
};

}  // namespace dpscope::testing
