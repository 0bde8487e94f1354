// Colour-vision simulation and CIEDE2000 (sources in color_vision.hpp).
#include "ui/color_vision.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dpscope::viz {

namespace {

using Matrix = double[3][3];

// Machado et al. 2009, table of simulation matrices, severity 1.0 (linear RGB in, linear RGB out).
constexpr Matrix kProtanopia = {
    {0.152286, 1.052583, -0.204868}, {0.114503, 0.786281, 0.099216}, {-0.003882, -0.048116, 1.051998}};
constexpr Matrix kDeuteranopia = {
    {0.367322, 0.860646, -0.227968}, {0.280085, 0.672501, 0.047413}, {-0.011820, 0.042940, 0.968881}};
constexpr Matrix kTritanopia = {
    {1.255528, -0.076749, -0.178779}, {-0.078411, 0.930809, 0.147602}, {0.004733, 0.691367, 0.303900}};

double to_linear(uint8_t channel) {
  const double c = channel / 255.0;
  return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
}

double radians(double degrees) { return degrees * std::numbers::pi / 180.0; }
double degrees(double radians) { return radians * 180.0 / std::numbers::pi; }

Lab linear_to_lab(const double rgb[3]) {
  // sRGB primaries, D65 (IEC 61966-2-1).
  const double x = 0.4124564 * rgb[0] + 0.3575761 * rgb[1] + 0.1804375 * rgb[2];
  const double y = 0.2126729 * rgb[0] + 0.7151522 * rgb[1] + 0.0721750 * rgb[2];
  const double z = 0.0193339 * rgb[0] + 0.1191920 * rgb[1] + 0.9503041 * rgb[2];
  constexpr double kXn = 0.95047, kYn = 1.0, kZn = 1.08883;
  constexpr double kDelta = 6.0 / 29.0;
  auto f = [](double t) {
    return t > kDelta * kDelta * kDelta ? std::cbrt(t) : t / (3 * kDelta * kDelta) + 4.0 / 29.0;
  };
  const double fx = f(x / kXn), fy = f(y / kYn), fz = f(z / kZn);
  return Lab{116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)};
}

}  // namespace

const char* to_string(ColorVision vision) {
  switch (vision) {
    case ColorVision::kNormal: return "normal vision";
    case ColorVision::kProtanopia: return "protanopia";
    case ColorVision::kDeuteranopia: return "deuteranopia";
    case ColorVision::kTritanopia: return "tritanopia";
  }
  return "?";
}

Lab to_lab(Rgb8 color) { return seen_as(color, ColorVision::kNormal); }

Lab seen_as(Rgb8 color, ColorVision vision) {
  const double in[3] = {to_linear(color.r), to_linear(color.g), to_linear(color.b)};
  const Matrix* m = nullptr;
  switch (vision) {
    case ColorVision::kNormal: return linear_to_lab(in);
    case ColorVision::kProtanopia: m = &kProtanopia; break;
    case ColorVision::kDeuteranopia: m = &kDeuteranopia; break;
    case ColorVision::kTritanopia: m = &kTritanopia; break;
  }
  double out[3];
  for (int i = 0; i < 3; ++i)
    out[i] = std::clamp((*m)[i][0] * in[0] + (*m)[i][1] * in[1] + (*m)[i][2] * in[2], 0.0, 1.0);
  return linear_to_lab(out);
}

double ciede2000(Lab x, Lab y) {
  // Sharma et al. 2005, equations (1)-(22).
  const double c1 = std::hypot(x.a, x.b);
  const double c2 = std::hypot(y.a, y.b);
  const double c_mean7 = std::pow((c1 + c2) / 2, 7);
  const double g = 0.5 * (1 - std::sqrt(c_mean7 / (c_mean7 + std::pow(25.0, 7))));
  const double a1 = (1 + g) * x.a;
  const double a2 = (1 + g) * y.a;
  const double cp1 = std::hypot(a1, x.b);
  const double cp2 = std::hypot(a2, y.b);
  auto hue = [](double b, double a) {
    if (a == 0 && b == 0) return 0.0;
    const double h = degrees(std::atan2(b, a));
    return h < 0 ? h + 360 : h;
  };
  const double h1 = hue(x.b, a1);
  const double h2 = hue(y.b, a2);
  const bool achromatic = cp1 * cp2 == 0;

  const double dl = y.l - x.l;
  const double dc = cp2 - cp1;
  double dh = 0;
  if (!achromatic) {
    dh = h2 - h1;
    if (dh > 180) dh -= 360;
    if (dh < -180) dh += 360;
  }
  const double d_big_h = 2 * std::sqrt(cp1 * cp2) * std::sin(radians(dh / 2));

  const double l_mean = (x.l + y.l) / 2;
  const double cp_mean = (cp1 + cp2) / 2;
  double h_mean = h1 + h2;
  if (!achromatic) {
    if (std::fabs(h1 - h2) <= 180) {
      h_mean = (h1 + h2) / 2;
    } else {
      h_mean = h1 + h2 < 360 ? (h1 + h2 + 360) / 2 : (h1 + h2 - 360) / 2;
    }
  }
  const double t = 1 - 0.17 * std::cos(radians(h_mean - 30)) + 0.24 * std::cos(radians(2 * h_mean)) +
                   0.32 * std::cos(radians(3 * h_mean + 6)) - 0.20 * std::cos(radians(4 * h_mean - 63));
  const double d_theta = 30 * std::exp(-std::pow((h_mean - 275) / 25, 2));
  const double cp_mean7 = std::pow(cp_mean, 7);
  const double rc = 2 * std::sqrt(cp_mean7 / (cp_mean7 + std::pow(25.0, 7)));
  const double sl = 1 + 0.015 * std::pow(l_mean - 50, 2) / std::sqrt(20 + std::pow(l_mean - 50, 2));
  const double sc = 1 + 0.045 * cp_mean;
  const double sh = 1 + 0.015 * cp_mean * t;
  const double rt = -std::sin(radians(2 * d_theta)) * rc;
  const double tl = dl / sl, tc = dc / sc, th = d_big_h / sh;
  return std::sqrt(tl * tl + tc * tc + th * th + rt * tc * th);
}

}  // namespace dpscope::viz
