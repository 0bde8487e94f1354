// The training modes as descriptors (runtime/src/train/mode.hpp): every TrainMode has its spec at
// its index, whose word parse_train_mode() and name() use, and the generic code takes the mode's
// rules, world and run from it. And the `analytic` backend, which --timing-only runs, found in the
// backend registry like every other backend, yet never offered to --backend.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/train/train.hpp"
#include "mode.hpp"
#include "support/errors.hpp"
#include "train_common.hpp"

namespace dpscope {
namespace {

using testing::error_of;
using testing::Outcome;

TEST(TrainModes, EveryModeHasItsSpecAtItsIndexAndItsWord) {
  ASSERT_EQ(std::size(detail::kTrainModes), 3u);
  for (size_t i = 0; i < std::size(detail::kTrainModes); ++i) {
    const detail::TrainModeSpec& spec = *detail::kTrainModes[i];
    EXPECT_EQ(static_cast<size_t>(spec.mode), i) << spec.word;
    EXPECT_EQ(&detail::mode_spec(spec.mode), &spec);
    EXPECT_EQ(name(spec.mode), spec.word);
    EXPECT_EQ(parse_train_mode(std::string(spec.word)), spec.mode);
    // Every hook the generic code calls is filled in (check_launcher is optional).
    EXPECT_NE(spec.check_flags, nullptr) << spec.word;
    EXPECT_NE(spec.make_world, nullptr) << spec.word;
    EXPECT_NE(spec.run, nullptr) << spec.word;
    EXPECT_NE(spec.describe_batch, nullptr) << spec.word;
  }
}

// The memory estimate and the summary take what differs from the mode's spec.
TEST(TrainModes, MemoryShapeAndLossWordsAreTheModesOwn) {
  EXPECT_FALSE(detail::kSingleMode.memory.batch_per_rank || detail::kSingleMode.memory.replicas ||
               detail::kSingleMode.memory.gradient_buckets);
  EXPECT_TRUE(detail::kDataParallelMode.memory.replicas);
  EXPECT_FALSE(detail::kDataParallelMode.memory.batch_per_rank ||
               detail::kDataParallelMode.memory.gradient_buckets);
  EXPECT_TRUE(detail::kDdpMode.memory.batch_per_rank && detail::kDdpMode.memory.gradient_buckets);
  EXPECT_FALSE(detail::kDdpMode.memory.replicas);
  EXPECT_FALSE(runs_ranks(TrainMode::kSingle));
  EXPECT_FALSE(runs_ranks(TrainMode::kDataParallel));
  EXPECT_TRUE(runs_ranks(TrainMode::kDdp));
}

TEST(TrainModes, EachModeDescribesItsBatchInItsOwnWords) {
  TrainConfig config;
  config.devices = 4;
  config.batch = 10;
  TrainResult result;
  result.samples = 30;
  result.steps = 3;
  result.samples_per_step = 10;
  config.mode = TrainMode::kSingle;
  EXPECT_EQ(describe_batch(config, result), "batch 10 (the whole mini-batch), 30 samples, 3 steps");
  config.mode = TrainMode::kDataParallel;  // torch.chunk: ceil(10 / 4) = 3 rows a chunk
  EXPECT_EQ(
      describe_batch(config, result),
      "batch 10 (the whole mini-batch, scattered in chunks of up to 3 over 4 GPUs), 30 samples, 3 steps");
  config.mode = TrainMode::kDdp;  // 30 rows over 4 ranks: a shard of 8, so a rank's batch is 8
  result.samples_per_step = 32;
  EXPECT_EQ(describe_batch(config, result),
            "batch 10 per rank x 4 ranks = 32 samples per step (global batch) (a rank holds only 8 samples "
            "per epoch), 30 samples, 3 steps");
  config.timing_only = true;
  result.samples_per_step = 40;
  EXPECT_EQ(
      describe_batch(config, result),
      "batch 10 per rank x 4 ranks = 40 samples per step (global batch), no data (timing-only), 3 steps");
}

TEST(TrainModes, ModeWordsInTheUsageErrorComeFromTheSpecs) {
  const Outcome e = error_of([] { parse_train_mode("fsdp"); });
  EXPECT_EQ(e.kind, ErrorKind::kUsage);
  EXPECT_EQ(e.message, "--mode 'fsdp' is not one of single, dp, ddp");
}

TEST(TrainModes, AValueWithoutASpecIsAnInternalErrorNamingTheTable) {
  const Outcome e = error_of([] { detail::mode_spec(static_cast<TrainMode>(7)); });
  EXPECT_EQ(e.kind, ErrorKind::kInternal);
  EXPECT_NE(e.message.find("TrainMode 7 has no spec at its index of kTrainModes"), std::string::npos)
      << e.message;
}

TEST(TrainModes, OnlyDdpRunsRanksAndTakesDdpsPitfalls) {
  EXPECT_FALSE(detail::kSingleMode.ranks);
  EXPECT_FALSE(detail::kDataParallelMode.ranks);
  EXPECT_TRUE(detail::kDdpMode.ranks);
  EXPECT_TRUE(detail::kSingleMode.takes_pitfall("input-on-cpu"));
  EXPECT_FALSE(detail::kDataParallelMode.takes_pitfall("input-on-cpu"));
  EXPECT_FALSE(detail::kDdpMode.takes_pitfall("input-on-cpu"));
  for (const char* p : {"no-average", "unused-parameter", "mismatched-collective"}) {
    EXPECT_TRUE(detail::kDdpMode.takes_pitfall(p)) << p;
    EXPECT_FALSE(detail::kSingleMode.takes_pitfall(p)) << p;
  }
  for (const detail::TrainModeSpec* spec : detail::kTrainModes)
    EXPECT_TRUE(spec->takes_pitfall("no-set-epoch")) << spec->word;
}

TEST(TrainModes, MakeWorldIsTheModesOwn) {
  TrainConfig dp;
  dp.mode = TrainMode::kDataParallel;
  dp.devices = 3;
  const detail::World dp_world = detail::make_world(dp);
  EXPECT_EQ(dp_world.devices.size(), 3u);
  EXPECT_EQ(dp_world.ranks, nullptr);  // one process drives every device

  TrainConfig ddp = dp;
  ddp.mode = TrainMode::kDdp;
  const detail::World ddp_world = detail::make_world(ddp);
  ASSERT_NE(ddp_world.ranks, nullptr);
  EXPECT_EQ(ddp_world.ranks->size(), 3);
  EXPECT_EQ(ddp_world.devices.size(), 3u);

  // --timing-only: rank 0's GPU alone, in a world of one device, however many GPUs are simulated.
  ddp.timing_only = true;
  ddp.devices = 4096;
  const detail::World timing_world = detail::make_world(ddp);
  ASSERT_NE(timing_world.ranks, nullptr);
  EXPECT_EQ(timing_world.ranks->size(), 1);
  ASSERT_EQ(timing_world.devices.size(), 1u);
  EXPECT_EQ(timing_world.devices.front().name(), "sim:0");
}

TEST(AnalyticBackend, IsRegisteredLikeEveryBackend) {
  EXPECT_TRUE(is_backend_registered("analytic"));
  const std::vector<std::string> names = registered_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "analytic"), names.end());
}

