// ZeroRedundancyOptimizer's sorted-greedy partition: hand-computed assignments, ties, more ranks
// than parameters, PyTorch 1.13 parity (when python3-torch is importable), and errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "dpscope/parallel/zero_redundancy_optimizer.hpp"
#include "support/cli.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using Partition = std::vector<std::vector<int>>;

using testing::what_of;

const std::vector<int64_t> kSizes = {10, 40, 20, 40, 5, 30, 30, 1};

TEST(ZeroPartition, OneRankOwnsEverythingLargestFirst) {
  // Sorted by numel, largest first; equal sizes (40, 40 and 30, 30) keep their list order.
  EXPECT_EQ(partition_parameters_sorted_greedy(kSizes, 1), (Partition{{1, 3, 5, 6, 2, 0, 4, 7}}));
}

TEST(ZeroPartition, TwoRanksGreedyWithTiesToTheLowestRank) {
  // 40(#1)->r0 [40,0]; 40(#3)->r1 [40,40]; 30(#5)->r0 (tie) [70,40]; 30(#6)->r1 [70,70];
  // 20(#2)->r0 (tie) [90,70]; 10(#0)->r1 [90,80]; 5(#4)->r1 [90,85]; 1(#7)->r1 [90,86].
  EXPECT_EQ(partition_parameters_sorted_greedy(kSizes, 2), (Partition{{1, 5, 2}, {3, 6, 0, 4, 7}}));
}

TEST(ZeroPartition, ThreeRanks) {
  // 40->r0 [40,0,0]; 40->r1 [40,40,0]; 30->r2 [40,40,30]; 30->r2 [40,40,60]; 20->r0 [60,40,60];
  // 10->r1 [60,50,60]; 5->r1 [60,55,60]; 1->r1 [60,56,60].
  EXPECT_EQ(partition_parameters_sorted_greedy(kSizes, 3), (Partition{{1, 2}, {3, 0, 4, 7}, {5, 6}}));
}

TEST(ZeroPartition, FourRanks) {
  // 40->r0, 40->r1, 30->r2, 30->r3 [40,40,30,30]; 20->r2 [40,40,50,30]; 10->r3 [40,40,50,40];
  // 5->r0 [45,40,50,40]; 1->r1 [45,41,50,40].
  EXPECT_EQ(partition_parameters_sorted_greedy(kSizes, 4), (Partition{{1, 4}, {3, 7}, {5, 2}, {6, 0}}));
}

TEST(ZeroPartition, MoreRanksThanParametersLeavesTheLastRanksEmpty) {
  EXPECT_EQ(partition_parameters_sorted_greedy({8, 32}, 4), (Partition{{1}, {0}, {}, {}}));
  EXPECT_EQ(partition_parameters_sorted_greedy({}, 2), (Partition{{}, {}}));
}

TEST(ZeroPartition, EqualSizesGoRoundRobinInListOrder) {
  EXPECT_EQ(partition_parameters_sorted_greedy({7, 7, 7, 7, 7}, 2), (Partition{{0, 2, 4}, {1, 3}}));
}

TEST(ZeroPartition, BadArgumentsAreRefused) {
  EXPECT_EQ(what_of([] { partition_parameters_sorted_greedy({1}, 0); }),
            "partition_parameters_sorted_greedy: world_size must be at least 1, got 0");
  EXPECT_EQ(what_of([] {
              partition_parameters_sorted_greedy({1, -2}, 2);
            }),
            "partition_parameters_sorted_greedy: parameter 1 has a negative numel -2");
}

// Runs PyTorch's own ZeroRedundancyOptimizer._partition_parameters on the same sizes (a one-rank
// gloo group, world_size then set by hand: the partition depends on nothing else).
TEST(ZeroPartition, MatchesPyTorchsPartitionParameters) {
  if (std::system((testing::python3() + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "python3-torch is not importable (" << testing::python3() << " -c 'import torch' failed)";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dpscope_zero_partition_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path script = dir / "partition.py";
  std::ofstream(script) << R"(import sys, torch, torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
sizes = [10, 40, 20, 40, 5, 30, 30, 1, 12, 40, 3]
ps = [torch.nn.Parameter(torch.zeros(s)) for s in sizes]
z = ZeroRedundancyOptimizer(ps, optimizer_class=torch.optim.SGD, lr=0.1)
index = {id(p): i for i, p in enumerate(ps)}
for n in (1, 2, 3, 4, 5, 8):
    z.world_size = n
    z._partition_parameters_cache = []
    print(";".join(",".join(str(index[id(p)]) for g in r for p in g["params"]) for r in z._partition_parameters()))
)";
  const std::filesystem::path out = dir / "out.txt";
  const std::string cmd = testing::python3() + " " + script.string() + " " + (dir / "rendezvous").string() +
                          " > " + out.string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "python failed; see " << out;
  std::ifstream in(out);
  const std::vector<int64_t> sizes = {10, 40, 20, 40, 5, 30, 30, 1, 12, 40, 3};
  for (int n : {1, 2, 3, 4, 5, 8}) {
    std::string expected;
    ASSERT_TRUE(std::getline(in, expected)) << "n=" << n;
    std::vector<std::string> ranks;
    for (const std::vector<int>& shard : partition_parameters_sorted_greedy(sizes, n))
      ranks.push_back(fmt::format("{}", fmt::join(shard, ",")));
    const std::string ours = fmt::format("{}", fmt::join(ranks, ";"));
    EXPECT_EQ(ours, expected) << "n=" << n;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dpscope
