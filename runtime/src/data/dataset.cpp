// TensorDataset, batch gathering and .npy datasets (see data/dataset.hpp).
#include "dpscope/data/dataset.hpp"

#include <algorithm>
#include <cstring>

#include "dpscope/io/finite_values.hpp"
#include "dpscope/io/npy.hpp"

namespace dpscope {

std::string describe(const Dataset& dataset) {
  std::string targets;
  if (dataset.target_dtype() == DType::kI64) {
    targets = fmt::format("{} classes", dataset.num_classes());
  } else {
    const Shape per_sample = dataset.target_sample_shape();
    targets = per_sample.empty() ? std::string("float32 targets")
                                 : fmt::format("float32 targets {}", shape_to_string(per_sample));
  }
  return fmt::format("{}: {} samples, {} features, {}", dataset.name(), dataset.size(),
                     dataset.num_features(), targets);
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets, std::string inputs_name, std::string targets_name,
                             std::string name)
    : name_(name.empty() ? fmt::format("{},{}", inputs_name, targets_name) : std::move(name)) {
  for (const auto& [t, what] : {std::pair{&inputs, &inputs_name}, {&targets, &targets_name}}) {
    DPS_CHECK(t->defined(), ErrorKind::kInvalidArgument, "{}: undefined tensor", *what);
    DPS_CHECK(t->device().kind() == DeviceKind::kCpu, ErrorKind::kDevice,
              "{}: datasets hold host (cpu) tensors, but this one lives on {}", *what, t->device().name());
    DPS_CHECK(t->has_data(), ErrorKind::kUnsupported, "{}: a dataset needs data, not a timing-only tensor",
              *what);
    DPS_CHECK(t->dim() >= 1, ErrorKind::kInvalidArgument,
              "{}: a dataset needs one row per sample, got a 0-d array", *what);
  }
  DPS_CHECK(inputs.dtype() == DType::kF32, ErrorKind::kInvalidArgument,
            "{}: inputs must be float32, got {} (save a.astype(np.float32))", inputs_name,
            to_string(inputs.dtype()));
  // One pass over the values: a NaN or inf in the data would surface steps later as "loss became
  // nan ... (try a smaller --lr)", blaming the learning rate for the file.
  for (const auto& [t, what] : {std::pair{&inputs, &inputs_name}, {&targets, &targets_name}}) {
    if (const std::optional<NonFiniteValue> bad = first_non_finite(*t))
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("{}: value {} is {}; {} must be finite numbers", *what, bad->position,
                              bad->value, t == &inputs ? "inputs" : "targets"));
  }
  DPS_CHECK(inputs.size(0) == targets.size(0), ErrorKind::kInvalidArgument,
            "data mismatch: {} has {} rows but {} has {}", inputs_name, inputs.size(0), targets_name,
            targets.size(0));
  const int64_t rows = inputs.size(0);
  const int64_t features = rows == 0 ? shape_numel(Shape(inputs.shape().begin() + 1, inputs.shape().end()))
                                     : inputs.numel() / rows;
  inputs_ = inputs.reshape({rows, features});

  if (targets.dtype() == DType::kI64) {
    DPS_CHECK(targets.dim() == 1, ErrorKind::kInvalidArgument,
              "{}: int64 class targets must be 1-D [N], got shape {}", targets_name,
              shape_to_string(targets.shape()));
    const int64_t* y = targets.i64();
    for (int64_t i = 0; i < rows; ++i) {
      DPS_CHECK(y[i] >= 0, ErrorKind::kInvalidArgument,
                "{}: class index {} at row {} is negative (classes are numbered 0..C-1)", targets_name, y[i],
                i);
      num_classes_ = std::max(num_classes_, y[i] + 1);
    }
  } else {
    DPS_CHECK(targets.dim() <= 2, ErrorKind::kInvalidArgument,
              "{}: float32 targets must be [N] or [N, T], got shape {}", targets_name,
              shape_to_string(targets.shape()));
  }
  targets_ = std::move(targets);
}

Shape TensorDataset::target_sample_shape() const {
  return targets_.dim() == 1 ? Shape{} : Shape{targets_.size(1)};
}

Batch TensorDataset::get_batch(std::span<const int64_t> indices, const Device& device,
                               MemoryCategory category) const {
  const int64_t n = size();
  for (int64_t index : indices)
    DPS_CHECK(index >= 0 && index < n, ErrorKind::kInvalidArgument,
              "index {} is out of range for dataset '{}' of {} samples", index, name_, n);
  const auto b = static_cast<int64_t>(indices.size());
  Shape target_shape{b};
  for (int64_t d : target_sample_shape()) target_shape.push_back(d);

  // Gather on the host, then one copy to the device (what `x[idx].to(device)` costs in PyTorch).
  const Device host = device.kind() == DeviceKind::kCpu ? device : Device::cpu();
  const MemoryCategory host_category = device == host ? category : MemoryCategory::kBuffers;
  Tensor x = Tensor::empty({b, num_features()}, host, host_category, DType::kF32);
  Tensor y = Tensor::empty(target_shape, host, host_category, targets_.dtype());
  const uint64_t x_row_bytes = static_cast<uint64_t>(num_features()) * sizeof(float);
  const uint64_t y_row_bytes = b == 0 ? 0 : y.nbytes() / static_cast<uint64_t>(b);
  const char* x_src = reinterpret_cast<const char*>(inputs_.f32());
  const char* y_src = targets_.dtype() == DType::kF32 ? reinterpret_cast<const char*>(targets_.f32())
                                                      : reinterpret_cast<const char*>(targets_.i64());
  char* x_dst = reinterpret_cast<char*>(x.f32());
  char* y_dst =
      targets_.dtype() == DType::kF32 ? reinterpret_cast<char*>(y.f32()) : reinterpret_cast<char*>(y.i64());
  for (int64_t row = 0; row < b; ++row) {
    const auto i = static_cast<uint64_t>(indices[static_cast<size_t>(row)]);
    const auto r = static_cast<uint64_t>(row);
    if (x_row_bytes > 0) std::memcpy(x_dst + r * x_row_bytes, x_src + i * x_row_bytes, x_row_bytes);
    if (y_row_bytes > 0) std::memcpy(y_dst + r * y_row_bytes, y_src + i * y_row_bytes, y_row_bytes);
  }
  Batch batch;
  batch.inputs = device == host ? std::move(x) : x.to(device, category);
  batch.targets = device == host ? std::move(y) : y.to(device, category);
  batch.indices.assign(indices.begin(), indices.end());
  return batch;
}

std::shared_ptr<TensorDataset> load_npy_dataset(const std::filesystem::path& inputs_path,
                                                const std::filesystem::path& targets_path) {
  Tensor x = load_npy(inputs_path);
  Tensor y = load_npy(targets_path);
  return std::make_shared<TensorDataset>(std::move(x), std::move(y), inputs_path.string(),
                                         targets_path.string());
}

}  // namespace dpscope
