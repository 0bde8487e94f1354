// round_to_fp16(): a float rounded to the nearest IEEE binary16 value (ties to even) and back, as
// a cast to torch.float16 and back does. DDP's fp16 compression hook uses it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dpscope {

inline float round_to_fp16(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  if (a >= 65520.0f) return std::copysign(INFINITY, x);  // rounds past the largest half, 65504
  // Spacing of representable halves around |x|: 2^(e-10) for normals, 2^-24 for subnormals.
  int exponent = 0;
  std::frexp(a, &exponent);  // a = m * 2^exponent, m in [0.5, 1)
  const int e = std::max(exponent - 1, -14);
  const float ulp = std::ldexp(1.0f, e - 10);
  // nearbyint rounds half to even in the default rounding mode.
  return std::copysign(std::nearbyint(a / ulp) * ulp, x);
}

}  // namespace dpscope
