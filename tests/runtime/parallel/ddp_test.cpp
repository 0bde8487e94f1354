// DistributedDataParallel on simulated GPUs: equality with one device, buckets (initial, rebuilt),
// overlap in simulated time, no_sync, unused parameters, shape checks, bucket views, fp16 hook.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>

#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/nn/linear.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/nn/unused_parameter.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "support/batches.hpp"

namespace dpscope {
namespace {

using testing::Batches;
using testing::make_batches;
using testing::max_diff;

std::vector<std::vector<float>> weights_of(Module& m) { return testing::weights_of(m.parameters()); }

// One device, the whole global batch per step.
std::vector<std::vector<float>> train_single(const std::string& spec, const Batches& data) {
  const Device dev = Device::sim(99, find_preset("h100-sxm"));
  auto model = Sequential::mlp(spec, dev, /*seed=*/1);
  SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  CrossEntropyLoss loss;
  for (size_t s = 0; s < data.x.size(); ++s) {
    opt.zero_grad();
    loss.forward(model->forward(data.x[s].to(dev)), data.y[s].to(dev));
    model->backward(loss.backward());
    opt.step();
  }
  return weights_of(*model);
}

// n ranks, rank r takes rows [r*B, (r+1)*B) of each global batch. Returns every rank's weights.
std::vector<std::vector<std::vector<float>>> train_ddp(int n, const std::string& spec, const Batches& data,
                                                       DdpOptions options = {}) {
  std::vector<std::vector<std::vector<float>>> result(static_cast<size_t>(n));
  auto world = SimWorld::create(n, {.preset = "h100-sxm"});
  spawn(world, [&](ProcessGroup& pg) {
    // Different initial weights per rank: DDP's construction broadcasts rank 0's (seed 1).
    auto model = Sequential::mlp(spec, pg.device(), /*seed=*/static_cast<uint64_t>(pg.rank() + 1));
    DistributedDataParallel ddp(*model, pg, options);
    SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
    CrossEntropyLoss loss;
    const int64_t per_rank = data.x[0].size(0) / n;
    for (size_t s = 0; s < data.x.size(); ++s) {
      opt.zero_grad(/*set_to_none=*/!options.gradient_as_bucket_view);
      const Tensor x = data.x[s].rows(pg.rank() * per_rank, per_rank).to(pg.device());
      const Tensor y = data.y[s].rows(pg.rank() * per_rank, per_rank).to(pg.device());
      loss.forward(ddp.forward(x), y);
      ddp.backward(loss.backward());
      opt.step();
    }
    result[static_cast<size_t>(pg.rank())] = weights_of(*model);
  });
  return result;
}

TEST(DistributedDataParallel, EqualsSingleDeviceTrainingOnTheGlobalBatch) {
  for (int n : {1, 2, 3, 4, 8}) {
    const Batches data = make_batches(4, 8 * n, 6, 4, 5);
    const auto single = train_single("6-16-16-4", data);
    const auto ranks = train_ddp(n, "6-16-16-4", data, {.bucket_cap_mb = 0.001, .first_bucket_mb = 0.0005});
    for (int r = 0; r < n; ++r) {
      EXPECT_LE(max_diff(single, ranks[static_cast<size_t>(r)]), 1e-5f) << "n=" << n << " rank " << r;
      EXPECT_EQ(ranks[static_cast<size_t>(r)], ranks[0]) << "ranks must hold bit-identical weights, n=" << n;
    }
  }
}

TEST(DistributedDataParallel, StartsWithOneBucketAndRebuildsInGradientReadyOrder) {
  auto world = SimWorld::create(2, {.preset = "h100-sxm"});
  spawn(world, [&](ProcessGroup& pg) {
    // Parameter bytes: 0.weight 1024, 0.bias 128, 2.weight 4096, 2.bias 128, 4.weight 512, 4.bias 16.
    auto model = Sequential::mlp("8-32-32-4", pg.device(), 1);
    DistributedDataParallel ddp(*model, pg,
                                {.bucket_cap_mb = 4096.0 / 1048576, .first_bucket_mb = 1024.0 / 1048576});
    ASSERT_EQ(ddp.buckets().size(), 1u);
    EXPECT_EQ(ddp.buckets()[0].params, (std::vector<int>{0, 1, 2, 3, 4, 5}));
    CrossEntropyLoss loss;
    const Batches data = make_batches(2, 4, 8, 4, 1);
    for (int s = 0; s < 2; ++s) {
      loss.forward(ddp.forward(data.x[s].to(pg.device())), data.y[s].to(pg.device()));
      ddp.backward(loss.backward());
    }
    EXPECT_EQ(ddp.ready_order(),
              (std::vector<int>{5, 4, 3, 2, 1, 0}));  // bias before weight, last layer first
    ASSERT_TRUE(ddp.buckets_rebuilt());
    // First limit 1024 B: 16 + 512 + 128 + 4096 closes bucket 0; then limit 4096: 128 + 1024 stays open.
    ASSERT_EQ(ddp.buckets().size(), 2u);
    EXPECT_EQ(ddp.buckets()[0].params, (std::vector<int>{5, 4, 3, 2}));
    EXPECT_EQ(ddp.buckets()[1].params, (std::vector<int>{1, 0}));
    EXPECT_EQ(ddp.buckets()[0].state, DdpBucket::State::kDone);
  });
}

TEST(DistributedDataParallel, BucketAllReducesOverlapTheRestOfBackward) {
  auto world = SimWorld::create(4, {.preset = "h100-sxm"});
  spawn(world, [&](ProcessGroup& pg) {
    auto model = Sequential::mlp("1024-1024-1024-1024-10", pg.device(), 1);
    DistributedDataParallel ddp(*model, pg, {.bucket_cap_mb = 4.0, .first_bucket_mb = 1.0});
    int64_t last_grad_ready_ns = 0;
    model->register_grad_ready_hook(
        [&](Parameter&) { last_grad_ready_ns = pg.device().clock_ns(StreamKind::kCompute); });
    CrossEntropyLoss loss;
    const Batches data = make_batches(2, 64, 1024, 10, 2);
    for (int s = 0; s < 2; ++s) {
      loss.forward(ddp.forward(data.x[s].to(pg.device())), data.y[s].to(pg.device()));
      ddp.backward(loss.backward());
    }
    ASSERT_GE(ddp.buckets().size(), 3u);
    // Bucket 0 (the last layers) finished its all-reduce before backward produced its last gradient.
    EXPECT_LT(ddp.buckets()[0].work->end_ns(), last_grad_ready_ns);
    // And the buckets ran in order on the comm stream.
    for (size_t b = 1; b < ddp.buckets().size(); ++b)
      EXPECT_GE(ddp.buckets()[b].work->start_ns(), ddp.buckets()[b - 1].work->end_ns());
  });
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyAndReducesTheSumLater) {
  const Batches data = make_batches(2, 8, 5, 3, 9);
  // Reference: one device, gradients of both global batches accumulated, one SGD step.
  const Device dev = Device::sim(98, find_preset("h100-sxm"));
  auto reference = Sequential::mlp("5-8-3", dev, 1);
  SGD ref_opt(reference->parameters(), {.lr = 0.1});
  CrossEntropyLoss ref_loss;
  for (int s = 0; s < 2; ++s) {
    ref_loss.forward(reference->forward(data.x[s].to(dev)), data.y[s].to(dev));
    reference->backward(ref_loss.backward());
  }
  ref_opt.step();
  const auto expected = weights_of(*reference);

  auto world = SimWorld::create(2, {.preset = "h100-sxm"});
  spawn(world, [&](ProcessGroup& pg) {
    auto model = Sequential::mlp("5-8-3", pg.device(), 1);
    DistributedDataParallel ddp(*model, pg);
    SGD opt(model->parameters(), {.lr = 0.1});
    CrossEntropyLoss loss;
    for (int s = 0; s < 2; ++s) {
      const Tensor x = data.x[static_cast<size_t>(s)].rows(pg.rank() * 4, 4).to(pg.device());
      const Tensor y = data.y[static_cast<size_t>(s)].rows(pg.rank() * 4, 4).to(pg.device());
      if (s == 0) {
        auto guard = ddp.no_sync();
        loss.forward(ddp.forward(x), y);
        ddp.backward(loss.backward());
      } else {
        loss.forward(ddp.forward(x), y);
        ddp.backward(loss.backward());
      }
    }
    opt.step();
    EXPECT_LE(max_diff(expected, weights_of(*model)), 1e-5f) << "rank " << pg.rank();
  });
}

std::unique_ptr<Module> model_with_unused(const Device& dev) {
  std::mt19937 gen(3);
  return std::make_unique<WithUnusedParameter>(Sequential::mlp("3-4-2", dev, 1),
                                               std::make_unique<Linear>(4, 4, dev, gen));
}

TEST(DistributedDataParallel, UnusedParameterFailsTheNextIterationLikePyTorch) {
  auto world = SimWorld::create(2, {.preset = "h100-sxm"});
  try {
    spawn(world, [&](ProcessGroup& pg) {
      auto model = model_with_unused(pg.device());
      DistributedDataParallel ddp(*model, pg);
      CrossEntropyLoss loss;
      const Batches data = make_batches(2, 2, 3, 2, 4);
      for (int s = 0; s < 2; ++s) {
        loss.forward(ddp.forward(data.x[static_cast<size_t>(s)].to(pg.device())),
                     data.y[static_cast<size_t>(s)].to(pg.device()));
        ddp.backward(loss.backward());
      }
    });
    FAIL() << "expected the unused-parameter error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(
        what.find("Expected to have finished reduction in the prior iteration before starting a new one"),
        std::string::npos)
        << what;
    EXPECT_NE(what.find("find_unused_parameters=True"), std::string::npos) << what;
    EXPECT_NE(what.find("Parameter indices which did not receive grad for rank"), std::string::npos) << what;
    EXPECT_NE(what.find(": 4, 5"), std::string::npos) << what;  // unused.weight, unused.bias
  }
}

TEST(DistributedDataParallel, FindUnusedParametersLetsTrainingContinue) {
  auto world = SimWorld::create(2, {.preset = "h100-sxm"});
  spawn(world, [&](ProcessGroup& pg) {
    auto model = model_with_unused(pg.device());
    DistributedDataParallel ddp(*model, pg, {.find_unused_parameters = true});
    CrossEntropyLoss loss;
    const Batches data = make_batches(3, 2, 3, 2, 4);
    for (int s = 0; s < 3; ++s) {
      loss.forward(ddp.forward(data.x[static_cast<size_t>(s)].to(pg.device())),
                   data.y[static_cast<size_t>(s)].to(pg.device()));
      ddp.backward(loss.backward());
    }
    const auto params = model->parameters();
    EXPECT_EQ(params[4]->name, "unused.weight");
    for (float g : params[4]->grad.to_vector()) EXPECT_EQ(g, 0.0f);
  });
}

TEST(DistributedDataParallel, DifferentModelsAcrossRanksAreRefusedNamingTheRank) {
  auto world = SimWorld::create(2, {.preset = "h100-sxm"});
  try {
    spawn(world, [&](ProcessGroup& pg) {
      auto model = Sequential::mlp(pg.rank() == 0 ? "3-4-2" : "3-5-2", pg.device(), 1);
      DistributedDataParallel ddp(*model, pg);
    });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "DDP expects same model across all ranks, but rank 1's parameter 0.weight has shape [5, 3] while "
            "rank 0's has [4, 3]"),
        std::string::npos)
        << e.what();
  }
  auto world2 = SimWorld::create(2, {.preset = "h100-sxm"});
  try {
    spawn(world2, [&](ProcessGroup& pg) {
      auto model = Sequential::mlp(pg.rank() == 0 ? "3-4-2" : "3-4-4-2", pg.device(), 1);
      DistributedDataParallel ddp(*model, pg);
    });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Rank 1 has 6 params, while rank 0 has inconsistent 4 params."),
              std::string::npos)
        << e.what();
  }
}

