// SeededRng transforms (see data/rng.hpp).
#include "dpscope/data/rng.hpp"

#include <cmath>
#include <numbers>

namespace dpscope {

double SeededRng::uniform() {
  const uint64_t a = next_u32() >> 5;                                          // 27 bits
  const uint64_t b = next_u32() >> 6;                                          // 26 bits
  return static_cast<double>(a * 67108864u + b) * (1.0 / 9007199254740992.0);  // / 2^53
}

double SeededRng::uniform(double low, double high) { return low + (high - low) * uniform(); }

double SeededRng::normal() {
  const double u1 = uniform();
  const double u2 = uniform();
  // 1 - u1 lies in (0, 1], so the logarithm is finite.
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double SeededRng::normal(double mean, double stddev) { return mean + stddev * normal(); }

}  // namespace dpscope
