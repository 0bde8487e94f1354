// JSON text helpers (trace writer, Chrome export).
#include "dpscope/trace_tools/json_text.hpp"

#include <cmath>
#include <cstdint>

namespace dpscope {

namespace {
// True for the characters a JSON string literal must escape.
bool needs_escape(char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; }
}  // namespace

void append_json_string(fmt::memory_buffer& out, std::string_view text) {
  out.push_back('"');
  // Runs of plain characters (all of a trace's names, in practice) are appended whole.
  const char* run = text.data();
  const char* const end = text.data() + text.size();
  for (const char* p = run; p != end; ++p) {
    const char c = *p;
    if (!needs_escape(c)) continue;
    append_raw(out, std::string_view(run, static_cast<size_t>(p - run)));
    run = p + 1;
    switch (c) {
      case '"': out.append(std::string_view("\\\"")); break;
      case '\\': out.append(std::string_view("\\\\")); break;
      case '\n': out.append(std::string_view("\\n")); break;
      case '\r': out.append(std::string_view("\\r")); break;
      case '\t': out.append(std::string_view("\\t")); break;
      default: fmt::format_to(fmt::appender(out), "\\u{:04x}", static_cast<unsigned>(c));
    }
  }
  append_raw(out, std::string_view(run, static_cast<size_t>(end - run)));
  out.push_back('"');
}

void append_json_number(fmt::memory_buffer& out, double value) {
  if (!std::isfinite(value)) {
    append_raw(out, "null");
  } else if (value == std::floor(value) && std::fabs(value) < 9e15) {
    append_json_int(out, static_cast<int64_t>(value));
  } else {
    fmt::format_to(fmt::appender(out), "{}", value);
  }
}

}  // namespace dpscope
