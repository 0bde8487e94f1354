// Shared helpers of the ZeRO tests (parallel_tests): deterministic batches, DDP training on n simulated ranks
// with either a plain optimizer or ZeroRedundancyOptimizer, and error-text capture.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/adam.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/parallel/zero_redundancy_optimizer.hpp"
#include "support/batches.hpp"
#include "support/errors.hpp"

namespace dpscope::zero_test {

using testing::what_of;

using testing::Batches;
using testing::make_batches;
using testing::max_diff;
using testing::Weights;
using testing::weights_of;

enum class OptimKind { kSgdMomentum, kAdam, kAdamW };

inline std::unique_ptr<Optimizer> make_optimizer(OptimKind kind, std::vector<Parameter*> params) {
  switch (kind) {
    case OptimKind::kSgdMomentum:
      return std::make_unique<SGD>(params, SgdOptions{.lr = 0.1, .momentum = 0.9});
    case OptimKind::kAdam: return std::make_unique<Adam>(params, AdamOptions{.lr = 0.01});
    case OptimKind::kAdamW:
      return std::make_unique<AdamW>(params, AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
  }
  return nullptr;
}

inline OptimizerFactory factory_of(OptimKind kind) {
  return [kind](std::vector<Parameter*> shard) { return make_optimizer(kind, std::move(shard)); };
}

inline uint64_t optimizer_state_bytes(const Device& dev) {
  return dev.memory().bytes[static_cast<size_t>(MemoryCategory::kOptimizerState)];
}

// What one rank ends a DDP run with.
struct RankResult {
  Weights weights;
  uint64_t optimizer_state_bytes = 0;  // on the rank's device after the last step
  StateDict state;                     // rank 0: the (consolidated) optimizer state, on the cpu
};

// n ranks of DDP, rank r taking rows [r*B, (r+1)*B) of each global batch, then either a plain
// optimizer over all parameters or ZeroRedundancyOptimizer, both driven through the Optimizer
// interface (the loop has no ZeRO branch); rank 0 ends with the (consolidated) optimizer state.
inline std::vector<RankResult> train_ddp(int n, const Batches& data, OptimKind kind, bool zero,
                                         const std::string& spec = "6-16-16-4") {
  std::vector<RankResult> results(static_cast<size_t>(n));
  auto world = SimWorld::create(n, {.preset = "h100-sxm"});
  spawn(world, [&](ProcessGroup& pg) {
    auto model = Sequential::mlp(spec, pg.device(), /*seed=*/static_cast<uint64_t>(pg.rank() + 1));
    DistributedDataParallel ddp(*model, pg, {.bucket_cap_mb = 0.001, .first_bucket_mb = 0.0005});
    const std::unique_ptr<Optimizer> optimizer =
        zero ? std::make_unique<ZeroRedundancyOptimizer>(model->parameters(), pg, factory_of(kind))
             : make_optimizer(kind, model->parameters());
    CrossEntropyLoss loss;
    const int64_t per_rank = data.x[0].size(0) / n;
    for (size_t s = 0; s < data.x.size(); ++s) {
      optimizer->zero_grad();
      const Tensor x = data.x[s].rows(pg.rank() * per_rank, per_rank).to(pg.device());
      const Tensor y = data.y[s].rows(pg.rank() * per_rank, per_rank).to(pg.device());
      loss.forward(ddp.forward(x), y);
      ddp.backward(loss.backward());
      optimizer->step();
    }
    RankResult& result = results[static_cast<size_t>(pg.rank())];
    result.weights = weights_of(model->parameters());
    result.optimizer_state_bytes = optimizer_state_bytes(pg.device());
    optimizer->consolidate_state_dict(0);  // collective for ZeRO, a no-op for a plain optimizer
    if (pg.rank() == 0) result.state = optimizer->state_tensors();
  });
  return results;
}

}  // namespace dpscope::zero_test
