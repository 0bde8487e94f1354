// Tensor storage, accounting, views and device copies.
#include "dpscope/core/tensor.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "dpscope/core/cuda.hpp"
#include "dpscope/core/timing.hpp"
#include "dpscope/core/trace_sink.hpp"

namespace dpscope {

// A buffer in its device's memory, allocated through the device (which accounts it by category
// and throws its OOM), shared by a tensor and its views.
struct Storage {
  Device device;
  MemoryCategory category;
  uint64_t nbytes;
  void* data = nullptr;  // nullptr for meta storage

  Storage(const Device& dev, MemoryCategory cat, uint64_t bytes, bool with_data)
      : device(dev), category(cat), nbytes(bytes), data(device.allocate(nbytes, category, with_data)) {}
  ~Storage() { device.deallocate(data, nbytes, category); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kI64: return "int64";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kF64: return "float64";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
    case DType::kI32: return "int32";
    case DType::kU32: return "uint32";
    case DType::kU64: return "uint64";
  }
  return "float32";
}

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::kI8:
    case DType::kU8: return 1;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kF32:
    case DType::kI32:
    case DType::kU32: return 4;
    case DType::kF64:
    case DType::kI64:
    case DType::kU64: return 8;
  }
  return 4;
}

bool holds_data(DType dtype) { return dtype == DType::kF32 || dtype == DType::kI64; }

std::string shape_to_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    DPS_CHECK(d >= 0, ErrorKind::kInvalidArgument, "negative dimension in shape {}", shape_to_string(shape));
    n *= d;
  }
  return n;
}

Tensor Tensor::empty(const Shape& shape, const Device& device, MemoryCategory category, DType dtype) {
  DPS_CHECK(holds_data(dtype), ErrorKind::kUnsupported,
            "a {} tensor has no data here: only a timing-only (meta) tensor may be {}; tensors with data "
            "are float32 or int64",
            to_string(dtype), to_string(dtype));
  Tensor t;
  t.shape_ = shape;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(device, category, t.nbytes(), /*with_data=*/true);
  return t;
}

