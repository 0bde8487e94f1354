// randperm: PyTorch 1.13's CPU permutation, element for element.
#include "dpscope/data/randperm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <sstream>

#include "runtime/io/io_test_util.hpp"

namespace dpscope {
namespace {

TEST(Randperm, MatchesTorchForKnownSeeds) {
  // torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist() with torch 1.13.
  EXPECT_EQ(randperm(10, 0), (std::vector<int64_t>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}));
  EXPECT_EQ(randperm(10, 42), (std::vector<int64_t>{2, 6, 1, 8, 4, 5, 0, 9, 3, 7}));
  EXPECT_EQ(randperm(5, 1), (std::vector<int64_t>{0, 4, 2, 3, 1}));
}

TEST(Randperm, FirstElementIsTheFirstDrawModuloN) {
  // r[0] = gen() % n, and the first output of mt19937(7) is 327741615.
  EXPECT_EQ(randperm(1000, 7)[0], 615);
  EXPECT_EQ(randperm(1024, 7)[0], 327741615 % 1024);
}

TEST(Randperm, SmallCases) {
  EXPECT_TRUE(randperm(0, 3).empty());
  EXPECT_EQ(randperm(1, 3), std::vector<int64_t>{0});
}

TEST(Randperm, IsAPermutation) {
  for (int64_t n : {2, 3, 17, 1000}) {
    std::vector<int64_t> p = randperm(n, static_cast<uint64_t>(n) * 31);
    std::sort(p.begin(), p.end());
    std::vector<int64_t> expected(static_cast<size_t>(n));
    std::iota(expected.begin(), expected.end(), int64_t{0});
    EXPECT_EQ(p, expected) << "n = " << n;
  }
}

TEST(Randperm, SameSeedSameOrderOtherSeedOtherOrder) {
  EXPECT_EQ(randperm(100, 5), randperm(100, 5));
  EXPECT_NE(randperm(100, 5), randperm(100, 6));
  EXPECT_EQ(randperm(100, 5), randperm(100, 5 + (uint64_t{1} << 32)));  // seeds are taken mod 2^32
}

TEST(Randperm, NegativeLengthIsRefused) {
  EXPECT_DPS_ERROR(randperm(-1, 0), ErrorKind::kInvalidArgument, "randperm: n must be non-negative, got -1");
}

TEST(Randperm, MatchesTorchForEveryLengthUpTo100) {
  DPS_REQUIRE_PYTHON_MODULE("torch");
  const std::vector<uint64_t> seeds{0, 1, 42, 12345, 4294967295u, 4294967296u + 9};
  const auto result = testing::run_python(R"(
import torch
for seed in [0, 1, 42, 12345, 4294967295, 4294967296 + 9]:
    for n in list(range(1, 101)) + [1000, 65536]:
        g = torch.Generator().manual_seed(seed)
        print(' '.join(map(str, torch.randperm(n, generator=g).tolist())))
)");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::istringstream lines(result.output);
  std::string line;
  int checked = 0;
  for (uint64_t seed : seeds) {
    std::vector<int64_t> lengths(100);
    std::iota(lengths.begin(), lengths.end(), int64_t{1});
    lengths.push_back(1000);
    lengths.push_back(65536);
    for (int64_t n : lengths) {
      ASSERT_TRUE(std::getline(lines, line)) << "torch printed too few lines";
      std::istringstream values(line);
      std::vector<int64_t> expected;
      for (int64_t v = 0; values >> v;) expected.push_back(v);
      ASSERT_EQ(randperm(n, seed), expected) << "n = " << n << ", seed = " << seed;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6 * 102);
}

}  // namespace
}  // namespace dpscope
