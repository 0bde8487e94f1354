// train_rank(): the per-rank loop of --mode ddp called directly from rank threads, as a process
// calls it — the same numbers as run_training, every rank ending with an error naming rank 0
// when rank 0's checkpoint write fails, and checkpoints only at synchronized boundaries.
#include "dpscope/train/train_rank.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "dpscope/comm/spawn.hpp"
#include "support/cli.hpp"

namespace dpscope {
namespace {

using testing::TempDir;

TrainConfig small_ddp(int ranks) {
  TrainConfig config;
  config.mode = TrainMode::kDdp;
  config.devices = ranks;
  config.dataset = "blobs:48";
  config.model = "2-8-3";
  config.batch = 4;
  config.steps = 5;
  config.lr = 0.1;
  return config;
}

TEST(TrainRank, RankThreadsCallingItGiveWhatRunTrainingReports) {
  const TrainConfig config = small_ddp(3);
  std::vector<RankResult> ranks(3);
  // Default options: every rank loads the data itself, as a process would.
  spawn(3,
        [&](ProcessGroup& group) { ranks[static_cast<size_t>(group.rank())] = train_rank(group, config); });
  const TrainResult run = run_training(config);
  ASSERT_EQ(run.losses.size(), 5u);
  for (size_t s = 0; s < 5; ++s) {
    const double mean = (ranks[0].losses[s] + ranks[1].losses[s] + ranks[2].losses[s]) / 3.0;
    EXPECT_EQ(run.losses[s], mean) << "step " << s;
  }
  for (const RankResult& rank : ranks) {
    EXPECT_EQ(rank.steps, 5);
    EXPECT_EQ(rank.parameter_count, 2 * 8 + 8 + 8 * 3 + 3);
    EXPECT_EQ(rank.samples, 48);
    EXPECT_EQ(rank.samples_per_step, 12);  // 4 per rank x 3 ranks
    EXPECT_EQ(rank.resumed_from_step, -1);
  }
  EXPECT_NE(ranks[0].losses, ranks[1].losses);  // each rank's loss is over its own batch
}

TEST(TrainRank, RefusesAGroupOfAnotherSizeThanDevices) {
  const TrainConfig config = small_ddp(3);
  try {
    spawn(2, [&](ProcessGroup& group) { train_rank(group, config); });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the process group has 2 ranks but --devices is 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(TrainRank, WhenRankZerosCheckpointWriteFailsEveryRankEndsWithAnErrorNamingIt) {
  TempDir dir("train_rank_fail");
  TrainConfig config = small_ddp(3);
  config.checkpoint_dir = dir / "ckpt";
  config.checkpoint_every = 2;
  RankOptions options;
  // After step 2 of 5 (before its checkpoint), the checkpoint directory becomes a plain file.
  options.on_step = [&](const StepReport& report) {
    if (report.step != 1 || report.rank != 0) return;
    std::filesystem::remove_all(config.checkpoint_dir);
    std::ofstream(config.checkpoint_dir) << "not a directory";
  };
  std::mutex mutex;
  std::vector<std::string> errors(3);
  spawn(3, [&](ProcessGroup& group) {
    try {
      train_rank(group, config, options);
    } catch (const Error& e) {
      std::lock_guard lock(mutex);
      errors[static_cast<size_t>(group.rank())] = e.what();
    }
  });
  ASSERT_NE(errors[0], "") << "rank 0 ends with its own error (the write's)";
  EXPECT_EQ(errors[0].find("stops: rank 0"), std::string::npos) << errors[0];
  for (int rank : {1, 2})
    EXPECT_EQ(errors[static_cast<size_t>(rank)],
              fmt::format("rank {} stops: rank 0 failed to write the checkpoint after step 2: {}", rank,
                          errors[0]));
}

TEST(TrainRank, WithNoSyncCheckpointsOnlyAtSynchronizedBoundaries) {
  TempDir dir("train_rank_nosync");
  TrainConfig config = small_ddp(2);
  config.no_sync_every = 3;
  config.steps = 8;  // synchronized after steps 3, 6 and (the last) 8
  config.checkpoint_every = 2;
  config.checkpoint_dir = dir.path().string();
  const TrainResult run = run_training(config);
  // Every 2 steps, but only where no gradient is accumulated: 3 (passes 2), 6 (passes 4 and 6);
  // 8 ends mid-cycle, so 6 is the last checkpoint.
  EXPECT_EQ(run.last_checkpoint, (dir.path() / "checkpoint-00000006.safetensors").string());
  EXPECT_TRUE(std::filesystem::exists(dir / "checkpoint-00000003.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "checkpoint-00000008.safetensors"));
}

// Regression test: a rank that is a process used to return no resumed step, so the summary of
// `dpscope launch ... --resume` never said "resumed after step N" (rank threads did).
TEST(TrainRank, AResumedRankSaysWhichStepItResumedAfter) {
  TempDir dir("train_rank_resume");
  TrainConfig config = small_ddp(2);
  config.steps = 3;
  config.checkpoint_every = 3;
  config.checkpoint_dir = dir.path().string();
  run_training(config);
  config.steps = 5;
  config.resume = true;
  std::vector<RankResult> ranks(2);
  spawn(2,
        [&](ProcessGroup& group) { ranks[static_cast<size_t>(group.rank())] = train_rank(group, config); });
  for (const RankResult& rank : ranks) {
    EXPECT_EQ(rank.resumed_from_step, 3);
    EXPECT_EQ(rank.steps, 5);
    EXPECT_EQ(rank.losses.size(), 2u);  // the steps this call ran
  }
}

}  // namespace
}  // namespace dpscope