TEST(DistributedDataParallel, GradientAsBucketViewNeedsNoSeparateGradientMemory) {
  const Batches data = make_batches(3, 8, 6, 4, 7);
  const auto plain = train_ddp(2, "6-16-4", data);
  const auto views = train_ddp(2, "6-16-4", data, {.gradient_as_bucket_view = true});
  EXPECT_LE(max_diff(plain[0], views[0]), 1e-6f);
  auto world = SimWorld::create(2, {.preset = "h100-sxm"});
  spawn(world, [&](ProcessGroup& pg) {
    auto model = Sequential::mlp("6-16-4", pg.device(), 1);
    DistributedDataParallel ddp(*model, pg, {.gradient_as_bucket_view = true});
    SGD opt(model->parameters(), {.lr = 0.1});
    CrossEntropyLoss loss;
    for (int s = 0; s < 3; ++s) {
      opt.zero_grad(/*set_to_none=*/false);
      loss.forward(ddp.forward(data.x[static_cast<size_t>(s)].rows(pg.rank() * 4, 4).to(pg.device())),
                   data.y[static_cast<size_t>(s)].rows(pg.rank() * 4, 4).to(pg.device()));
      ddp.backward(loss.backward());
      opt.step();
    }
    EXPECT_EQ(pg.device().memory().bytes[static_cast<int>(MemoryCategory::kGradients)], 0u);
    const Parameter& p = *model->parameters()[0];
    const DdpBucket& b = ddp.buckets()[0];
    EXPECT_GE(p.grad.f32(), b.buffer.f32());
    EXPECT_LT(p.grad.f32(), b.buffer.f32() + b.numel);
  });
}