TEST(AnalyticBackend, InitMakesRankZeroOfTheWholeWorldOnOneDevice) {
  const std::shared_ptr<SimWorld> world = SimWorld::create(1);
  const std::shared_ptr<ProcessGroup> group = init_process_group("analytic", 0, 1024, {.world = world});
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1024);
  EXPECT_EQ(group->device().name(), "sim:0");
  // Every rank of the symmetric world holds the same values: a sum is 1024 times rank 0's value.
  Tensor t =
      Tensor::from_floats(std::vector<float>{1.5f, -2.0f}, {2}, group->device(), MemoryCategory::kBuffers);
  group->all_reduce(t, {.op = ReduceOp::kSum})->wait();
  EXPECT_EQ(t.to_vector(), (std::vector<float>{1536.0f, -2048.0f}));
}

TEST(AnalyticBackend, InitWithoutItsOneDeviceWorldIsRefusedInOneLine) {
  const Outcome no_world = error_of([] { init_process_group("analytic", 0, 8, {}); });
  EXPECT_EQ(no_world.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(no_world.message,
            "the analytic backend is rank 0 of its world alone: it needs rank 0 and a world of one device "
            "(InitOptions::world, rank 0's GPU), got rank 0 and no world");
  const Outcome rank_one =
      error_of([] { init_process_group("analytic", 1, 8, {.world = SimWorld::create(1)}); });
  EXPECT_EQ(rank_one.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(rank_one.message,
            "the analytic backend is rank 0 of its world alone: it needs rank 0 and a world of one device "
            "(InitOptions::world, rank 0's GPU), got rank 1 and a world of 1 device");
  const Outcome two_devices =
      error_of([] { init_process_group("analytic", 0, 8, {.world = SimWorld::create(2)}); });
  EXPECT_EQ(two_devices.message,
            "the analytic backend is rank 0 of its world alone: it needs rank 0 and a world of one device "
            "(InitOptions::world, rank 0's GPU), got rank 0 and a world of 2 devices");
}

TEST(AnalyticBackend, IsNotAWordOfBackendAndNotListedAsBuiltForIt) {
  const Outcome e = error_of([] { parse_pg_backend("analytic"); });
  EXPECT_EQ(e.message, "--backend 'analytic' is not one of sim, cuda, nccl, mpi");
  // A --backend this build lacks lists the --backend words it has, never "analytic".
  for (const PgBackend backend : {PgBackend::kCuda, PgBackend::kNccl, PgBackend::kMpi}) {
    if (is_backend_registered(name(backend))) continue;
    TrainConfig config;
    config.mode = TrainMode::kDdp;
    config.backend = backend;
    const Outcome not_built = error_of([&] { config.validate(); });
    EXPECT_EQ(not_built.kind, ErrorKind::kUsage);
    EXPECT_EQ(not_built.message.find("analytic"), std::string::npos) << not_built.message;
    EXPECT_NE(not_built.message.find("is not built in this version (built: "), std::string::npos)
        << not_built.message;
  }
}

}  // namespace
}  // namespace dpscope
