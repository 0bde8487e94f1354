// JSON text helpers shared by the trace writer and the Chrome exporter.
#pragma once

#include <string_view>

#include <fmt/format.h>

namespace dpscope {

// Appends `text` to `out` as a JSON string literal (quotes and escapes included).
void append_json_string(fmt::memory_buffer& out, std::string_view text);
// Appends a JSON number (finite values in shortest round-trip form; NaN/inf as null).
void append_json_number(fmt::memory_buffer& out, double value);

}  // namespace dpscope
