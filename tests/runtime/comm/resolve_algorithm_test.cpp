// resolve_algorithm (runtime/src/comm/algorithms/collective_choice.hpp): the one rule by which the
// sim, cuda, mpi and analytic backends turn a call's algorithm and the group's default into the
// schedule that runs.
#include <gtest/gtest.h>

#include "algorithms/collective_choice.hpp"
#include "support/errors.hpp"

namespace dpscope::detail {
namespace {

using testing::error_of;

TEST(ResolveAlgorithm, AnExplicitAlgorithmIsTheCallsWhereTheOpOffersIt) {
  EXPECT_EQ(resolve_algorithm(OpType::kAllReduce, Algorithm::kTree, Algorithm::kRing), Algorithm::kTree);
  EXPECT_EQ(resolve_algorithm(OpType::kBroadcast, Algorithm::kNaive, Algorithm::kAuto), Algorithm::kNaive);
  EXPECT_EQ(resolve_algorithm(OpType::kAllGather, Algorithm::kRing, Algorithm::kTree), Algorithm::kRing);
  EXPECT_EQ(resolve_algorithm(OpType::kAllGather, Algorithm::kAuto, Algorithm::kTree), Algorithm::kAuto);
}

TEST(ResolveAlgorithm, AnAlgorithmTheOpLacksIsRefusedNamingWhatIsAvailable) {
  const testing::Outcome sim =
      error_of([] { resolve_algorithm(OpType::kAllGather, Algorithm::kTree, Algorithm::kAuto); });
  EXPECT_EQ(sim.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(sim.message, "all_gather: algorithm 'tree' is not available (available: ring, auto)");
  const testing::Outcome mpi = error_of([] {
    resolve_algorithm(OpType::kReduceScatter, Algorithm::kNaive, Algorithm::kAuto, " on backend 'mpi'");
  });
  EXPECT_EQ(mpi.message,
            "reduce_scatter: algorithm 'naive' is not available on backend 'mpi' (available: ring, auto)");
}

TEST(ResolveAlgorithm, TheGroupsDefaultAppliesWhereTheOpOffersIt) {
  EXPECT_EQ(resolve_algorithm(OpType::kAllReduce, Algorithm::kDefault, Algorithm::kTree), Algorithm::kTree);
  EXPECT_EQ(resolve_algorithm(OpType::kReduceScatter, Algorithm::kDefault, Algorithm::kTree),
            Algorithm::kAuto);
  EXPECT_EQ(resolve_algorithm(OpType::kAllGather, Algorithm::kDefault, Algorithm::kRing), Algorithm::kRing);
  EXPECT_EQ(resolve_algorithm(OpType::kAllReduce, Algorithm::kDefault, Algorithm::kAuto), Algorithm::kAuto);
  // Scatter and gather have one schedule: any explicit default means it.
  EXPECT_EQ(resolve_algorithm(OpType::kScatter, Algorithm::kDefault, Algorithm::kRing), Algorithm::kNaive);
  EXPECT_EQ(resolve_algorithm(OpType::kGather, Algorithm::kDefault, Algorithm::kAuto), Algorithm::kAuto);
}

}  // namespace
}  // namespace dpscope::detail
