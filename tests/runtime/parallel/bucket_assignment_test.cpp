// compute_bucket_assignment_by_size, case by case against c10d's rules.
#include <gtest/gtest.h>

#include <limits>

#include "dpscope/base/error.hpp"

#include "dpscope/parallel/bucket_assignment.hpp"

namespace dpscope {
namespace {

using Buckets = std::vector<std::vector<int>>;

TEST(BucketAssignment, OneBucketWithAnUnboundedLimit) {
  EXPECT_EQ(compute_bucket_assignment_by_size({400, 8, 4000, 16}, {std::numeric_limits<uint64_t>::max()}),
            (Buckets{{0, 1, 2, 3}}));
}

TEST(BucketAssignment, ABucketClosesOnceItReachesTheLimitAndLimitsAdvance) {
  // limits 100 then 1000: [0,1] reaches 100 → close; then [2] = 1000 → close; [3,4] remain.
  EXPECT_EQ(compute_bucket_assignment_by_size({60, 40, 1000, 10, 10}, {100, 1000}),
            (Buckets{{0, 1}, {2}, {3, 4}}));
  // The last limit repeats.
  EXPECT_EQ(compute_bucket_assignment_by_size({5, 5, 5, 5, 5}, {5, 10}), (Buckets{{0}, {1, 2}, {3, 4}}));
}

TEST(BucketAssignment, GradientReadyOrderIsKept) {
  // A rebuild visits tensors in ready order (last layer first) and keeps that order.
  EXPECT_EQ(compute_bucket_assignment_by_size({400, 8, 40, 4}, {50, 1000}, {3, 2, 1, 0}),
            (Buckets{{3, 2, 1}, {0}}));
}

TEST(BucketAssignment, RejectsBadArguments) {
  EXPECT_THROW(compute_bucket_assignment_by_size({1, 2}, {}), Error);
  EXPECT_THROW(compute_bucket_assignment_by_size({1, 2}, {10}, {0}), Error);
  EXPECT_THROW(compute_bucket_assignment_by_size({1, 2}, {10}, {0, 5}), Error);
}

}  // namespace
}  // namespace dpscope