Tensor Tensor::meta(const Shape& shape, const Device& device, MemoryCategory category, DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.numel_ = shape_numel(shape);
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(device, category, t.nbytes(), /*with_data=*/false);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, const Device& device, MemoryCategory category, DType dtype) {
  Tensor t = empty(shape, device, category, dtype);
  if (t.nbytes() > 0) t.device().impl().fill_zeros(t.storage_->data, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, const Device& device, MemoryCategory category) {
  Tensor t = empty(shape, device, category);
  t.fill(value);
  return t;
}

Tensor Tensor::from_floats(std::span<const float> values, const Shape& shape, const Device& device,
                           MemoryCategory category) {
  Tensor t = empty(shape, device, category);
  DPS_CHECK(static_cast<int64_t>(values.size()) == t.numel(), ErrorKind::kInvalidArgument,
            "from_floats: {} values for shape {}", values.size(), shape_to_string(shape));
  t.device().impl().copy_from_host(t.f32(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::from_ints(std::span<const int64_t> values, const Shape& shape, const Device& device,
                         MemoryCategory category) {
  Tensor t = empty(shape, device, category, DType::kI64);
  DPS_CHECK(static_cast<int64_t>(values.size()) == t.numel(), ErrorKind::kInvalidArgument,
            "from_ints: {} values for shape {}", values.size(), shape_to_string(shape));
  t.device().impl().copy_from_host(t.i64(), values.data(), t.nbytes());
  return t;
}

bool Tensor::has_data() const { return storage_ && (storage_->data != nullptr || numel_ == 0); }

int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  const int64_t i = d < 0 ? d + n : d;
  DPS_CHECK(i >= 0 && i < n, ErrorKind::kInvalidArgument, "dimension {} out of range for shape {}", d,
            shape_to_string(shape_));
  return shape_[static_cast<size_t>(i)];
}

const Device& Tensor::device() const {
  DPS_ASSERT(storage_ != nullptr, "device() of an undefined tensor");
  return storage_->device;
}

MemoryCategory Tensor::category() const {
  DPS_ASSERT(storage_ != nullptr, "category() of an undefined tensor");
  return storage_->category;
}

float* Tensor::f32() { return const_cast<float*>(std::as_const(*this).f32()); }
const float* Tensor::f32() const {
  DPS_ASSERT(storage_ != nullptr, "data access on an undefined tensor");
  DPS_CHECK(dtype_ == DType::kF32, ErrorKind::kInvalidArgument, "expected a float32 tensor, got {}",
            to_string(dtype_));
  DPS_CHECK(has_data(), ErrorKind::kUnsupported, "tensor of shape {} on {} has no data (timing-only mode)",
            shape_to_string(shape_), storage_->device.name());
  return static_cast<const float*>(storage_->data) + offset_elems_;
}

int64_t* Tensor::i64() { return const_cast<int64_t*>(std::as_const(*this).i64()); }
const int64_t* Tensor::i64() const {
  DPS_ASSERT(storage_ != nullptr, "data access on an undefined tensor");
  DPS_CHECK(dtype_ == DType::kI64, ErrorKind::kInvalidArgument, "expected an int64 tensor, got {}",
            to_string(dtype_));
  DPS_CHECK(has_data(), ErrorKind::kUnsupported, "tensor of shape {} on {} has no data (timing-only mode)",
            shape_to_string(shape_), storage_->device.name());
  return static_cast<const int64_t*>(storage_->data) + offset_elems_;
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out(static_cast<size_t>(numel_));
  device().impl().copy_to_host(out.data(), f32(), nbytes());
  return out;
}

std::vector<int64_t> Tensor::to_ints() const {
  std::vector<int64_t> out(static_cast<size_t>(numel_));
  device().impl().copy_to_host(out.data(), i64(), nbytes());
  return out;
}

float Tensor::item() const {
  DPS_CHECK(numel_ == 1, ErrorKind::kInvalidArgument,
            "item(): a tensor with {} elements cannot be converted to a scalar", numel_);
  float value = 0.0f;
  device().impl().copy_to_host(&value, f32(), sizeof(float));
  return value;
}

namespace {

// The link a copy between two devices crosses, or nullptr when neither end is simulated.
const LinkSpec* copy_link(const Device& src, const Device& dst) {
  if (src.is_simulated() && dst.is_simulated()) return &src.hardware()->peer_link;
  if (dst.is_simulated()) return &dst.hardware()->host_link;
  if (src.is_simulated()) return &src.hardware()->host_link;
  return nullptr;
}

// Copies `bytes` between two devices' memory through the device interface: host to device,
// device to host, or within/between devices (the destination device copies, but a cuda device
// copies out into sim memory, which is host memory). Returns the device that made the copy.
const Device& copy_bytes(const Device& dst_device, void* dst, const Device& src_device, const void* src,
                         uint64_t bytes) {
  if (src_device.kind() == DeviceKind::kCpu) {
    dst_device.impl().copy_from_host(dst, src, bytes);
    return dst_device;
  }
  // sim memory is host memory: a cuda device copies into it as into the cpu's.
  if (dst_device.kind() == DeviceKind::kCpu ||
      (src_device.kind() == DeviceKind::kCuda && dst_device.kind() != DeviceKind::kCuda)) {
    src_device.impl().copy_to_host(dst, src, bytes);
    return src_device;
  }
  dst_device.impl().copy_from_device(dst, src_device.impl(), src, bytes);
  return dst_device;
}

// Traces a copy a cuda device made with the times its events measured; false when there is no
// measurement (no tracer attached, or a device that measures nothing).
bool trace_measured_copy(const Device& copier, const Device& src, const Device& dst, uint64_t bytes) {
  if (!copier.traces_kernels()) return false;
  TraceSink* tracer = copier.tracer();
  const std::optional<TimedSpan> span = cuda::last_copy_span(copier.impl());
  if (!span) return false;
  tracer->copy_transfer(src, dst, span->start_ns, span->dur_ns, bytes);
  return true;
}

// Charges and traces a synchronous copy of `bytes` from `src` to `dst` (like tensor.to()).
void charge_copy(const Device& src, const Device& dst, uint64_t bytes) {
  const LinkSpec* link = copy_link(src, dst);
  if (link == nullptr) return;
  const int64_t dur_ns = transfer_time_ns(*link, bytes);
  // The copy engine of the simulated end starts once both ends are ready, and the compute
  // streams wait for it to finish (a synchronous .to(), as PyTorch issues by default).
  int64_t start_ns = 0;
  for (const Device* d : {&src, &dst})
    if (d->is_simulated()) start_ns = std::max(start_ns, d->clock_ns(StreamKind::kCompute));
  for (const Device* d : {&src, &dst}) {
    if (!d->is_simulated()) continue;
    d->wait_until(StreamKind::kCopy, start_ns);
    d->advance(StreamKind::kCopy, dur_ns);
    d->wait_until(StreamKind::kCompute, start_ns + dur_ns);
  }
  const Device& traced = dst.is_simulated() ? dst : src;
  if (traced.traces_kernels()) traced.tracer()->copy_transfer(src, dst, start_ns, dur_ns, bytes);
}

}  // namespace

Tensor Tensor::to(const Device& device, MemoryCategory category) const {
  DPS_ASSERT(defined(), "to() of an undefined tensor");
  if (device == this->device() && category == this->category()) return *this;
  Tensor out = has_data() ? empty(shape_, device, category, dtype_) : meta(shape_, device, category, dtype_);
  out.transfer_from(*this);
  return out;
}

void Tensor::transfer_from(const Tensor& src) {
  const Device* copier = nullptr;
  if (has_data() && src.has_data() && nbytes() > 0)
    copier = &copy_bytes(
        device(), static_cast<char*>(storage_->data) + offset_elems_ * element_size(dtype_), src.device(),
        static_cast<const char*>(src.storage_->data) + src.offset_elems_ * element_size(dtype_), nbytes());
  if (device() == src.device()) return;
  const bool measured = copier != nullptr && copier->kind() == DeviceKind::kCuda &&
                        trace_measured_copy(*copier, src.device(), device(), nbytes());
  if (!measured) charge_copy(src.device(), device(), nbytes());
}

Tensor Tensor::clone(MemoryCategory category) const {
  DPS_ASSERT(defined(), "clone() of an undefined tensor");
  Tensor out =
      has_data() ? empty(shape_, device(), category, dtype_) : meta(shape_, device(), category, dtype_);
  if (has_data() && nbytes() > 0) out.copy_from(*this);
  return out;
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  DPS_CHECK(dim() >= 1, ErrorKind::kInvalidArgument, "rows() of a 0-d tensor");
  DPS_CHECK(begin >= 0 && count >= 0 && begin + count <= shape_[0], ErrorKind::kInvalidArgument,
            "rows [{}, {}) out of range for shape {}", begin, begin + count, shape_to_string(shape_));
  Tensor v = *this;
  const int64_t row_elems = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  v.offset_elems_ += begin * row_elems;
  v.shape_[0] = count;
  v.numel_ = count * row_elems;
  return v;
}

Tensor Tensor::reshape(const Shape& shape) const {
  DPS_CHECK(shape_numel(shape) == numel_, ErrorKind::kInvalidArgument, "cannot reshape {} into {}",
            shape_to_string(shape_), shape_to_string(shape));
  Tensor v = *this;
  v.shape_ = shape;
  return v;
}

void Tensor::fill(float value) {
  float* p = f32();
  if (device().kind() != DeviceKind::kCuda) {
    std::fill(p, p + numel_, value);
    return;
  }
  // Device memory is never touched from the host: a memset for +0.0f, else the values built on the
  // host and copied in.
  if (std::bit_cast<uint32_t>(value) == 0) {
    device().impl().fill_zeros(p, nbytes());
    return;
  }
  const std::vector<float> host(static_cast<size_t>(numel_), value);
  device().impl().copy_from_host(p, host.data(), nbytes());
}

void Tensor::copy_from(const Tensor& src) {
  DPS_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, ErrorKind::kInvalidArgument,
            "copy_from: {} {} into {} {}", to_string(src.dtype_), shape_to_string(src.shape_),
            to_string(dtype_), shape_to_string(shape_));
  transfer_from(src);
}

void check_same_device(const Tensor& a, const Tensor& b) {
  if (a.device() == b.device()) return;
  throw Error(
      ErrorKind::kDevice,
      fmt::format("Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
                  a.device().name(), b.device().name()));
}

void check_shape(const Tensor& t, const Shape& expected, const char* op, const char* what) {
  DPS_CHECK(t.shape() == expected, ErrorKind::kInvalidArgument, "{}: expected {} of shape {}, got {}", op,
            what, shape_to_string(expected), shape_to_string(t.shape()));
}

}  // namespace dpscope
