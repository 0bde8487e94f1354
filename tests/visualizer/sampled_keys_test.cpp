// SampledKeys: a search through every 8th key finds exactly what a plain binary search finds, for
// any subrange, including ranges that start or end on a sampled key.
#include <gtest/gtest.h>

#include <random>

#include "replay/sampled_keys.hpp"

namespace dpscope::viz {
namespace {

size_t plain_lower_bound(const std::vector<int64_t>& keys, size_t from, size_t to, int64_t t) {
  return static_cast<size_t>(std::lower_bound(keys.begin() + static_cast<ptrdiff_t>(from),
                                              keys.begin() + static_cast<ptrdiff_t>(to), t) -
                             keys.begin());
}

TEST(SampledKeys, ARangeStartingOnASampleStillSearchesThatSample) {
  std::vector<int64_t> keys(100);
  for (size_t k = 0; k < keys.size(); ++k) keys[k] = static_cast<int64_t>(k);
  const SampledKeys sampled(keys.size(), [&](size_t k) { return keys[k]; });
  const auto key = [&](size_t k) { return keys[k]; };
  EXPECT_EQ(sampled.lower_bound(32, 90, 10, key), 32u);  // key 32 is the answer: it is a sample
  EXPECT_EQ(sampled.lower_bound(32, 90, 64, key), 64u);
  EXPECT_EQ(sampled.lower_bound(32, 90, 65, key), 65u);
  EXPECT_EQ(sampled.lower_bound(32, 90, 95, key), 90u);  // none in range
  EXPECT_EQ(sampled.lower_bound(40, 40, 0, key), 40u);   // empty range
}

TEST(SampledKeys, AgreesWithABinarySearchOnEverySubrange) {
  std::mt19937 gen(11);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = gen() % 300;
    std::vector<int64_t> keys(n);
    int64_t t = 0;
    for (int64_t& k : keys) k = t += static_cast<int64_t>(gen() % 3);  // with repeats
    const SampledKeys sampled(n, [&](size_t k) { return keys[k]; });
    for (int q = 0; q < 100; ++q) {
      const size_t from = gen() % (n + 1);
      const size_t to = from + gen() % (n - from + 1);
      const int64_t x = static_cast<int64_t>(gen() % static_cast<uint32_t>(t + 3)) - 1;
      ASSERT_EQ(sampled.lower_bound(from, to, x, [&](size_t k) { return keys[k]; }),
                plain_lower_bound(keys, from, to, x))
          << "n " << n << " [" << from << ", " << to << ") t " << x;
    }
  }
}

}  // namespace
}  // namespace dpscope::viz
