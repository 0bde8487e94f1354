// A TCP port for tests that start a TCPStore or `dpscope launch` (MASTER_PORT).
#pragma once

#include "dpscope/base/free_port.hpp"

namespace dpscope::testing {

// A port on 127.0.0.1 that nobody listens on now, below the kernel's ephemeral range, so no
// process's outgoing connection takes it before the test's ranks bind it (base/free_port.hpp).
inline int free_port() { return free_loopback_port(); }

}  // namespace dpscope::testing
