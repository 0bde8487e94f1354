// Control characters written out before text reaches a terminal (base/terminal_text.hpp).
#include "dpscope/base/terminal_text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dpscope {

std::string printable_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (byte == '\n') {
      out += "\\n";
    } else if (byte == '\t') {
      out += "\\t";
    } else if (byte == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else if (byte == 0xc2 && next >= 0x80 && next <= 0x9f) {
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += static_cast<char>(byte);
    }
  }
  return out;
}

std::string printable_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    out += printable_line(text.substr(begin, end - begin));
    if (end < text.size()) out += '\n';
    begin = end + 1;
  }
  return out;
}

}  // namespace dpscope
