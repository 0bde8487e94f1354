// ZeroRedundancyOptimizer's state for checkpoints: consolidation onto one rank equals a plain
// optimizer's state_tensors(), it loads into a non-sharded optimizer and back into ZeRO (training
// then continues exactly), and every error message.
#include <gtest/gtest.h>

#include "zero_test_support.hpp"

namespace dpscope {
namespace {

using namespace zero_test;

std::vector<std::string> keys_of(const StateDict& state) {
  std::vector<std::string> keys;
  for (const auto& [key, tensor] : state) keys.push_back(key);
  return keys;
}

void expect_same_state(const StateDict& got, const StateDict& expected, const std::string& what) {
  ASSERT_EQ(keys_of(got), keys_of(expected)) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].second.shape(), expected[k].second.shape()) << what << " " << got[k].first;
    const std::vector<float> a = got[k].second.to_vector();
    const std::vector<float> b = expected[k].second.to_vector();
    ASSERT_EQ(a.size(), b.size()) << got[k].first;
    for (size_t j = 0; j < a.size(); ++j)
      EXPECT_NEAR(a[j], b[j], 1e-6) << what << " " << got[k].first << "[" << j << "]";
  }
}

TEST(ZeroRedundancyOptimizer, ConsolidatedStateEqualsThePlainOptimizersStateTensors) {
  for (OptimKind kind : {OptimKind::kAdam, OptimKind::kSgdMomentum}) {
    for (int n : {1, 2, 3, 4}) {
      const Batches data = make_batches(3, 4 * n, 6, 4, 21);
      const auto plain = train_ddp(n, data, kind, /*zero=*/false);
      const auto sharded = train_ddp(n, data, kind, /*zero=*/true);
      expect_same_state(sharded[0].state, plain[0].state, fmt::format("n={}", n));
      for (const auto& [key, tensor] : sharded[0].state) EXPECT_EQ(tensor.device(), Device::cpu()) << key;
    }
  }
  // The key format, spelled out once.
  const auto adam = train_ddp(2, make_batches(1, 8, 6, 4, 1), OptimKind::kAdam, /*zero=*/true);
  EXPECT_EQ(keys_of(adam[0].state).front(), "0.weight.step");
  EXPECT_EQ(keys_of(adam[0].state).back(), "4.bias.exp_avg_sq");
  EXPECT_EQ(adam[0].state.size(), 18u);
}

TEST(ZeroRedundancyOptimizer, StateDictIsOnlyAvailableOnTheRankItWasConsolidatedTo) {
  spawn(3,
        [&](ProcessGroup& pg) {
          auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
          ZeroRedundancyOptimizer zero(model->parameters(), pg, factory_of(OptimKind::kAdam));
          const std::string not_consolidated = fmt::format(
              "Optimizer state has not been consolidated on this rank. Please call "
              "`consolidate_state_dict(to={})` "
              "on all ranks beforehand if you meant to save the global state.",
              pg.rank());
          EXPECT_EQ(what_of([&] { zero.state_dict(); }), not_consolidated);
          for (Parameter* p : model->parameters())
            p->grad = Tensor::full(p->data.shape(), 0.5f, pg.device(), MemoryCategory::kGradients);
          zero.step();
          zero.consolidate_state_dict(/*to=*/1);
          if (pg.rank() == 1) {
            EXPECT_EQ(zero.state_dict().size(), 18u);
          } else {
            EXPECT_EQ(what_of([&] { zero.state_dict(); }), not_consolidated);
          }
          // A later consolidation elsewhere drops the earlier one.
          zero.consolidate_state_dict(/*to=*/0);
          if (pg.rank() == 0) {
            EXPECT_EQ(zero.state_dict().size(), 18u);
          } else {
            EXPECT_EQ(what_of([&] { zero.state_dict(); }), not_consolidated);
          }
          EXPECT_EQ(what_of([&] { zero.consolidate_state_dict(3); }),
                    "consolidate_state_dict: to=3 is not a rank of this process group (ranks 0..2)");
          EXPECT_EQ(what_of([&] { zero.consolidate_state_dict(-1); }),
                    "consolidate_state_dict: to=-1 is not a rank of this process group (ranks 0..2)");
        },
        {.preset = "h100-sxm"});
}

