// ZeroRedundancyOptimizer in training: DDP + ZeRO equals DDP + the plain optimizer on 1..4 ranks,
// only owners update (their values are broadcast), optimizer-state memory per rank is the shard's,
// empty shards, timing-only mode, and the traced sync.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "dpscope/trace/recorder.hpp"
#include "zero_test_support.hpp"

namespace dpscope {
namespace {

using namespace zero_test;

void expect_matches_plain_optimizer(OptimKind kind) {
  for (int n : {1, 2, 3, 4}) {
    const Batches data = make_batches(4, 4 * n, 6, 4, 7);
    const auto plain = train_ddp(n, data, kind, /*zero=*/false);
    const auto sharded = train_ddp(n, data, kind, /*zero=*/true);
    for (int r = 0; r < n; ++r) {
      const auto& w = sharded[static_cast<size_t>(r)].weights;
      EXPECT_LE(max_diff(w, plain[static_cast<size_t>(r)].weights), 1e-6f) << "n=" << n << " rank " << r;
      EXPECT_EQ(w, sharded[0].weights) << "ranks must hold bit-identical weights, n=" << n << " rank " << r;
    }
  }
}

TEST(ZeroRedundancyOptimizer, DdpWithZeroSgdMomentumEqualsDdpWithSgd) {
  expect_matches_plain_optimizer(OptimKind::kSgdMomentum);
}

TEST(ZeroRedundancyOptimizer, DdpWithZeroAdamEqualsDdpWithAdam) {
  expect_matches_plain_optimizer(OptimKind::kAdam);
}

TEST(ZeroRedundancyOptimizer, DdpWithZeroAdamWEqualsDdpWithAdamW) {
  expect_matches_plain_optimizer(OptimKind::kAdamW);
}

// mlp 6-16-16-4: numels 0.weight 96, 0.bias 16, 2.weight 256, 2.bias 16, 4.weight 64, 4.bias 4
// (452 in all). Sorted: #2 256, #0 96, #4 64, #1 16, #3 16, #5 4.
TEST(ZeroRedundancyOptimizer, PartitionsTheModelsParametersAndBuildsEachShardsOptimizer) {
  const std::vector<std::vector<std::vector<int>>> expected = {
      {{2, 0, 4, 1, 3, 5}},
      {{2}, {0, 4, 1, 3, 5}},      // [256, 196]
      {{2}, {0, 5}, {4, 1, 3}},    // [256, 100, 96]: 4.bias to r1 (tie 96/96 -> lowest rank)
      {{2}, {0}, {4}, {1, 3, 5}},  // [256, 96, 64, 36]
  };
  for (int n : {1, 2, 3, 4}) {
    spawn(n,
          [&](ProcessGroup& pg) {
            auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
            ZeroRedundancyOptimizer zero(model->parameters(), pg, factory_of(OptimKind::kAdam));
            EXPECT_EQ(zero.partition(), expected[static_cast<size_t>(n - 1)]) << "n=" << n;
            for (int r = 0; r < n; ++r)
              for (int i : zero.partition()[static_cast<size_t>(r)]) EXPECT_EQ(zero.rank_of(i), r);
            std::vector<Parameter*> shard;
            for (int i : zero.partition()[static_cast<size_t>(pg.rank())])
              shard.push_back(model->parameters()[i]);
            EXPECT_EQ(zero.local_params(), shard);
            ASSERT_NE(zero.local_optimizer(), nullptr);
            EXPECT_EQ(zero.local_optimizer()->params(), shard);
            EXPECT_EQ(zero.optimizer_type(), "Adam");
          },
          {.preset = "h100-sxm"});
  }
}

TEST(ZeroRedundancyOptimizer, OptimizerStateMemoryPerRankIsTheShardsState) {
  // Adam keeps exp_avg and exp_avg_sq (4 bytes each per element) on the device; its step counter is
  // a cpu scalar. SGD with momentum keeps one momentum buffer. Shard numels: see the test above.
  const std::vector<std::vector<uint64_t>> shard_numel = {
      {452}, {256, 196}, {256, 100, 96}, {256, 96, 64, 36}};
  for (int n : {1, 2, 3, 4}) {
    const Batches data = make_batches(2, 4 * n, 6, 4, 3);
    const auto adam = train_ddp(n, data, OptimKind::kAdam, /*zero=*/true);
    const auto sgd = train_ddp(n, data, OptimKind::kSgdMomentum, /*zero=*/true);
    const auto plain_adam = train_ddp(n, data, OptimKind::kAdam, /*zero=*/false);
    for (int r = 0; r < n; ++r) {
      const uint64_t numel = shard_numel[static_cast<size_t>(n - 1)][static_cast<size_t>(r)];
      EXPECT_EQ(adam[static_cast<size_t>(r)].optimizer_state_bytes, 2 * 4 * numel)
          << "n=" << n << " rank " << r;
      EXPECT_EQ(sgd[static_cast<size_t>(r)].optimizer_state_bytes, 4 * numel) << "n=" << n << " rank " << r;
      EXPECT_EQ(plain_adam[static_cast<size_t>(r)].optimizer_state_bytes, 2u * 4u * 452u) << "n=" << n;
    }
  }
}

TEST(ZeroRedundancyOptimizer, OnlyTheOwnersUpdateIsKeptAndBroadcast) {
  // Gradients are NOT averaged here: rank r's gradient is r + 1 everywhere. With SGD(lr = 0.5) each
  // parameter ends as init - 0.5 * (owner + 1) on every rank.
  spawn(3,
        [&](ProcessGroup& pg) {
          auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
          const Weights init = weights_of(model->parameters());
          ZeroRedundancyOptimizer zero(model->parameters(), pg, [](std::vector<Parameter*> shard) {
            return std::make_unique<SGD>(shard, SgdOptions{.lr = 0.5});
          });
          for (Parameter* p : model->parameters())
            p->grad = Tensor::full(p->data.shape(), static_cast<float>(pg.rank() + 1), pg.device(),
                                   MemoryCategory::kGradients);
          zero.step();
          const auto params = model->parameters();
          for (size_t i = 0; i < params.size(); ++i) {
            const float delta = 0.5f * static_cast<float>(zero.rank_of(static_cast<int>(i)) + 1);
            const std::vector<float> now = params[i]->data.to_vector();
            for (size_t k = 0; k < now.size(); ++k) ASSERT_EQ(now[k], init[i][k] - delta) << params[i]->name;
          }
        },
        {.preset = "h100-sxm"});
}

TEST(ZeroRedundancyOptimizer, ZeroGradClearsEveryParametersGradientNotOnlyTheShards) {
  spawn(2,
        [&](ProcessGroup& pg) {
          auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
          ZeroRedundancyOptimizer zero(model->parameters(), pg, factory_of(OptimKind::kSgdMomentum));
          for (Parameter* p : model->parameters())
            p->grad = Tensor::full(p->data.shape(), 1.0f, pg.device(), MemoryCategory::kGradients);
          zero.zero_grad(/*set_to_none=*/false);
          for (const Parameter* p : model->parameters())
            for (float g : p->grad.to_vector()) ASSERT_EQ(g, 0.0f) << p->name;
          zero.zero_grad();
          for (const Parameter* p : model->parameters()) EXPECT_FALSE(p->grad.defined()) << p->name;
        },
        {.preset = "h100-sxm"});
}

TEST(ZeroRedundancyOptimizer, RanksWithAnEmptyShardStillTakePartInStepAndConsolidation) {
  // One Linear(3, 2): weight (6) and bias (2) on ranks 0 and 1; ranks 2 and 3 own nothing.
  const Batches data = make_batches(2, 8, 3, 2, 11);
  const auto plain = train_ddp(4, data, OptimKind::kAdam, /*zero=*/false, "3-2");
  spawn(4,
        [&](ProcessGroup& pg) {
          auto model = Sequential::mlp("3-2", pg.device(), static_cast<uint64_t>(pg.rank() + 1));
          DistributedDataParallel ddp(*model, pg);
          ZeroRedundancyOptimizer zero(model->parameters(), pg, factory_of(OptimKind::kAdam));
          EXPECT_EQ(zero.partition(), (std::vector<std::vector<int>>{{0}, {1}, {}, {}}));
          EXPECT_EQ(zero.local_optimizer() == nullptr, pg.rank() >= 2);
          EXPECT_EQ(zero.optimizer_type(), "Adam");  // learned from a probe on the empty ranks
          CrossEntropyLoss loss;
          for (size_t s = 0; s < data.x.size(); ++s) {
            zero.zero_grad();
            loss.forward(ddp.forward(data.x[s].rows(pg.rank() * 2, 2).to(pg.device())),
                         data.y[s].rows(pg.rank() * 2, 2).to(pg.device()));
            ddp.backward(loss.backward());
            zero.step();
          }
          EXPECT_LE(max_diff(weights_of(model->parameters()), plain[static_cast<size_t>(pg.rank())].weights),
                    1e-6f);
          EXPECT_EQ(optimizer_state_bytes(pg.device()), pg.rank() == 0 ? 48u : pg.rank() == 1 ? 16u : 0u);
          zero.consolidate_state_dict(/*to=*/3);  // onto a rank that owns nothing
          if (pg.rank() == 3) {
            std::vector<std::string> keys;
            for (const auto& [key, tensor] : zero.state_dict()) keys.push_back(key);
            EXPECT_EQ(keys,
                      (std::vector<std::string>{"0.weight.step", "0.weight.exp_avg", "0.weight.exp_avg_sq",
                                                "0.bias.step", "0.bias.exp_avg", "0.bias.exp_avg_sq"}));
          }
        },
        {.preset = "h100-sxm"});
}

TEST(ZeroRedundancyOptimizer, TimingOnlyParametersAreStepped) {
  spawn(2,
        [&](ProcessGroup& pg) {
          auto model = Sequential::mlp_timing_only("1024-1024-10", pg.device());
          ZeroRedundancyOptimizer zero(model->parameters(), pg, factory_of(OptimKind::kAdam));
          for (Parameter* p : model->parameters())
            p->grad = Tensor::meta(p->data.shape(), pg.device(), MemoryCategory::kGradients);
          const int64_t before_ns = pg.device().clock_ns(StreamKind::kCompute);
          zero.step();
          EXPECT_GT(pg.device().clock_ns(StreamKind::kCompute), before_ns);
          // #0 1024x1024 -> r0; #2 10x1024, #1 1024, #3 10 -> r1.
          EXPECT_EQ(optimizer_state_bytes(pg.device()),
                    pg.rank() == 0 ? 8u * 1048576u : 8u * (10240u + 1024u + 10u));
          zero.consolidate_state_dict(0);
          if (pg.rank() == 0) {
            EXPECT_EQ(zero.state_dict().size(), 12u);
          }
        },
        {.preset = "h100-sxm"});
}

TEST(ZeroRedundancyOptimizer, TheSyncIsTracedAsBroadcastsFromEachOwnerInThePhaseOptimizer) {
  auto world = SimWorld::create(3, {.preset = "h100-sxm"});
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("dpscope_zero_trace_{}.jsonl", ::getpid());
  TraceHeader header;
  for (const Device& d : world->devices()) add_trace_device(header, d);
  {
    auto tracer = TraceRecorder::open(path, header, world->devices());
    spawn(world, [&](ProcessGroup& pg) {
      auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
      ZeroRedundancyOptimizer zero(model->parameters(), pg, factory_of(OptimKind::kSgdMomentum));
      for (Parameter* p : model->parameters())
        p->grad = Tensor::full(p->data.shape(), 1.0f, pg.device(), MemoryCategory::kGradients);
      zero.step();
    });
    tracer->close();
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  int sync_spans = 0;
  std::vector<int> roots;  // rank 0's collective spans, in order: broadcasts and their roots
  while (std::getline(in, line)) {
    const nlohmann::json e = nlohmann::json::parse(line);
    if (e["type"] != "span") continue;
    if (e["name"] == "optimizer.sync_params") {
      ++sync_spans;
      EXPECT_EQ(e["cat"], "phase");
      EXPECT_EQ(e["phase"], "optimizer");
    }
    if (e["cat"] == "collective" && e["rank"] == 0) {
      EXPECT_EQ(e["phase"], "optimizer");
      EXPECT_EQ(e["args"]["op"], "broadcast");
      roots.push_back(e["args"]["root"].get<int>());
    }
  }
  EXPECT_EQ(sync_spans, 3);                       // one per rank
  EXPECT_EQ(roots, (std::vector<int>{0, 1, 2}));  // one per owner rank (its shard coalesced), in rank order
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dpscope
