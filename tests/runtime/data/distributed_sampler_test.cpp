// DistributedSampler: closed-form cases, PyTorch parity over a matrix of arguments, and the CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/data/distributed_sampler.hpp"
#include "support/cli.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

std::vector<int64_t> indices(int64_t len, int64_t replicas, int64_t rank, bool shuffle, bool drop_last,
                             uint64_t seed = 0, int64_t epoch = 0) {
  DistributedSampler s(
      len,
      {.num_replicas = replicas, .rank = rank, .shuffle = shuffle, .seed = seed, .drop_last = drop_last});
  s.set_epoch(epoch);
  return s.indices();
}

TEST(DistributedSampler, UnshuffledIsStridedAndPaddedFromTheStart) {
  // len 10 over 4 ranks: num_samples 3, total 12, padded with indices 0 and 1.
  EXPECT_EQ(indices(10, 4, 0, false, false), (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(indices(10, 4, 1, false, false), (std::vector<int64_t>{1, 5, 9}));
  EXPECT_EQ(indices(10, 4, 2, false, false), (std::vector<int64_t>{2, 6, 0}));
  EXPECT_EQ(indices(10, 4, 3, false, false), (std::vector<int64_t>{3, 7, 1}));
}

TEST(DistributedSampler, DropLastTruncates) {
  EXPECT_EQ(indices(10, 4, 0, false, true), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(indices(10, 4, 3, false, true), (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(DistributedSampler(3, {.num_replicas = 4, .rank = 0, .drop_last = true}).num_samples(), 0);
}

TEST(DistributedSampler, PaddingCyclesWhenShorterThanReplicas) {
  // len 2 over 5 ranks: total 5 = [0, 1, 0, 1, 0].
  EXPECT_EQ(indices(2, 5, 4, false, false), (std::vector<int64_t>{0}));
  EXPECT_EQ(indices(2, 5, 3, false, false), (std::vector<int64_t>{1}));
  EXPECT_TRUE(indices(0, 3, 1, true, false).empty());
}

TEST(DistributedSampler, RanksCoverTheShuffledEpochExactlyOnce) {
  DistributedSampler s(100, {.num_replicas = 4, .rank = 0, .shuffle = true, .seed = 7});
  const auto all = s.all_ranks_indices();
  std::set<int64_t> seen;
  for (const auto& r : all) seen.insert(r.begin(), r.end());
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(all[0], s.indices());
}

TEST(DistributedSampler, WithoutSetEpochEveryEpochRepeats) {
  EXPECT_EQ(indices(50, 2, 0, true, false, 0, 0), indices(50, 2, 0, true, false, 0, 0));
  EXPECT_NE(indices(50, 2, 0, true, false, 0, 0), indices(50, 2, 0, true, false, 0, 1));
}

TEST(DistributedSampler, InvalidRankIsWordedLikePyTorch) {
  try {
    DistributedSampler(10, {.num_replicas = 4, .rank = 4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Invalid rank 4, rank should be in the interval [0, 3]");
  }
  EXPECT_THROW(DistributedSampler(10, {.num_replicas = 0, .rank = 0}), Error);
}

TEST(DistributedSampler, MatchesPyTorchOverAMatrixOfArguments) {
  if (!testing::torch_available()) GTEST_SKIP() << "python3-torch not installed: PyTorch parity not checked";
  // One python process prints every case; each line is "len R rank seed epoch shuffle drop_last: i i i".
  const char* script = R"PY(
import torch.utils.data.distributed as d
for n in [0, 1, 7, 10, 33, 100]:
  for R in [1, 2, 3, 4, 8]:
    for seed in [0, 42]:
      for epoch in [0, 3]:
        for shuffle in [False, True]:
          for drop in [False, True]:
            for rank in range(R):
              s = d.DistributedSampler(list(range(n)), num_replicas=R, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop)
              s.set_epoch(epoch)
              print(n, R, rank, seed, epoch, int(shuffle), int(drop), ":", *list(s))
)PY";
  const auto r = testing::run_command(testing::python3() + " -c '" + script + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  int cases = 0;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    int64_t n, R, rank, epoch, shuffle, drop;
    uint64_t seed;
    std::string colon;
    in >> n >> R >> rank >> seed >> epoch >> shuffle >> drop >> colon;
    std::vector<int64_t> expected;
    for (int64_t v; in >> v;) expected.push_back(v);
    EXPECT_EQ(indices(n, R, rank, shuffle != 0, drop != 0, seed, epoch), expected) << line;
    ++cases;
  }
  EXPECT_EQ(cases, 6 * 18 * 2 * 2 * 2 * 2);
}

// `dpscope sampler --len 2147483648` was killed by the OOM killer: the check counted the order once
// while the sampler also made each rank's copy of it (and the CLI the text of all of them). The check
// now counts the order and the rank's indices it makes, before allocating either.
TEST(DistributedSampler, TheMemoryCheckCountsTheOrderAndTheRanksIndices) {
  const uint64_t ram = host_memory_bytes();
  if (ram == 0) GTEST_SKIP() << "this machine's memory is unknown";
  const auto len = static_cast<int64_t>(ram / 8 * 2);  // twice the machine: refused at once either way
  for (const auto& [replicas, elems] :
       {std::pair<int64_t, int64_t>{1, len}, {2, len + len / 2}, {4, len + len / 4}}) {
    DistributedSampler s(len, {.num_replicas = replicas, .rank = 0, .shuffle = false});
    const std::string what = testing::what_of([&] { (void)s.indices(); });
    EXPECT_TRUE(what.starts_with(fmt::format("DistributedSampler: {} indices needs ", elems))) << what;
  }
  DistributedSampler all(len, {.num_replicas = 2, .rank = 0, .shuffle = false});
  EXPECT_TRUE(testing::what_of([&] {
                (void)all.all_ranks_indices();
              }).starts_with(fmt::format("DistributedSampler: {} indices needs ", 2 * len)));
}

TEST(SamplerCli, PrintsOneIndexPerLine) {
  const auto r = testing::run_dpscope("sampler --len 10 --replicas 4 --rank 2 --no-shuffle");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "2\n6\n0\n");
  const auto bad = testing::run_dpscope("sampler --len 10 --replicas 4 --rank 9");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.output, "dpscope: error: Invalid rank 9, rank should be in the interval [0, 3]\n");
  EXPECT_EQ(testing::run_dpscope("sampler --replicas 2").exit_code, 2);
  EXPECT_EQ(testing::run_dpscope("sampler --len -3").exit_code, 2);
}

}  // namespace
}  // namespace dpscope