TEST(DistributedDataParallel, Fp16CompressionIsCloseButNotExact) {
  const Batches data = make_batches(3, 8, 6, 4, 11);
  const auto plain = train_ddp(2, "6-16-4", data);
  const auto fp16 = train_ddp(2, "6-16-4", data, {.comm_hook = CommHook::kFp16Compress});
  EXPECT_LE(max_diff(plain[0], fp16[0]), 1e-3f);
  EXPECT_NE(plain[0], fp16[0]);
}

// Every rank's gradients after one DDP backward on its rows [r*B, (r+1)*B) of one global batch.
std::vector<testing::Weights> grads_after_one_backward(int n, const Batches& data, DdpOptions options) {
  std::vector<testing::Weights> grads(static_cast<size_t>(n));
  spawn(n, [&](ProcessGroup& pg) {
    auto model = Sequential::mlp("6-8-4", pg.device(), /*seed=*/1);
    DistributedDataParallel ddp(*model, pg, options);
    CrossEntropyLoss loss;
    const int64_t per_rank = data.x[0].size(0) / n;
    loss.forward(ddp.forward(data.x[0].rows(pg.rank() * per_rank, per_rank).to(pg.device())),
                 data.y[0].rows(pg.rank() * per_rank, per_rank).to(pg.device()));
    ddp.backward(loss.backward());
    for (const Parameter* p : model->parameters())
      grads[static_cast<size_t>(pg.rank())].push_back(p->grad.to_vector());
  });
  return grads;
}

TEST(DistributedDataParallel, SkippingTheAverageScalesGradientsByTheWorldSize) {
  // DDP averages: grad = (1/n) * sum over ranks. Without the average (the lesson's pitfall) every
  // rank holds the plain sum, exactly n times the average: with n = 4, a power of two, scaling
  // commutes with rounding, so the relation holds bit for bit.
  constexpr int kWorld = 4;
  const Batches data = make_batches(1, 8, 6, 4, 13);
  const auto averaged = grads_after_one_backward(kWorld, data, {});
  const auto summed = grads_after_one_backward(kWorld, data, {.average_gradients = false});
  for (int rank = 0; rank < kWorld; ++rank) {
    const auto& avg = averaged[static_cast<size_t>(rank)];
    const auto& sum = summed[static_cast<size_t>(rank)];
    ASSERT_EQ(avg.size(), sum.size());
    for (size_t p = 0; p < avg.size(); ++p)
      for (size_t i = 0; i < avg[p].size(); ++i)
        ASSERT_EQ(sum[p][i], kWorld * avg[p][i]) << "rank " << rank << " parameter " << p << " [" << i << "]";
  }
  EXPECT_NE(averaged[0], summed[0]);  // the gradients are not all zero
}

}  // namespace
}  // namespace dpscope
