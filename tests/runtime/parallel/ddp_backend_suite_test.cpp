// DistributedDataParallel on every process-group backend built (runtime/comm/backend_cases.hpp):
// DDP over n ranks equals one device trained on the concatenated batch, and no_sync accumulates
// locally and reduces the sum at the next synchronised backward.
#include <gtest/gtest.h>

#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "runtime/comm/backend_cases.hpp"
#include "support/batches.hpp"

namespace dpscope {
namespace {

using testing::Batches;
using testing::make_batches;
using testing::max_diff;
using testing::Weights;

constexpr float kTolerance = 1e-6f;  // float32 rounding of a differently ordered mean

Weights weights_of(Module& m) { return testing::weights_of(m.parameters()); }

SimWorldOptions machine() { return {.preset = "h100-sxm"}; }

// One device. Each step: zero_grad once, then backward over every batch of `micro` (gradients
// accumulate), then one SGD step.
Weights train_single(const std::string& spec, const std::vector<Batches>& micro, const SgdOptions& sgd) {
  const Device dev = Device::sim(99, find_preset("h100-sxm"));
  auto model = Sequential::mlp(spec, dev, /*seed=*/1);
  SGD opt(model->parameters(), sgd);
  CrossEntropyLoss loss;
  for (size_t s = 0; s < micro[0].x.size(); ++s) {
    opt.zero_grad();
    for (const Batches& data : micro) {
      loss.forward(model->forward(data.x[s].to(dev)), data.y[s].to(dev));
      model->backward(loss.backward());
    }
    opt.step();
  }
  return weights_of(*model);
}

class Ddp : public test::BackendSuite {
 protected:
  // n ranks; rank r takes rows [r*B, (r+1)*B) of each global batch. Per step, every micro-batch
  // but the last runs under no_sync(). Returns every rank's weights.
  std::vector<Weights> train_ddp(int n, const std::string& spec, const std::vector<Batches>& micro,
                                 const SgdOptions& sgd, DdpOptions options = {}) {
    std::vector<Weights> result(static_cast<size_t>(n));
    spawn_ranks(test::init_options(GetParam(), n, machine()), [&](ProcessGroup& pg) {
      // Different initial weights per rank: DDP's construction broadcasts rank 0's (seed 1).
      auto model = Sequential::mlp(spec, pg.device(), /*seed=*/static_cast<uint64_t>(pg.rank() + 1));
      DistributedDataParallel ddp(*model, pg, options);
      SGD opt(model->parameters(), sgd);
      CrossEntropyLoss loss;
      const int64_t per_rank = micro[0].x[0].size(0) / n;
      for (size_t s = 0; s < micro[0].x.size(); ++s) {
        opt.zero_grad();
        for (size_t m = 0; m < micro.size(); ++m) {
          const Tensor x = micro[m].x[s].rows(pg.rank() * per_rank, per_rank).to(pg.device());
          const Tensor y = micro[m].y[s].rows(pg.rank() * per_rank, per_rank).to(pg.device());
          if (m + 1 < micro.size()) {
            auto guard = ddp.no_sync();
            loss.forward(ddp.forward(x), y);
            ddp.backward(loss.backward());
          } else {
            loss.forward(ddp.forward(x), y);
            ddp.backward(loss.backward());
          }
        }
        opt.step();
      }
      result[static_cast<size_t>(pg.rank())] = weights_of(*model);
    });
    return result;
  }
};

TEST_P(Ddp, EqualsSingleDeviceTrainingOnTheConcatenatedBatch) {
  const SgdOptions sgd{.lr = 0.1, .momentum = 0.9};
  for (int n : {1, 2, 3, 4, 8}) {
    if (!fits(n)) continue;
    const std::vector<Batches> data = {make_batches(4, 8 * n, 6, 4, 5)};
    const Weights single = train_single("6-16-16-4", data, sgd);
    // Small buckets, so several all-reduces are in flight during backward.
    const auto ranks =
        train_ddp(n, "6-16-16-4", data, sgd, {.bucket_cap_mb = 0.001, .first_bucket_mb = 0.0005});
    for (int r = 0; r < n; ++r) {
      EXPECT_LE(max_diff(single, ranks[static_cast<size_t>(r)]), kTolerance) << "n=" << n << " rank " << r;
      EXPECT_EQ(ranks[static_cast<size_t>(r)], ranks[0]) << "ranks must hold bit-identical weights, n=" << n;
    }
  }
}

TEST_P(Ddp, NoSyncAccumulatesLocallyAndReducesTheSumAtTheNextSynchronisedBackward) {
  const SgdOptions sgd{.lr = 0.1};
  for (int n : {2, 4}) {
    if (!fits(n)) continue;
    // Three micro-batches per step: two under no_sync, the third synchronised.
    const std::vector<Batches> micro = {make_batches(2, 4 * n, 5, 3, 9), make_batches(2, 4 * n, 5, 3, 10),
                                        make_batches(2, 4 * n, 5, 3, 11)};
    const Weights single = train_single("5-8-3", micro, sgd);
    const auto ranks = train_ddp(n, "5-8-3", micro, sgd);
    for (int r = 0; r < n; ++r)
      EXPECT_LE(max_diff(single, ranks[static_cast<size_t>(r)]), kTolerance) << "n=" << n << " rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Ddp, ::testing::ValuesIn(test::backend_cases()), test::case_name);

}  // namespace
}  // namespace dpscope
