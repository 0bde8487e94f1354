// Human-readable byte counts, shared by error messages, the CLI and the visualizer.
#pragma once

#include <cstdint>
#include <string>

namespace dpscope {

// "1.50 GiB", "512.00 KiB", "12 B".
std::string format_bytes(uint64_t bytes);

}  // namespace dpscope
