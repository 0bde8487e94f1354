// Tensor: a dense, contiguous, row-major array of float32 or int64 on one device.
//
// Storage is shared between a tensor and its views (rows(), reshape()); it is accounted against its
// device's memory by category for as long as any view lives. A tensor made by Tensor::meta() has a
// shape and accounting but no data: timing-only runs simulate models far beyond this machine, and
// collectives of NCCL's other element types (float16, bfloat16, int8, ...; nccl-tests' -d), which
// only a meta tensor may have.
// Ops between tensors on different devices fail the way PyTorch does:
//   "Expected all tensors to be on the same device, but found at least two devices, sim:0 and cpu!"
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/core/device.hpp"

namespace dpscope {

// float32 and int64 tensors hold data. The others are NCCL's other element types, for meta tensors
// only (Tensor::empty refuses them): a simulated collective's time depends on its bytes, not on what
// they hold.
enum class DType : uint8_t { kF32, kI64, kF16, kBF16, kF64, kI8, kU8, kI32, kU32, kU64 };
const char* to_string(DType dtype);  // PyTorch's names: "float32", "bfloat16", "uint8", ...
size_t element_size(DType dtype);
bool holds_data(DType dtype);  // float32 and int64: a tensor with data may have it

using Shape = std::vector<int64_t>;
std::string shape_to_string(const Shape& shape);  // "[128, 784]"
int64_t shape_numel(const Shape& shape);

struct Storage;

class Tensor {
 public:
  Tensor() = default;  // undefined tensor (like an empty torch.Tensor() handle)

  static Tensor empty(const Shape& shape, const Device& device = Device::cpu(),
                      MemoryCategory category = MemoryCategory::kActivations, DType dtype = DType::kF32);
  static Tensor zeros(const Shape& shape, const Device& device = Device::cpu(),
                      MemoryCategory category = MemoryCategory::kActivations, DType dtype = DType::kF32);
  static Tensor full(const Shape& shape, float value, const Device& device = Device::cpu(),
                     MemoryCategory category = MemoryCategory::kActivations);
  static Tensor from_floats(std::span<const float> values, const Shape& shape,
                            const Device& device = Device::cpu(),
                            MemoryCategory category = MemoryCategory::kActivations);
  static Tensor from_ints(std::span<const int64_t> values, const Shape& shape,
                          const Device& device = Device::cpu(),
                          MemoryCategory category = MemoryCategory::kActivations);
  // Shape and memory accounting without data (timing-only mode).
  static Tensor meta(const Shape& shape, const Device& device,
                     MemoryCategory category = MemoryCategory::kActivations, DType dtype = DType::kF32);

  bool defined() const { return storage_ != nullptr; }
  bool has_data() const;
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return numel_; }
  uint64_t nbytes() const { return static_cast<uint64_t>(numel_) * element_size(dtype_); }
  DType dtype() const { return dtype_; }
  const Device& device() const;
  MemoryCategory category() const;

  // Element access; throws when the dtype differs or the tensor has no data.
  float* f32();
  const float* f32() const;
  int64_t* i64();
  const int64_t* i64() const;
  std::vector<float> to_vector() const;  // float32 only
  std::vector<int64_t> to_ints() const;  // int64 only
  float item() const;                    // a one-element float32 tensor

  // A copy on `device` (charged as a host<->device or peer transfer and traced), or the same
  // tensor when it already lives there and `category` matches.
  Tensor to(const Device& device, MemoryCategory category) const;
  Tensor to(const Device& device) const { return to(device, category()); }
  Tensor clone(MemoryCategory category) const;
  Tensor clone() const { return clone(category()); }
  // A view of rows [begin, begin + count) along dim 0 (shares storage).
  Tensor rows(int64_t begin, int64_t count) const;
  // A view with another shape of the same numel (shares storage).
  Tensor reshape(const Shape& shape) const;

  void fill(float value);
  // Copies `src` (same shape and dtype) into this tensor's storage, like PyTorch's copy_(). On one
  // device it is not timed: callers that model a device copy wrap it in a KernelScope. Across
  // devices it is the transfer .to() makes, charged and traced the same way, but straight into
  // this tensor (DataParallel's gather copies each replica's rows into the output like this).
  void copy_from(const Tensor& src);

 private:
  // copy_from without the checks: the bytes, and the transfer's cost and trace across devices.
  void transfer_from(const Tensor& src);
  std::shared_ptr<Storage> storage_;
  int64_t offset_elems_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::kF32;
};

// Throws the PyTorch-worded error when `a` and `b` live on different devices.
void check_same_device(const Tensor& a, const Tensor& b);
// Throws kInvalidArgument "<op>: expected <what> of shape [..], got [..]".
void check_shape(const Tensor& t, const Shape& expected, const char* op, const char* what);

}  // namespace dpscope
