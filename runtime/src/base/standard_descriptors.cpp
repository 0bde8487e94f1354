// hold_closed_standard_descriptors() (base/standard_descriptors.hpp).
#include "dpscope/base/standard_descriptors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

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

}  // namespace dpscope
