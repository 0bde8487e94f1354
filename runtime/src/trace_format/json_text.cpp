// JSON text helpers (trace writer, Chrome export).
#include "dpscope/trace_format/json_text.hpp"

#include <cmath>
#include <cstdint>

namespace dpscope {

void append_json_string(fmt::memory_buffer& out, std::string_view text) {
  out.push_back('"');
  for (char c : text) {
    switch (c) {
      case '"': out.append(std::string_view("\\\"")); break;
      case '\\': out.append(std::string_view("\\\\")); break;
      case '\n': out.append(std::string_view("\\n")); break;
      case '\r': out.append(std::string_view("\\r")); break;
      case '\t': out.append(std::string_view("\\t")); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void append_json_number(fmt::memory_buffer& out, double value) {
  if (!std::isfinite(value)) {
    out.append(std::string_view("null"));
  } else if (value == std::floor(value) && std::fabs(value) < 9e15) {
    fmt::format_to(std::back_inserter(out), "{}", static_cast<int64_t>(value));
  } else {
    fmt::format_to(std::back_inserter(out), "{}", value);
  }
}

}  // namespace dpscope
