// The seeds' DDP tutorial as PyTorch runs it: one *process* per rank, started by a launcher.
//
//   # torchrun --nproc_per_node 4 ddp_tutorial.py      here: dpscope launch --nproc 4 -- ddp_processes
//   dist.init_process_group("gloo", init_method="env://")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//   model = DDP(Net())
//   sampler = DistributedSampler(dataset)                  # this rank's share of every epoch
//   loader = DataLoader(dataset, batch_size=16, sampler=sampler)
//   for epoch in range(E):
//       sampler.set_epoch(epoch)
//       for x, y in loader: opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
//   if rank == 0: torch.save(model.module.state_dict(), "model.pt")
//
// Each process is one rank on its CPU; the ranks meet in the TCPStore rank 0 hosts at
// MASTER_ADDR:MASTER_PORT and talk through MPI (the `mpi` backend, where PyTorch would use gloo).
// Started without a launcher it is a world of one process. The test suite runs it both ways
// (examples/CMakeLists.txt); ddp_minimal.cpp is the same loop with rank threads on simulated GPUs.
#include <fmt/format.h>

#include "dpscope/comm/env_rendezvous.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/store.hpp"
#include "dpscope/data/dataloader.hpp"
#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"

int main() {
  using namespace dpscope;
  // init_process_group(init_method="env://"): where this process stands, and where the ranks meet.
  // Without a launcher: a world of one, meeting nobody.
  const std::optional<EnvRendezvous> env = read_env_rendezvous();
  std::shared_ptr<Store> store = env ? env_store(*env) : std::make_shared<InMemoryStore>();
  std::shared_ptr<ProcessGroup> pg = init_process_group({.backend = "mpi",
                                                         .store = store,
                                                         .rank = env ? env->rank : 0,
                                                         .world_size = env ? env->world_size : 1});

  auto dataset = make_dataset("spirals:1024", /*seed=*/0);  // every process loads the same data
  auto net = Sequential::mlp("2-64-64-3", pg->device(), /*seed=*/pg->rank());  // DDP broadcasts rank 0's
  DistributedDataParallel model(*net, *pg);
  SGD optimizer(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  CrossEntropyLoss loss_fn;
  DistributedSampler sampler(dataset->size(), {.num_replicas = pg->size(), .rank = pg->rank()});
  DataLoader loader(dataset, {.batch_size = 16, .sampler = [&](int64_t epoch) {
                                sampler.set_epoch(epoch);  // forget this and every epoch repeats
                                return sampler.indices();
                              }});
  float last_loss = 0.0f;
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    loader.set_epoch(epoch);
    for (const Batch& batch : loader) {
      optimizer.zero_grad();
      last_loss =
          loss_fn.forward(model.forward(batch.inputs.to(pg->device())), batch.targets.to(pg->device()))
              .item();
      model.backward(loss_fn.backward());  // bucketed all-reduces overlap the backward pass
      optimizer.step();
    }
  }
  // The mean of the ranks' last losses, as every rank sees it after one all-reduce.
  Tensor mean =
      Tensor::from_floats(std::vector<float>{last_loss}, {1}, pg->device(), MemoryCategory::kBuffers);
  pg->all_reduce(mean, {.op = ReduceOp::kAvg})->wait();
  if (pg->rank() == 0)
    fmt::print("{} process(es), {} batches of 16 per rank per epoch: mean last loss {:.4f}\n", pg->size(),
               loader.num_batches(), mean.item());
  return mean.item() < 1.0f ? 0 : 1;
}
