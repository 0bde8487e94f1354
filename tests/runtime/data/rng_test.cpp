// SeededRng: the standard mt19937 stream and our own, documented uniform and normal transforms.
#include "dpscope/data/rng.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace dpscope {
namespace {

TEST(SeededRng, IsTheStandardMt19937Stream) {
  SeededRng rng(5489);  // mt19937's default seed; the C++ standard fixes its 10000th output
  for (int i = 0; i < 9999; ++i) rng.next_u32();
  EXPECT_EQ(rng.next_u32(), 4123659995u);
}

TEST(SeededRng, UniformIsGenrandRes53OfTwoDraws) {
  // The first two outputs of mt19937(5489) are 3499211612 and 581869302.
  SeededRng rng(5489);
  constexpr uint64_t kHigh27 = 3499211612u >> 5;
  constexpr uint64_t kLow26 = 581869302u >> 6;
  EXPECT_EQ(rng.uniform(), static_cast<double>(kHigh27 * 67108864u + kLow26) / 9007199254740992.0);  // / 2^53
}

TEST(SeededRng, NormalIsBoxMullerOfTwoUniforms) {
  SeededRng a(7);
  SeededRng b(7);
  const double u1 = b.uniform();
  const double u2 = b.uniform();
  EXPECT_EQ(a.normal(), std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2));
  EXPECT_EQ(a.normal(3.0, 0.5), 3.0 + 0.5 * b.normal());
}

TEST(SeededRng, UniformStaysInItsRange) {
  SeededRng rng(1);
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.uniform(-5.0, 5.0);
    ASSERT_GE(u, -5.0);
    ASSERT_LT(u, 5.0);
  }
}

TEST(SeededRng, NormalHasMeanZeroAndUnitVariance) {
  SeededRng rng(123);
  constexpr int kN = 200000;
  double sum = 0.0;
  double sum_sq = 0.0;
  for (int i = 0; i < kN; ++i) {
    const double z = rng.normal();
    sum += z;
    sum_sq += z * z;
  }
  const double mean = sum / kN;
  EXPECT_NEAR(mean, 0.0, 0.01);                        // ~4.5 standard errors
  EXPECT_NEAR(sum_sq / kN - mean * mean, 1.0, 0.015);  // ~4.7 standard errors
}

TEST(SeededRng, SeedIsTakenModulo2To32) {
  SeededRng a(3);
  SeededRng b(3 + (uint64_t{1} << 32));
  SeededRng c(4);
  const uint32_t first = a.next_u32();
  EXPECT_EQ(first, b.next_u32());
  EXPECT_NE(first, c.next_u32());
}

}  // namespace
}  // namespace dpscope
