// DataLoader: batch slicing, drop_last, per-epoch shuffles from randperm(n, seed + epoch), custom
// samplers, iteration snapshots and device placement.
#include "dpscope/data/dataloader.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <numeric>

#include "dpscope/data/randperm.hpp"
#include "runtime/io/io_test_util.hpp"

namespace dpscope {
namespace {

// N samples whose single feature equals their index and whose class is index % 2.
std::shared_ptr<const Dataset> counting_dataset(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[static_cast<size_t>(i)] = static_cast<float>(i);
    y[static_cast<size_t>(i)] = i % 2;
  }
  return std::make_shared<TensorDataset>(Tensor::from_floats(x, {n, 1}), Tensor::from_ints(y, {n}));
}

std::vector<std::vector<int64_t>> all_batch_indices(const DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const Batch& b : loader) out.push_back(b.indices);
  return out;
}

TEST(DataLoader, SlicesTheDatasetInOrderWithoutShuffle) {
  const DataLoader loader(counting_dataset(10), {.batch_size = 4});
  EXPECT_EQ(loader.num_batches(), 3);
  EXPECT_EQ(all_batch_indices(loader),
            (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
}

TEST(DataLoader, BatchesCarryTheRowsOfTheirIndices) {
  DataLoader loader(counting_dataset(10), {.batch_size = 4, .shuffle = true, .seed = 3});
  int64_t rows = 0;
  for (const Batch& b : loader) {
    ASSERT_EQ(b.inputs.size(0), static_cast<int64_t>(b.indices.size()));
    for (size_t r = 0; r < b.indices.size(); ++r) {
      EXPECT_EQ(b.inputs.f32()[r], static_cast<float>(b.indices[r]));
      EXPECT_EQ(b.targets.i64()[r], b.indices[r] % 2);
    }
    rows += b.inputs.size(0);
  }
  EXPECT_EQ(rows, 10);
}

TEST(DataLoader, DropLastDropsTheShortBatch) {
  const DataLoader loader(counting_dataset(10), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(loader.num_batches(), 2);
  EXPECT_EQ(all_batch_indices(loader), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST(DataLoader, NumberOfBatchesIsCeilOrFloorOfNOverB) {
  const auto d = counting_dataset(10);
  struct Case {
    int64_t batch_size;
    bool drop_last;
    int64_t expected;
  };
  for (const Case& c : {Case{3, false, 4}, Case{3, true, 3}, Case{10, false, 1}, Case{10, true, 1},
                        Case{11, false, 1}, Case{11, true, 0}, Case{1, false, 10}}) {
    const DataLoader loader(d, {.batch_size = c.batch_size, .drop_last = c.drop_last});
    EXPECT_EQ(loader.num_batches(), c.expected) << "B = " << c.batch_size << ", drop_last = " << c.drop_last;
    EXPECT_EQ(static_cast<int64_t>(all_batch_indices(loader).size()), c.expected);
  }
}

TEST(DataLoader, ABatchSizeNearTheInt64LimitIsOneBatchOfEverything) {
  // (m + b - 1) / b overflowed here: the count turned negative and a training loop never advanced.
  const int64_t huge = std::numeric_limits<int64_t>::max();
  const DataLoader loader(counting_dataset(10), {.batch_size = huge});
  EXPECT_EQ(loader.num_batches(), 1);
  EXPECT_EQ(loader.batch(0).inputs.size(0), 10);
  EXPECT_EQ(DataLoader(counting_dataset(10), {.batch_size = huge, .drop_last = true}).num_batches(), 0);
  EXPECT_EQ(DataLoader(counting_dataset(10), {.batch_size = huge - 1}).num_batches(), 1);
}

TEST(DataLoader, EpochOrderIsRandpermOfSeedPlusEpoch) {
  DataLoader loader(counting_dataset(10), {.batch_size = 4, .shuffle = true, .seed = 42});
  EXPECT_EQ(loader.epoch_order(), randperm(10, 42));
  EXPECT_EQ(loader.epoch_order(), (std::vector<int64_t>{2, 6, 1, 8, 4, 5, 0, 9, 3, 7}));  // torch 1.13
  std::vector<int64_t> seen;
  for (const Batch& b : loader) seen.insert(seen.end(), b.indices.begin(), b.indices.end());
  EXPECT_EQ(seen, randperm(10, 42));

  loader.set_epoch(1);
  EXPECT_EQ(loader.epoch(), 1);
  EXPECT_EQ(loader.epoch_order(), randperm(10, 43));
  EXPECT_EQ(loader.batch_indices(2).size(), 2u);
  loader.set_epoch(0);
  EXPECT_EQ(loader.epoch_order(), randperm(10, 42));
}

TEST(DataLoader, WithoutSetEpochEveryEpochRepeatsTheSameOrder) {
  const DataLoader loader(counting_dataset(20), {.batch_size = 8, .shuffle = true, .seed = 7});
  EXPECT_EQ(all_batch_indices(loader), all_batch_indices(loader));
}

TEST(DataLoader, CustomSamplerReplacesTheOrder) {
  // Even indices on even epochs, odd indices on odd epochs (like one rank of a sampler).
  const EpochSampler sampler = [](int64_t epoch) {
    std::vector<int64_t> out;
    for (int64_t i = epoch % 2; i < 10; i += 2) out.push_back(i);
    return out;
  };
  DataLoader loader(counting_dataset(10), {.batch_size = 2, .sampler = sampler});
  EXPECT_EQ(loader.num_batches(), 3);
  EXPECT_EQ(all_batch_indices(loader), (std::vector<std::vector<int64_t>>{{0, 2}, {4, 6}, {8}}));
  loader.set_epoch(1);
  EXPECT_EQ(all_batch_indices(loader), (std::vector<std::vector<int64_t>>{{1, 3}, {5, 7}, {9}}));
}

TEST(DataLoader, IterationKeepsTheOrderItStartedWith) {
  DataLoader loader(counting_dataset(10), {.batch_size = 5, .shuffle = true, .seed = 1});
  const std::vector<int64_t> epoch0 = loader.epoch_order();
  auto it = loader.begin();
  loader.set_epoch(1);
  ++it;
  EXPECT_EQ(it->indices, std::vector<int64_t>(epoch0.begin() + 5, epoch0.end()));
  EXPECT_EQ(&*it, &*it);  // dereferencing twice reuses the gathered batch
  EXPECT_EQ(it.batch_number(), 1);
}

TEST(DataLoader, BatchesLandOnTheLoadersDevice) {
  const Device gpu = Device::sim(0, testing::test_preset());
  const DataLoader loader(counting_dataset(6), {.batch_size = 4}, gpu);
  const Batch b = loader.batch(1);
  EXPECT_EQ(b.inputs.device(), gpu);
  EXPECT_EQ(b.targets.device(), gpu);
  EXPECT_EQ(b.indices, (std::vector<int64_t>{4, 5}));
}

TEST(DataLoader, RefusesBadOptions) {
  const auto d = counting_dataset(10);
  EXPECT_DPS_ERROR(DataLoader(d, {.batch_size = 0}), ErrorKind::kInvalidArgument,
                   "batch_size should be a positive integer value, but got batch_size=0");
  EXPECT_DPS_ERROR(
      DataLoader(d, {.shuffle = true, .sampler = [](int64_t) { return std::vector<int64_t>{}; }}),
      ErrorKind::kInvalidArgument, "sampler option is mutually exclusive with shuffle");
  DataLoader loader(d, {.batch_size = 4});
  EXPECT_DPS_ERROR(loader.batch(3), ErrorKind::kInvalidArgument,
                   "batch 3 is out of range: this epoch has 3 batches");
  EXPECT_DPS_ERROR(loader.set_epoch(-1), ErrorKind::kInvalidArgument,
                   "set_epoch: epoch must be non-negative, got -1");
}

}  // namespace
}  // namespace dpscope
