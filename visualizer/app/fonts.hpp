// Fonts for dpscope-viz: DejaVu Sans (regular, bold) from assets/fonts or Debian's fonts-dejavu,
// with ImGui's built-in font as the fallback, at the monitor's content scale (HiDPI) — once at
// normal size and once at presentation size, so switching modes needs no atlas rebuild.
#pragma once

#include <string>

#include "ui/view.hpp"

namespace dpscope::viz {

struct FontSet {
  Fonts normal;
  Fonts present;
  std::string source;  // the TTF used, or "ImGui default font"
};

// Adds the fonts to the current ImGui context's atlas (cleared first) and builds it.
FontSet load_fonts(float content_scale);

}  // namespace dpscope::viz
