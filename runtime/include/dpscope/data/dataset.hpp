// Datasets: what `dpscope train --data x.npy,y.npy` and `--dataset NAME:N` train on.
//
// A Dataset is N samples, each a float32 feature vector of F values and a target: an int64 class
// index (classification, for cross-entropy) or a float32 value / vector (regression, for MSE).
// get_batch gathers rows by dataset index on the host and moves them to the requested device (a
// simulated GPU charges and traces the host-to-device copy there, like `x.to("cuda")`); the
// returned Batch carries the indices so traces can show which samples each device trained on.
//
// Built-in synthetic datasets, deterministic for a seed (data/rng.hpp), spec "NAME:N[:A[:B]]":
//   spirals:N[:K]       K 2-D spiral arms winding round each other (default K = 3), F = 2, int64 classes.
//                       Class c = floor(i * K / N) (contiguous blocks, as in CS231n's toy data);
//                       per sample r = U[0,1), t = 2*pi*c/K + 4r + 0.2*n, x = (r sin t, r cos t).
//   blobs:N[:F[:K]]     K Gaussian blobs in F dimensions (defaults F = 2, K = 3), int64 classes.
//                       Centers (K x F, row-major) ~ U[-5, 5) are drawn first; then sample i of class
//                       c = floor(i * K / N) is center_c + N(0, 1) per feature.
//   regression:N[:F[:T]] y = x . w + noise (defaults F = 4, T = 1), float32 targets [N, T].
//                       w (F x T, row-major) ~ N(0, 1) is drawn first; then per sample F features
//                       ~ N(0, 1) and T noise values ~ 0.1 * N(0, 1).
// Draws happen in exactly the order written above, one sample after another.
// Limits: 1 <= N <= 10,000,000 samples and at most 2^28 feature values (1 GiB) per dataset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/core/tensor.hpp"

namespace dpscope {

struct Batch {
  Tensor inputs;                 // [B, F] float32
  Tensor targets;                // [B] int64 classes, or [B] / [B, T] float32 values
  std::vector<int64_t> indices;  // [B] dataset index of each row, in row order
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;  // "spirals:1000:3", "x.npy,y.npy"
  virtual int64_t size() const = 0;      // number of samples N
  virtual int64_t num_features() const = 0;
  virtual int64_t num_classes() const = 0;        // 0 when targets are float32 values
  virtual DType target_dtype() const = 0;         // kI64 (classes) or kF32 (values)
  virtual Shape target_sample_shape() const = 0;  // {} for [B] targets, {T} for [B, T]
  // Rows `indices` (each in [0, size()), repeats allowed), on `device`, accounted under `category`.
  virtual Batch get_batch(std::span<const int64_t> indices, const Device& device = Device::cpu(),
                          MemoryCategory category = MemoryCategory::kActivations) const = 0;
};

// "spirals:1000:3: 1000 samples, 2 features, 3 classes" / "...: 500 samples, 4 features, float32 targets
// [1]".
std::string describe(const Dataset& dataset);

// A dataset over two host tensors: inputs [N, ...] float32 (trailing dimensions are flattened into F;
// a 1-D [N] becomes [N, 1]) and targets [N] int64 (non-negative classes) or [N] / [N, T] float32.
// The *_name arguments name the tensors in error messages, e.g. the file names:
//   "data mismatch: x.npy has 1000 rows but y.npy has 999".
class TensorDataset final : public Dataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets, std::string inputs_name = "inputs",
                std::string targets_name = "targets", std::string name = "");

  std::string name() const override { return name_; }
  int64_t size() const override { return inputs_.size(0); }
  int64_t num_features() const override { return inputs_.size(1); }
  int64_t num_classes() const override { return num_classes_; }
  DType target_dtype() const override { return targets_.dtype(); }
  Shape target_sample_shape() const override;
  Batch get_batch(std::span<const int64_t> indices, const Device& device = Device::cpu(),
                  MemoryCategory category = MemoryCategory::kActivations) const override;

  const Tensor& inputs() const { return inputs_; }    // [N, F]
  const Tensor& targets() const { return targets_; }  // [N] or [N, T]

 private:
  Tensor inputs_;
  Tensor targets_;
  std::string name_;
  int64_t num_classes_ = 0;
};

// Loads inputs and targets from two .npy files (io/npy.hpp) into a TensorDataset named "X,Y".
std::shared_ptr<TensorDataset> load_npy_dataset(const std::filesystem::path& inputs_path,
                                                const std::filesystem::path& targets_path);

// ---- synthetic datasets (formulas in the header comment above) ----
inline constexpr int64_t kMaxSyntheticSamples = 10'000'000;
inline constexpr int64_t kMaxSyntheticElems = int64_t{1} << 28;

struct DatasetSpec {
  std::string kind;               // "spirals", "blobs", "regression"
  int64_t samples = 0;            // N
  int64_t features = 0;           // F
  int64_t classes = 0;            // K (0 for regression)
  int64_t targets = 0;            // T (0 for classification)
  std::string canonical() const;  // every parameter spelled out: "blobs:1000:2:3"
};

// Parses "NAME:N[:A[:B]]" and fills in the defaults; throws kInvalidArgument naming the spec and the
// problem (unknown name, N not a positive integer, a parameter out of range, too many fields).
DatasetSpec parse_dataset_spec(std::string_view spec);

std::shared_ptr<TensorDataset> make_spirals(int64_t samples, int64_t classes, uint64_t seed);
std::shared_ptr<TensorDataset> make_blobs(int64_t samples, int64_t features, int64_t classes, uint64_t seed);
std::shared_ptr<TensorDataset> make_regression(int64_t samples, int64_t features, int64_t targets,
                                               uint64_t seed);
std::shared_ptr<TensorDataset> make_dataset(const DatasetSpec& spec, uint64_t seed);
// make_dataset(parse_dataset_spec(spec), seed), e.g. make_dataset("spirals:1000", 0).
std::shared_ptr<TensorDataset> make_dataset(std::string_view spec, uint64_t seed);

}  // namespace dpscope
