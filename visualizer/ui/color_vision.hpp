// Colour science for the palette's colour-blindness check: simulate how a colour looks to a viewer
// with protanopia, deuteranopia or tritanopia, and measure how different two colours look
// (CIEDE2000). Pure functions with no ImGui in them; tests/visualizer/palette_test.cpp applies them
// to every pair of colours the viewer asks a student to tell apart (ui/palette.hpp).
//
// Sources (facts, not code):
//   - Machado, Oliveira, Fernandes, "A Physiologically-based Model for Simulation of Color Vision
//     Deficiency", IEEE TVCG 15(6), 2009: the 3x3 matrices at severity 1.0, applied to linear sRGB.
//   - IEC 61966-2-1 (sRGB) transfer function and sRGB -> XYZ matrix, D65 white.
//   - CIE 15:2004 (CIELAB); Sharma, Wu, Dalal, "The CIEDE2000 Color-Difference Formula:
//     Implementation Notes, Supplementary Test Data, and Mathematical Observations", Color Research
//     and Application 30(1), 2005: the formula and its 34 test pairs.
#pragma once

#include <cstdint>

namespace dpscope::viz {

struct Rgb8 {
  uint8_t r = 0, g = 0, b = 0;
};

struct Lab {
  double l = 0, a = 0, b = 0;
};

enum class ColorVision { kNormal, kProtanopia, kDeuteranopia, kTritanopia };
inline constexpr ColorVision kColorVisions[] = {ColorVision::kNormal, ColorVision::kProtanopia,
                                                ColorVision::kDeuteranopia, ColorVision::kTritanopia};
const char* to_string(ColorVision vision);

// An 8-bit sRGB colour as a viewer with `vision` sees it (Machado et al. 2009, severity 1.0), in
// CIELAB (D65). kNormal is the plain conversion.
Lab seen_as(Rgb8 color, ColorVision vision);
// CIELAB of an sRGB colour (D65 white).
Lab to_lab(Rgb8 color);
// The CIEDE2000 colour difference (kL = kC = kH = 1). About 1 is just noticeable side by side; the
// viewer asks for 10 or more between colours that carry different meanings.
double ciede2000(Lab x, Lab y);

}  // namespace dpscope::viz
