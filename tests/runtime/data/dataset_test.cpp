// TensorDataset: row gathering, shape rules, the checks on inputs and targets, device copies, and
// datasets loaded from .npy files.
#include "dpscope/data/dataset.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "dpscope/io/npy.hpp"
#include "runtime/io/io_test_util.hpp"

namespace dpscope {
namespace {

// inputs row i = [2i, 2i + 1] (4 x 2), class targets [3, 0, 1, 3].
TensorDataset small_dataset() {
  return TensorDataset(Tensor::from_floats(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}),
                       Tensor::from_ints(std::vector<int64_t>{3, 0, 1, 3}, {4}));
}

TEST(TensorDataset, DescribesItsShape) {
  const TensorDataset d = small_dataset();
  EXPECT_EQ(d.name(), "inputs,targets");
  EXPECT_EQ(d.size(), 4);
  EXPECT_EQ(d.num_features(), 2);
  EXPECT_EQ(d.num_classes(), 4);  // largest class index + 1
  EXPECT_EQ(d.target_dtype(), DType::kI64);
  EXPECT_EQ(d.target_sample_shape(), Shape{});
  EXPECT_EQ(describe(d), "inputs,targets: 4 samples, 2 features, 4 classes");
}

TEST(TensorDataset, GetBatchGathersRowsInIndexOrder) {
  const TensorDataset d = small_dataset();
  const std::vector<int64_t> indices{2, 0, 2};
  const Batch b = d.get_batch(indices);
  EXPECT_EQ(b.inputs.shape(), (Shape{3, 2}));
  EXPECT_EQ(b.inputs.to_vector(), (std::vector<float>{4, 5, 0, 1, 4, 5}));
  EXPECT_EQ(b.targets.shape(), (Shape{3}));
  EXPECT_EQ(b.targets.to_ints(), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(b.indices, indices);
  EXPECT_EQ(b.inputs.device(), Device::cpu());
  EXPECT_EQ(b.inputs.category(), MemoryCategory::kActivations);
}

TEST(TensorDataset, EmptyBatch) {
  const Batch b = small_dataset().get_batch({});
  EXPECT_EQ(b.inputs.shape(), (Shape{0, 2}));
  EXPECT_EQ(b.targets.shape(), (Shape{0}));
}

TEST(TensorDataset, FlattensTrailingInputDimensions) {
  std::vector<float> images(3 * 2 * 2);
  std::iota(images.begin(), images.end(), 0.f);
  const TensorDataset d(Tensor::from_floats(images, {3, 2, 2}),
                        Tensor::from_ints(std::vector<int64_t>{0, 1, 0}, {3}));
  EXPECT_EQ(d.num_features(), 4);
  EXPECT_EQ(d.get_batch(std::vector<int64_t>{1}).inputs.to_vector(), (std::vector<float>{4, 5, 6, 7}));
}

TEST(TensorDataset, OneDimensionalInputsAreOneFeature) {
  const TensorDataset d(Tensor::from_floats(std::vector<float>{1, 2, 3}, {3}),
                        Tensor::from_floats(std::vector<float>{1, 2, 3}, {3}));
  EXPECT_EQ(d.num_features(), 1);
  EXPECT_EQ(d.get_batch(std::vector<int64_t>{2, 1}).inputs.shape(), (Shape{2, 1}));
}

TEST(TensorDataset, FloatTargetsKeepTheirPerSampleShape) {
  const TensorDataset scalar(Tensor::zeros({3, 2}),
                             Tensor::from_floats(std::vector<float>{0.5f, 1.5f, 2.5f}, {3}));
  EXPECT_EQ(scalar.num_classes(), 0);
  EXPECT_EQ(scalar.target_sample_shape(), Shape{});
  EXPECT_EQ(scalar.get_batch(std::vector<int64_t>{2, 0}).targets.to_vector(),
            (std::vector<float>{2.5f, 0.5f}));
  EXPECT_EQ(describe(scalar), "inputs,targets: 3 samples, 2 features, float32 targets");

  const TensorDataset vector(Tensor::zeros({3, 2}),
                             Tensor::from_floats(std::vector<float>{0, 1, 2, 3, 4, 5}, {3, 2}));
  EXPECT_EQ(vector.target_sample_shape(), Shape{2});
  const Batch b = vector.get_batch(std::vector<int64_t>{1});
  EXPECT_EQ(b.targets.shape(), (Shape{1, 2}));
  EXPECT_EQ(b.targets.to_vector(), (std::vector<float>{2, 3}));
  EXPECT_EQ(describe(vector), "inputs,targets: 3 samples, 2 features, float32 targets [2]");
}

TEST(TensorDataset, RowCountMismatchNamesBothSources) {
  EXPECT_DPS_ERROR(TensorDataset(Tensor::zeros({1000, 2}), Tensor::zeros({999}), "x.npy", "y.npy"),
                   ErrorKind::kInvalidArgument, "data mismatch: x.npy has 1000 rows but y.npy has 999");
}

TEST(TensorDataset, RefusesUnusableInputsAndTargets) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_DPS_ERROR(
      TensorDataset(Tensor::from_ints(std::vector<int64_t>{1, 2}, {2}), Tensor::zeros({2}), "x.npy", "y.npy"),
      ErrorKind::kInvalidArgument, "x.npy: inputs must be float32, got int64 (save a.astype(np.float32))");
  EXPECT_DPS_ERROR(
      TensorDataset(Tensor::from_floats(std::vector<float>{1.f}, {}), Tensor::zeros({1}), "x.npy", "y.npy"),
      ErrorKind::kInvalidArgument, "x.npy: a dataset needs one row per sample, got a 0-d array");
  EXPECT_DPS_ERROR(
      TensorDataset(x, Tensor::zeros({2, 1}, Device::cpu(), MemoryCategory::kBuffers, DType::kI64), "x.npy",
                    "y.npy"),
      ErrorKind::kInvalidArgument, "y.npy: int64 class targets must be 1-D [N], got shape [2, 1]");
  EXPECT_DPS_ERROR(TensorDataset(x, Tensor::from_ints(std::vector<int64_t>{0, -1}, {2}), "x.npy", "y.npy"),
                   ErrorKind::kInvalidArgument,
                   "y.npy: class index -1 at row 1 is negative (classes are numbered 0..C-1)");
  EXPECT_DPS_ERROR(TensorDataset(x, Tensor::zeros({2, 1, 1}), "x.npy", "y.npy"), ErrorKind::kInvalidArgument,
                   "y.npy: float32 targets must be [N] or [N, T], got shape [2, 1, 1]");
  EXPECT_DPS_ERROR(TensorDataset(x, Tensor(), "x.npy", "y.npy"), ErrorKind::kInvalidArgument,
                   "y.npy: undefined tensor");
}

TEST(TensorDataset, RefusesDeviceAndTimingOnlyTensors) {
  const Device gpu = Device::sim(0, testing::test_preset());
  EXPECT_DPS_ERROR(TensorDataset(Tensor::zeros({2, 3}, gpu), Tensor::zeros({2}), "x", "y"),
                   ErrorKind::kDevice, "x: datasets hold host (cpu) tensors, but this one lives on sim:0");
  EXPECT_DPS_ERROR(TensorDataset(Tensor::meta({2, 3}, Device::cpu()), Tensor::zeros({2}), "x", "y"),
                   ErrorKind::kUnsupported, "x: a dataset needs data, not a timing-only tensor");
}

TEST(TensorDataset, IndexOutOfRangeIsRefused) {
  const TensorDataset d = small_dataset();
  EXPECT_DPS_ERROR(d.get_batch(std::vector<int64_t>{0, 4}), ErrorKind::kInvalidArgument,
                   "index 4 is out of range for dataset 'inputs,targets' of 4 samples");
  EXPECT_DPS_ERROR(d.get_batch(std::vector<int64_t>{-1}), ErrorKind::kInvalidArgument,
                   "index -1 is out of range for dataset 'inputs,targets' of 4 samples");
}

TEST(TensorDataset, BatchOnASimulatedGpuIsChargedAsAHostToDeviceCopy) {
  const Device gpu = Device::sim(0, testing::test_preset());
  const TensorDataset d = small_dataset();
  const Batch b = d.get_batch(std::vector<int64_t>{3, 1}, gpu);
  EXPECT_EQ(b.inputs.device(), gpu);
  EXPECT_EQ(b.targets.device(), gpu);
  EXPECT_EQ(b.inputs.to_vector(), (std::vector<float>{6, 7, 2, 3}));
  EXPECT_EQ(gpu.memory().bytes[static_cast<int>(MemoryCategory::kActivations)], 2u * 2 * 4 + 2u * 8);
  EXPECT_GT(gpu.clock_ns(StreamKind::kCompute), 0);  // the compute stream waited for the copies
}

TEST(TensorDataset, LoadsFromNpyFiles) {
  testing::TempDir dir;
  save_npy(dir.path() / "x.npy", Tensor::from_floats(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}));
  save_npy(dir.path() / "y.npy", Tensor::from_ints(std::vector<int64_t>{2, 0, 1}, {3}));
  save_npy(dir.path() / "short.npy", Tensor::from_ints(std::vector<int64_t>{2, 0}, {2}));
  const auto d = load_npy_dataset(dir.path() / "x.npy", dir.path() / "y.npy");
  EXPECT_EQ(d->name(), (dir.path() / "x.npy").string() + "," + (dir.path() / "y.npy").string());
  EXPECT_EQ(d->size(), 3);
  EXPECT_EQ(d->num_classes(), 3);
  EXPECT_EQ(d->get_batch(std::vector<int64_t>{1}).inputs.to_vector(), (std::vector<float>{3, 4}));
  EXPECT_DPS_ERROR(load_npy_dataset(dir.path() / "x.npy", dir.path() / "short.npy"),
                   ErrorKind::kInvalidArgument,
                   "data mismatch: " + (dir.path() / "x.npy").string() + " has 3 rows but " +
                       (dir.path() / "short.npy").string() + " has 2");
}

}  // namespace
}  // namespace dpscope