TEST(ZeroRedundancyOptimizer, IsAnOptimizerThatALoopDrivesLikeAPlainOne) {
  spawn(2,
        [&](ProcessGroup& pg) {
          auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
          const std::unique_ptr<Optimizer> optimizer = std::make_unique<ZeroRedundancyOptimizer>(
              model->parameters(), pg, factory_of(OptimKind::kAdam));
          EXPECT_STREQ(optimizer->type_name(), "ZeroRedundancyOptimizer");
          EXPECT_EQ(optimizer->params(), model->parameters());  // all of them, not the shard
          EXPECT_EQ(optimizer->slot_names(),
                    (std::vector<std::string>{"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}));  // Adam's
          EXPECT_NE(what_of([&] { optimizer->state_tensors(); }).find("has not been consolidated"),
                    std::string::npos);
          for (Parameter* p : model->parameters())
            p->grad = Tensor::full(p->data.shape(), 0.5f, pg.device(), MemoryCategory::kGradients);
          optimizer->step();
          optimizer->zero_grad();
          for (const Parameter* p : model->parameters()) EXPECT_FALSE(p->grad.defined()) << p->name;
          optimizer->consolidate_state_dict(0);
          if (pg.rank() == 0) {
            const StateDict state = optimizer->state_tensors();
            EXPECT_EQ(state.size(), 18u);  // 6 parameters x 3 slots, both shards
            // The Optimizer names load the full state, each rank keeping its shard.
            EXPECT_NO_THROW(optimizer->load_state_tensors(state));
          }
        },
        {.preset = "h100-sxm"});
  // A plain optimizer holds all its state: consolidation is a no-op and state_tensors() stays valid.
  const Device dev = Device::sim(0, find_preset("h100-sxm"));
  auto model = Sequential::mlp("6-16-16-4", dev, 1);
  const std::unique_ptr<Optimizer> adam = make_optimizer(OptimKind::kAdam, model->parameters());
  for (Parameter* p : model->parameters())
    p->grad = Tensor::full(p->data.shape(), 0.5f, dev, MemoryCategory::kGradients);
  adam->step();
  adam->consolidate_state_dict(0);
  EXPECT_EQ(adam->state_tensors().size(), 18u);
}

TEST(ZeroRedundancyOptimizer, ConsolidatedStateLoadsIntoANonShardedOptimizer) {
  const Batches data = make_batches(3, 12, 6, 4, 5);
  const auto sharded = train_ddp(3, data, OptimKind::kAdam, /*zero=*/true);
  const auto plain = train_ddp(3, data, OptimKind::kAdam, /*zero=*/false);
  const Device dev = Device::sim(90, find_preset("h100-sxm"));
  auto model = Sequential::mlp("6-16-16-4", dev, 1);
  Adam adam(model->parameters(), {.lr = 0.01});
  adam.load_state_tensors(sharded[0].state);
  expect_same_state(adam.state_tensors(), plain[0].state, "loaded into Adam");
}

// Trains `steps_before` steps with ZeRO(Adam) under DDP, consolidates on rank 0, then builds a fresh
// ZeroRedundancyOptimizer that loads that state on every rank and trains `steps_after` more steps.
std::vector<Weights> train_with_reload(int n, const Batches& data, int steps_before) {
  std::vector<Weights> result(static_cast<size_t>(n));
  StateDict checkpoint;  // written by rank 0, read by all after the barrier
  spawn(n,
        [&](ProcessGroup& pg) {
          auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
          DistributedDataParallel ddp(*model, pg);
          auto zero = std::make_unique<ZeroRedundancyOptimizer>(model->parameters(), pg,
                                                                factory_of(OptimKind::kAdam));
          CrossEntropyLoss loss;
          const int64_t per_rank = data.x[0].size(0) / n;
          for (size_t s = 0; s < data.x.size(); ++s) {
            if (static_cast<int>(s) == steps_before) {
              zero->consolidate_state_dict(0);
              if (pg.rank() == 0) checkpoint = zero->state_dict();
              pg.barrier()->wait();
              zero = std::make_unique<ZeroRedundancyOptimizer>(model->parameters(), pg,
                                                               factory_of(OptimKind::kAdam));
              zero->load_state_dict(checkpoint);
              // Only this rank's shard was kept.
              size_t expected_entries = 0;
              for (const auto& [key, tensor] : checkpoint)
                for (const Parameter* p : zero->local_params())
                  if (key.rfind(p->name + ".", 0) == 0 &&
                      key.find('.', p->name.size() + 1) == std::string::npos)
                    ++expected_entries;
              const size_t local_entries =
                  zero->local_optimizer() ? zero->local_optimizer()->state_tensors().size() : 0;
              EXPECT_EQ(local_entries, expected_entries) << "rank " << pg.rank();
              EXPECT_EQ(local_entries, 3 * zero->local_params().size()) << "rank " << pg.rank();
            }
            zero->zero_grad();
            const Tensor x = data.x[s].rows(pg.rank() * per_rank, per_rank).to(pg.device());
            const Tensor y = data.y[s].rows(pg.rank() * per_rank, per_rank).to(pg.device());
            loss.forward(ddp.forward(x), y);
            ddp.backward(loss.backward());
            zero->step();
          }
          result[static_cast<size_t>(pg.rank())] = weights_of(model->parameters());
        },
        {.preset = "h100-sxm"});
  return result;
}

TEST(ZeroRedundancyOptimizer, LoadingTheConsolidatedStateContinuesTrainingExactly) {
  for (int n : {2, 3}) {
    const Batches data = make_batches(5, 4 * n, 6, 4, 13);
    const auto uninterrupted = train_with_reload(n, data, /*steps_before=*/99);
    const auto reloaded = train_with_reload(n, data, /*steps_before=*/2);
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(reloaded[static_cast<size_t>(r)], uninterrupted[static_cast<size_t>(r)])
          << "n=" << n << " rank " << r;
  }
}

TEST(ZeroRedundancyOptimizer, LoadStateDictRefusesKeysThatNameNoParameterOrSlot) {
  spawn(2,
        [&](ProcessGroup& pg) {
          auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
          ZeroRedundancyOptimizer zero(model->parameters(), pg, factory_of(OptimKind::kAdam));
          const Tensor scalar = Tensor::zeros({});
          // Checked on every rank, whether or not it owns the parameter named.
          EXPECT_EQ(what_of([&] {
                      zero.load_state_dict({{"9.weight.exp_avg", scalar}});
                    }),
                    "ZeroRedundancyOptimizer.load_state_dict: unexpected key \"9.weight.exp_avg\" for Adam "
                    "(expected <parameter name>.<step|exp_avg|exp_avg_sq|max_exp_avg_sq>)");
          EXPECT_EQ(
              what_of([&] {
                zero.load_state_dict({{"0.weight.momentum_buffer", scalar}});
              }),
              "ZeroRedundancyOptimizer.load_state_dict: unexpected key \"0.weight.momentum_buffer\" for Adam "
              "(expected <parameter name>.<step|exp_avg|exp_avg_sq|max_exp_avg_sq>)");
          // The owner's optimizer checks shapes (2.weight belongs to rank 0).
          const std::string bad_shape = what_of([&] {
            zero.load_state_dict({{"2.weight.exp_avg", Tensor::zeros({3})}});
          });
          if (pg.rank() == 0) {
            EXPECT_EQ(
                bad_shape,
                "load_state_tensors: size mismatch for 2.weight.exp_avg: checkpoint [3], optimizer [16, 16]");
          } else {
            EXPECT_EQ(bad_shape, "(no error)");
          }
        },
        {.preset = "h100-sxm"});
}

TEST(ZeroRedundancyOptimizer, ConstructionErrorsNameTheProblem) {
  auto world = SimWorld::create(2, {.preset = "h100-sxm"});
  spawn(world, [&](ProcessGroup& pg) {
    auto model = Sequential::mlp("6-16-16-4", pg.device(), 1);
    const auto factory = factory_of(OptimKind::kSgdMomentum);
    EXPECT_EQ(what_of([&] { ZeroRedundancyOptimizer({}, pg, factory); }),
              "ZeroRedundancyOptimizer got an empty parameter list");
    EXPECT_EQ(
        what_of([&] { ZeroRedundancyOptimizer(model->parameters(), pg, nullptr); }),
        "ZeroRedundancyOptimizer needs make_local_optimizer, the factory of the wrapped optimizer; got an "
        "empty function");
    EXPECT_EQ(what_of([&] {
                ZeroRedundancyOptimizer({model->parameters()[0], nullptr}, pg, factory);
              }),
              "ZeroRedundancyOptimizer got a null parameter at index 1");
    EXPECT_EQ(what_of([&] {
                ZeroRedundancyOptimizer({model->parameters()[1], model->parameters()[1]}, pg, factory);
              }),
              "ZeroRedundancyOptimizer got parameter 0.bias more than once");
    // The other rank's device.
    auto elsewhere = Sequential::mlp("6-4", world->device(1 - pg.rank()), 1);
    EXPECT_EQ(
        what_of([&] { ZeroRedundancyOptimizer(elsewhere->parameters(), pg, factory); }),
        fmt::format("ZeroRedundancyOptimizer on rank {}: parameter 0.weight is on sim:{}, but the process "
                    "group's device is sim:{}",
                    pg.rank(), 1 - pg.rank(), pg.rank()));
    EXPECT_EQ(what_of([&] {
                ZeroRedundancyOptimizer(model->parameters(), pg,
                                        [](std::vector<Parameter*>) { return std::unique_ptr<Optimizer>(); });
              }),
              "ZeroRedundancyOptimizer: make_local_optimizer returned no optimizer");
    auto all = model->parameters();
    EXPECT_EQ(
        what_of([&] {
          ZeroRedundancyOptimizer(model->parameters(), pg, [&](std::vector<Parameter*>) {
            return std::make_unique<SGD>(all, SgdOptions{.lr = 0.1});
          });
        }),
        fmt::format("ZeroRedundancyOptimizer: make_local_optimizer must build the optimizer over exactly the "
                    "{} parameters of the shard it is given, got one over 6 parameters",
                    pg.rank() == 0 ? 1 : 5));
    // The wrapped optimizer's own option errors come through unchanged.
    EXPECT_EQ(what_of([&] {
                ZeroRedundancyOptimizer(model->parameters(), pg, [](std::vector<Parameter*> shard) {
                  return std::make_unique<SGD>(shard, SgdOptions{.lr = -0.1});
                });
              }),
              "Invalid learning rate: -0.1");
    ZeroRedundancyOptimizer zero(model->parameters(), pg, factory);
    EXPECT_EQ(what_of([&] { zero.rank_of(6); }),
              "ZeroRedundancyOptimizer::rank_of: parameter index 6 is out of range [0, 6)");
    EXPECT_EQ(what_of([&] { zero.rank_of(-1); }),
              "ZeroRedundancyOptimizer::rank_of: parameter index -1 is out of range [0, 6)");
  });
}

TEST(ZeroRedundancyOptimizer, ConstructionErrorsAreInvalidArgument) {
  spawn(1,
        [&](ProcessGroup& pg) {
          try {
            ZeroRedundancyOptimizer({}, pg, factory_of(OptimKind::kAdam));
            FAIL() << "expected an error";
          } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
          }
          auto model = Sequential::mlp("6-4", Device::cpu(), 1);
          try {
            ZeroRedundancyOptimizer(model->parameters(), pg, factory_of(OptimKind::kAdam));
            FAIL() << "expected an error";
          } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
          }
        },
        {.preset = "h100-sxm"});
}

}  // namespace
}  // namespace dpscope
