// DDP with a rank-0 checkpoint, a resume after an "interruption", and ZeroRedundancyOptimizer —
// the seeds' third tutorial:
//
//   optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
//   ...
//   optimizer.consolidate_state_dict(to=0)           # every rank: the shards' state meets on rank 0
//   if rank == 0: torch.save({"model": ..., "optim": optimizer.state_dict(), "step": s}, path)
//   dist.barrier()                                   # nobody reads a half-written checkpoint
//
// The run is cut after 6 of 10 steps and resumed from the checkpoint; the result must equal an
// uninterrupted 10-step run bit for bit. Lesson 05 shows the optimizer-state memory ZeRO saves.
#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "dpscope/comm/spawn.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/io/checkpoint.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/adam.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/parallel/zero_redundancy_optimizer.hpp"

namespace {

using namespace dpscope;
constexpr int kWorld = 4;
constexpr int64_t kBatch = 8;  // per rank

// Trains steps [first, last) on every rank; returns rank 0's final weights.
std::vector<float> train(const std::filesystem::path& dir, int64_t first, int64_t last, bool save_at_end) {
  auto dataset = make_dataset("spirals:256", /*seed=*/0);
  std::vector<float> weights;
  spawn(kWorld,
        [&](ProcessGroup& pg) {
          auto net = Sequential::mlp("2-32-32-3", pg.device(), /*seed=*/0);
          std::optional<CheckpointState> resumed;
          if (first > 0) resumed = load_checkpoint(*latest_checkpoint(dir));  // every rank reads it
          if (resumed) net->load_state_dict(resumed->model);
          DistributedDataParallel model(*net, pg);
          ZeroRedundancyOptimizer optimizer(net->parameters(), pg, [](std::vector<Parameter*> shard) {
            AdamOptions options;
            options.lr = 1e-2;
            return std::make_unique<Adam>(std::move(shard), options);
          });
          if (resumed) optimizer.load_state_dict(resumed->optimizer);  // each rank keeps its shard
          CrossEntropyLoss loss_fn;
          DistributedSampler sampler(dataset->size(), {.num_replicas = kWorld, .rank = pg.rank()});
          DataLoader loader(dataset, {.batch_size = kBatch, .sampler = [&](int64_t epoch) {
                                        sampler.set_epoch(epoch);
                                        return sampler.indices();
                                      }});
          const int64_t per_epoch = loader.num_batches();
          for (int64_t step = first; step < last; ++step) {
            loader.set_epoch(step / per_epoch);
            const Batch batch = loader.batch(step % per_epoch);
            optimizer.zero_grad();
            loss_fn.forward(model.forward(batch.inputs.to(pg.device())), batch.targets.to(pg.device()));
            model.backward(loss_fn.backward());
            optimizer.step();
          }
          if (save_at_end) {
            optimizer.consolidate_state_dict(0);
            if (pg.rank() == 0) {
              CheckpointState state;
              state.steps_done = last;
              state.model = net->state_dict();
              state.optimizer = optimizer.state_dict();
              fmt::print("rank 0 wrote {}\n", save_checkpoint(dir, state).string());
            }
            pg.barrier()->wait();
          }
          if (pg.rank() == 0) {
            for (const Parameter* p : net->parameters())
              for (float v : p->data.to_vector()) weights.push_back(v);
            fmt::print(
                "rank 0 after step {}: Adam state on this rank {} (ZeRO shard of {} parameters)\n", last,
                format_bytes(pg.device().memory().bytes[static_cast<int>(MemoryCategory::kOptimizerState)]),
                optimizer.local_params().size());
          }
        },
        {.preset = "h100-sxm"});
  return weights;
}

}  // namespace

int main() {
  const auto dir = std::filesystem::temp_directory_path() / "dpscope_example_ckpt";
  std::filesystem::remove_all(dir);
  const std::vector<float> straight = train(dir, 0, 10, false);
  train(dir, 0, 6, true);                                       // interrupted after step 6
  const std::vector<float> resumed = train(dir, 6, 10, false);  // resumed from the checkpoint
  std::filesystem::remove_all(dir);
  const bool identical = straight.size() == resumed.size() &&
                         std::memcmp(straight.data(), resumed.data(), straight.size() * sizeof(float)) == 0;
  fmt::print("resumed run {} the uninterrupted one\n", identical ? "is bit-identical to" : "DIFFERS from");
  return identical ? 0 : 1;
}
