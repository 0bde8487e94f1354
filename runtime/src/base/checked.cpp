// Host-memory checks for checked.hpp: refuse an allocation that cannot fit before making it.
#include "dpscope/base/checked.hpp"

#include <unistd.h>

#include "dpscope/base/format_bytes.hpp"

namespace dpscope {

uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_bytes = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) return 0;
  uint64_t total = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(pages), static_cast<uint64_t>(page_bytes), &total))
    return UINT64_MAX;
  return total;
}

void check_fits_in_host_memory(uint64_t bytes, std::string_view what, ErrorKind kind) {
  const uint64_t available = host_memory_bytes();
  if (available == 0) return;  // unknown: let the allocation decide
  DPS_CHECK(bytes <= available, kind, "{} needs {} of host memory; this machine has {}", what,
            format_bytes(bytes), format_bytes(available));
}

}  // namespace dpscope
