// `dpscope train --mode ddp` from the library, one call per rank — the shape of a torchrun script,
// where every process runs the same function with its own rank:
//
//   def main():                                   # torchrun --nproc_per_node 4 train.py
//       dist.init_process_group("gloo")
//       train(rank=dist.get_rank(), world_size=dist.get_world_size(), config)
//
// Here the ranks are threads of one process (spawn, like mp.spawn), each calling train_rank() with
// its ProcessGroup. A rank that is a process will make the same call with a group of its own.
// The mean of the ranks' losses is what `dpscope train` reports as "mean loss over ranks".
#include <fmt/format.h>

#include "dpscope/comm/spawn.hpp"
#include "dpscope/train/train_rank.hpp"

int main() {
  using namespace dpscope;
  TrainConfig config;
  config.mode = TrainMode::kDdp;
  config.devices = 4;
  config.dataset = "spirals:512";
  config.model = "2-32-32-3";
  config.batch = 16;  // per rank: 64 samples per step in total
  config.optim = "adam";
  config.zero = true;  // ZeroRedundancyOptimizer: to the loop, just another Optimizer
  config.steps = 20;
  config.validate();

  std::vector<RankResult> ranks(static_cast<size_t>(config.devices));
  spawn(config.devices, [&](ProcessGroup& group) {
    ranks[static_cast<size_t>(group.rank())] = train_rank(group, config);  // each rank loads its own data
  });

  for (size_t r = 0; r < ranks.size(); ++r)
    fmt::print("rank {}: loss on its own batch {:.4f} -> {:.4f}\n", r, ranks[r].losses.front(),
               ranks[r].losses.back());
  double first = 0.0, last = 0.0;
  for (const RankResult& rank : ranks) {
    first += rank.losses.front() / static_cast<double>(ranks.size());
    last += rank.losses.back() / static_cast<double>(ranks.size());
  }
  fmt::print("mean loss over ranks {:.4f} -> {:.4f} in {} steps of {} samples\n", first, last, ranks[0].steps,
             ranks[0].samples_per_step);
  return last < first ? 0 : 1;  // the example is a test: training must make progress
}
