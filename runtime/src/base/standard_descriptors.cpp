// The standard descriptors at a program's start and end (base/standard_descriptors.hpp).
#include "dpscope/base/standard_descriptors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dpscope {

void hold_closed_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int held = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // the lowest free descriptor: `fd`
    if (held > fd) {
      ::dup2(held, fd);  // dup2 leaves FD_CLOEXEC off: children inherit the held descriptor too
      ::close(held);
    }
  }
}

Error output_lost(std::string_view stream, int err, std::string_view what) {
  return Error(ErrorKind::kWriteFailed, fmt::format("cannot write {}: {} ({})", stream,
                                                    err != 0 ? std::strerror(err) : "a write failed", what));
}

void check_standard_output_written(std::string_view what) {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) throw output_lost("standard output", errno, what);
}

}  // namespace dpscope
