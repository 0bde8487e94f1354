// DistributedSampler and randperm at the limits of int64 and of host memory: sizes near
// INT64_MAX give exact counts instead of wrapped ones, and an order too large for this machine is
// refused with one line before anything is allocated (it used to end in std::bad_alloc).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/data/randperm.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::what_of;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(SamplerLimits, CountsNearTheInt64MaximumAreExact) {
  // (len + R - 1) / R overflowed here; ceil(len / R) does not.
  DistributedSampler two(kMax - 1, {.num_replicas = 2, .rank = 1});
  EXPECT_EQ(two.num_samples(), 4611686018427387903);  // (2^63 - 2) / 2
  EXPECT_EQ(two.total_size(), kMax - 1);
  DistributedSampler one(kMax, {.num_replicas = 1, .rank = 0});
  EXPECT_EQ(one.num_samples(), kMax);
  EXPECT_EQ(one.total_size(), kMax);
  DistributedSampler dropped(kMax, {.num_replicas = 2, .rank = 0, .drop_last = true});
  EXPECT_EQ(dropped.num_samples(), 4611686018427387903);  // ceil((len - 2) / 2)
  EXPECT_EQ(dropped.total_size(), kMax - 1);
}

TEST(SamplerLimits, PaddingPastInt64IsRefused) {
  // ceil((2^63 - 1) / 2) * 2 = 2^63.
  EXPECT_EQ(
      what_of([] { DistributedSampler s(kMax, {.num_replicas = 2, .rank = 0}); }),
      "DistributedSampler: total_size = num_samples * num_replicas: 4611686018427387904 * 2 overflows a "
      "64-bit integer");
  // ceil((2^63 - 1) / 3) * 3 = 2^63 + 1: the padded total does not fit.
  EXPECT_EQ(
      what_of([] { DistributedSampler s(kMax, {.num_replicas = 3, .rank = 0}); }),
      "DistributedSampler: total_size = num_samples * num_replicas: 3074457345618258603 * 3 overflows a "
      "64-bit integer");
}

TEST(SamplerLimits, AnOrderTooLargeForThisMachineIsRefusedBeforeAllocating) {
  DistributedSampler s(99999999999999, {.num_replicas = 1, .rank = 0, .shuffle = false});
  EXPECT_EQ(s.num_samples(), 99999999999999);
  const std::string message = what_of([&] { (void)s.indices(); });
  EXPECT_EQ(message.rfind("DistributedSampler: 99999999999999 indices needs 727.60 TiB of host "
                          "memory; this machine has ",
                          0),
            0u)
      << message;
  const std::string shuffled = what_of([] { (void)randperm(99999999999999, 0); });
  EXPECT_EQ(shuffled.rfind("randperm(99999999999999) needs 727.60 TiB of host memory", 0), 0u) << shuffled;
}

TEST(SamplerLimits, SmallCasesUnchanged) {
  // PyTorch: len 10 on 4 replicas → 3 each, padded with indices 0 and 1.
  DistributedSampler s(10, {.num_replicas = 4, .rank = 3, .shuffle = false});
  EXPECT_EQ(s.num_samples(), 3);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{3, 7, 1}));
  DistributedSampler empty(0, {.num_replicas = 4, .rank = 0});
  EXPECT_EQ(empty.num_samples(), 0);
  EXPECT_TRUE(empty.indices().empty());
}

}  // namespace
}  // namespace dpscope
