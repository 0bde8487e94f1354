// measure_clock_offset() (comm/clock_offset.hpp) on rank threads of the sim backend. Simulated
// send/recv meet like a rendezvous (both clocks end at the message's arrival), so every rank's clock
// agrees with rank 0's after a ping-pong whatever it read before: the offset is 0, and half the best
// round trip is one message's simulated time (the round preset: 1 us + 8 bytes at 1 byte/ns).
#include <gtest/gtest.h>

#include <vector>

#include "comm_test_util.hpp"
#include "dpscope/comm/clock_offset.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

TEST(ClockOffset, RankZeroIsTheReferenceAndEveryPeerMeetsItOnce) {
  std::vector<ClockOffset> got(4);
  spawn(
      4,
      [&](ProcessGroup& group) {
        // Clocks that disagree before: rank K is K ms ahead.
        group.device().wait_until(StreamKind::kCompute, group.rank() * 1'000'000);
        got[static_cast<size_t>(group.rank())] = measure_clock_offset(group, 3);
      },
      test::round_options());
  EXPECT_EQ(got[0].offset_ns, 0);
  EXPECT_EQ(got[0].uncertainty_ns, 0);
  for (int rank = 1; rank < 4; ++rank) {
    EXPECT_EQ(got[rank].offset_ns, 0) << "rank " << rank;
    EXPECT_EQ(got[rank].uncertainty_ns, 1000 + 8) << "rank " << rank;
  }
}

TEST(ClockOffset, RefusesNoRounds) {
  spawn(
      1,
      [&](ProcessGroup& group) {
        const testing::Outcome got = testing::error_of([&] { measure_clock_offset(group, 0); });
        EXPECT_EQ(got.kind, ErrorKind::kInvalidArgument);
        EXPECT_EQ(got.message, "measure_clock_offset: rounds must be >= 1, got 0");
      },
      test::round_options());
}

}  // namespace
}  // namespace dpscope
