// JSON text helpers shared by the trace writer and the Chrome exporter.
#pragma once

#include <charconv>
#include <concepts>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace dpscope {

// Appends `text` to `out` as a JSON string literal (quotes and escapes included).
void append_json_string(fmt::memory_buffer& out, std::string_view text);
// Appends a JSON number (finite values in shortest round-trip form; NaN/inf as null).
void append_json_number(fmt::memory_buffer& out, double value);

// The trace writer's hot path: a line is appended piece by piece, with no format string to parse
// and no out-of-line call per piece (fmt's append is one).
// Appends `text` as it is.
inline void append_raw(fmt::memory_buffer& out, std::string_view text) {
  const size_t at = out.size();
  out.resize(at + text.size());
  if (!text.empty()) std::memcpy(out.data() + at, text.data(), text.size());
}
// Appends an integer in decimal.
template <std::integral T>
void append_json_int(fmt::memory_buffer& out, T value) {
  const size_t at = out.size();
  out.resize(at + 24);  // 20 digits and a sign at most
  const std::to_chars_result r = std::to_chars(out.data() + at, out.data() + out.size(), value);
  out.resize(static_cast<size_t>(r.ptr - out.data()));
}

}  // namespace dpscope
