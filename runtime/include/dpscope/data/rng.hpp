// SeededRng: the reproducible random numbers behind dpscope's synthetic datasets.
//
// std::mt19937 is specified bit for bit by the C++ standard, but std::uniform_real_distribution and
// std::normal_distribution are not (libstdc++, libc++ and MSVC differ), so the transforms are our own:
//   uniform(): genrand_res53 of the mt19937 reference code — (a >> 5, b >> 6) from two draws,
//              (a * 2^26 + b) / 2^53, a double in [0, 1) with 53 random bits;
//   normal():  Box–Muller from two uniforms, sqrt(-2 ln(1 - u1)) * cos(2 pi u2); one value per call
//              (the sine partner is not kept, so the draw order stays simple to document).
// Same seed, same numbers, on every run; across platforms the only freedom left is libm's last-ulp
// rounding of log and cos, which the float32 datasets almost never see.
// Used by data/dataset.hpp (spirals, blobs, regression).
#pragma once

#include <cstdint>
#include <random>

namespace dpscope {

class SeededRng {
 public:
  // Seeds mt19937 with seed mod 2^32 (what std::mt19937 and PyTorch's generator both do).
  explicit SeededRng(uint64_t seed) : engine_(static_cast<std::mt19937::result_type>(seed & 0xFFFFFFFFu)) {}

  uint32_t next_u32() { return static_cast<uint32_t>(engine_()); }
  double uniform();                         // [0, 1)
  double uniform(double low, double high);  // [low, high)
  double normal();                          // mean 0, standard deviation 1
  double normal(double mean, double stddev);

 private:
  std::mt19937 engine_;
};

}  // namespace dpscope
