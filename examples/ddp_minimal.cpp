// Minimal DistributedDataParallel with a DistributedSampler, the seeds' second tutorial:
//
//   def train(rank, world_size):                       # mp.spawn(train, nprocs=4)
//       dist.init_process_group("nccl", rank=rank, world_size=world_size)
//       model = DDP(Net().to(rank), device_ids=[rank])
//       sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank)
//       loader = DataLoader(dataset, batch_size=16, sampler=sampler)
//       for epoch in range(E):
//           sampler.set_epoch(epoch)                       # forget this and every epoch repeats
//           for x, y in loader: opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
//
// Here the four ranks are threads on four simulated H100s. Lesson 04 shows the buckets.
#include <fmt/format.h>

#include <mutex>

#include "dpscope/comm/spawn.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"

int main() {
  using namespace dpscope;
  constexpr int kWorldSize = 4;
  auto dataset = make_dataset("spirals:1024", /*seed=*/0);
  std::vector<float> final_loss(kWorldSize);

  spawn(kWorldSize,
        [&](ProcessGroup& pg) {  // one thread per rank, device sim:rank
          auto net =
              Sequential::mlp("2-64-64-3", pg.device(), /*seed=*/pg.rank());  // DDP broadcasts rank 0's
          DistributedDataParallel model(*net, pg);
          SGD optimizer(net->parameters(), {.lr = 0.1, .momentum = 0.9});
          CrossEntropyLoss loss_fn;
          DistributedSampler sampler(dataset->size(), {.num_replicas = pg.size(), .rank = pg.rank()});
          DataLoader loader(dataset, {.batch_size = 16, .sampler = [&](int64_t epoch) {
                                        sampler.set_epoch(epoch);
                                        return sampler.indices();
                                      }});
          for (int64_t epoch = 0; epoch < 4; ++epoch) {
            loader.set_epoch(epoch);
            for (const Batch& batch : loader) {
              optimizer.zero_grad();
              const float loss =
                  loss_fn.forward(model.forward(batch.inputs.to(pg.device())), batch.targets.to(pg.device()))
                      .item();
              model.backward(loss_fn.backward());  // bucketed all-reduces overlap the backward pass
              optimizer.step();
              final_loss[static_cast<size_t>(pg.rank())] = loss;
            }
          }
          if (pg.rank() == 0)
            fmt::print("rank 0: {} bucket(s) after the rebuild, simulated time {:.3f} ms\n",
                       model.buckets().size(), pg.device().synchronize() / 1e6);
        },
        {.preset = "h100-sxm"});

  for (int r = 0; r < kWorldSize; ++r)
    fmt::print("rank {} last loss {:.4f}\n", r, final_loss[static_cast<size_t>(r)]);
  return final_loss[0] < 1.0f ? 0 : 1;
}
