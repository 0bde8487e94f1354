// agree_on_settings() and run_as_rank() (comm/rank_agreement.hpp) on rank threads of the sim
// backend, as the ranks of `dpscope train` and `dpscope bench` run them as processes: a flag one
// rank has and another lacks is named with both values on the rank that differs and stops every rank;
// an error inside run_as_rank() ends its peers' waits at once instead of after the timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/rank_agreement.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/spawn.hpp"

namespace dpscope {
namespace {

using ::testing::HasSubstr;

// Each rank's error message ("" when it returned), from one spawn of `world_size` ranks.
std::vector<std::string> messages_of(int world_size, const std::function<void(ProcessGroup&)>& fn,
                                     Milliseconds timeout = Milliseconds(20000)) {
  std::vector<std::string> messages(static_cast<size_t>(world_size));
  std::mutex mutex;
  try {
    spawn(world_size,
          [&](ProcessGroup& group) {
            try {
              fn(group);
            } catch (const Error& e) {
              std::lock_guard lock(mutex);
              messages[static_cast<size_t>(group.rank())] = e.what();
              throw;
            }
          },
          {.timeout = timeout});
  } catch (const Error&) {
    // spawn reports the first failure; every rank's own message was kept above
  }
  return messages;
}

TEST(RankAgreement, RanksWithTheSameSettingsGoOn) {
  const std::vector<std::string> errors = messages_of(3, [](ProcessGroup& group) {
    agree_on_settings(group, {{"--batch", "16"}, {"--trace", ""}});
  });
  EXPECT_EQ(errors, std::vector<std::string>(3, ""));
}

TEST(RankAgreement, AFlagOnlyRankZeroGaveIsNamedWithBothValuesAndStopsEveryRank) {
  const std::vector<std::string> errors = messages_of(3, [](ProcessGroup& group) {
    agree_on_settings(group, {{"--batch", "16"}, {"--trace", group.rank() == 0 ? "\"tr\"" : ""}});
  });
  EXPECT_EQ(errors[0],
            "rank 2 runs another configuration than rank 0 (its error names the flag): every rank must be "
            "started with the same flags");
  EXPECT_EQ(errors[1],
            "rank 1 of 3 runs another configuration than rank 0: --trace is unset here but \"tr\" on rank 0 "
            "(every rank must be started with the same flags)");
  EXPECT_THAT(errors[2],
              HasSubstr("rank 2 of 3 runs another configuration than rank 0: --trace is unset here"));
}

TEST(RankAgreement, AValueThatDiffersIsNamedOnTheRankThatHasIt) {
  const std::vector<std::string> errors = messages_of(2, [](ProcessGroup& group) {
    agree_on_settings(group, {{"-b", "8"}, {"-e", group.rank() == 1 ? "2048" : "1024"}});
  });
  EXPECT_THAT(errors[1], HasSubstr("-e is 2048 here but 1024 on rank 0"));
  EXPECT_THAT(errors[0], HasSubstr("rank 1 runs another configuration than rank 0"));
}

// Rank 1 fails before its first collective and then lingers, as a process does in MPI_Finalize;
// rank 0 waits in a broadcast from it (20 s timeout) and must fail at once, naming rank 1 and why.
TEST(RunAsRank, AnErrorAbortsThePeersInsteadOfLeavingThemWaiting) {
  const auto begun = std::chrono::steady_clock::now();
  double rank0_failed_after_s = -1.0;
  const std::vector<std::string> errors = messages_of(2, [&](ProcessGroup& group) {
    try {
      run_as_rank(group, [&] {
        if (group.rank() == 1) throw Error(ErrorKind::kUsage, "--resume: no checkpoint in 'ckpt'");
        Tensor t = Tensor::full({4}, 1.0f, group.device());
        group.broadcast(t, {.root = 1})->wait();
      });
    } catch (const Error&) {
      if (group.rank() == 0)
        rank0_failed_after_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
      if (group.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      throw;
    }
  });
  EXPECT_GE(rank0_failed_after_s, 0.0);
  EXPECT_LT(rank0_failed_after_s, 1.0);  // not when rank 1 finally leaves
  EXPECT_EQ(errors[1], "--resume: no checkpoint in 'ckpt'");
  EXPECT_THAT(errors[0], HasSubstr("aborted because rank 1 failed: --resume: no checkpoint in 'ckpt'"));
}

// broadcast_text(): the root's bytes, all 256 values of them, reach every rank; the others' own
// text is ignored.
TEST(BroadcastText, EveryRankGetsTheRootsBytes) {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  std::vector<std::string> received(3);
  const std::vector<std::string> errors = messages_of(3, [&](ProcessGroup& group) {
    received[static_cast<size_t>(group.rank())] =
        broadcast_text(group, 2, group.rank() == 2 ? all_bytes : "not mine");
  });
  EXPECT_EQ(errors, std::vector<std::string>(3, ""));
  EXPECT_EQ(received, std::vector<std::string>(3, all_bytes));
}

TEST(BroadcastText, ARootSendsAtMostTheLimit) {
  const std::string longer(static_cast<size_t>(kMaxBroadcastTextBytes) + 10, 'x');
  std::vector<size_t> sizes(2);
  messages_of(2, [&](ProcessGroup& group) {
    sizes[static_cast<size_t>(group.rank())] = broadcast_text(group, 0, longer).size();
  });
  EXPECT_EQ(sizes, std::vector<size_t>(2, static_cast<size_t>(kMaxBroadcastTextBytes)));
}

// A root that is not this program (it announces more than the limit) is refused, not allocated.
TEST(BroadcastText, ALengthOverTheLimitIsRefusedAsAnotherProgram) {
  const std::vector<std::string> errors = messages_of(2, [](ProcessGroup& group) {
    if (group.rank() == 0) {
      Tensor length = Tensor::from_ints(std::vector<int64_t>{kMaxBroadcastTextBytes + 1}, {1}, group.device(),
                                        MemoryCategory::kBuffers);
      group.broadcast(length, {.root = 0, .algorithm = Algorithm::kAuto})->wait();
      return;
    }
    broadcast_text(group, 0, "");
  });
  EXPECT_EQ(errors[1],
            "rank 1 of 2: rank 0 sent a text of 1048577 bytes, more than the 1048576 a rank sends (is it "
            "another program?)");
}

}  // namespace
}  // namespace dpscope
