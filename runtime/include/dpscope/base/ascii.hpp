// ASCII case for the words a user types (flags' values, environment variables, names in a file):
// "NVLS" and "nvls" are one algorithm. Only A-Z change; other bytes (UTF-8 included) pass as they are,
// whatever the locale.
#pragma once

#include <string>
#include <string_view>

namespace dpscope {

inline std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace dpscope
