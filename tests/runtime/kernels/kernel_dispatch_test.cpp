// Dispatch by device kind: cpu and sim run the host kernels; a device kind without kernels (cuda,
// until its kernels are built) fails with one line naming the op, never by touching its memory.
#include <gtest/gtest.h>

#include "dpscope/core/sim_device.hpp"
#include "dpscope/kernels/kernels.hpp"

namespace dpscope {
namespace {

// Reports itself as a cuda device but keeps host memory, so only the dispatch can stop a kernel.
class FakeCudaDevice final : public DeviceImpl {
 public:
  FakeCudaDevice() : inner_(0, find_preset("h100-sxm")) {}
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int index() const override { return 0; }
  const HardwarePreset* hardware() const override { return inner_.hardware(); }
  void* allocate(uint64_t bytes, MemoryCategory c, bool with_data) override {
    return inner_.allocate(bytes, c, with_data);
  }
  void deallocate(void* data, uint64_t bytes, MemoryCategory c) noexcept override {
    inner_.deallocate(data, bytes, c);
  }
  MemoryStats memory() const override { return inner_.memory(); }
  void copy_from_host(void* dst, const void* src, uint64_t bytes) override {
    inner_.copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, uint64_t bytes) override {
    inner_.copy_to_host(dst, src, bytes);
  }
  void fill_zeros(void* dst, uint64_t bytes) override { inner_.fill_zeros(dst, bytes); }
  void copy_from_device(void* dst, const DeviceImpl& /*src_device*/, const void* src,
                        uint64_t bytes) override {
    inner_.copy_from_host(dst, src, bytes);
  }
  int64_t clock_ns(StreamKind s) const override { return inner_.clock_ns(s); }
  int64_t advance(StreamKind s, int64_t dur_ns) override { return inner_.advance(s, dur_ns); }
  void wait_until(StreamKind s, int64_t ts_ns) override { inner_.wait_until(s, ts_ns); }
  Event record(StreamKind s) override { return inner_.record(s); }
  void wait(StreamKind s, const Event& e) override { inner_.wait(s, e); }
  int64_t elapsed_ns(const Event& a, const Event& b) const override { return inner_.elapsed_ns(a, b); }
  int64_t synchronize() override { return inner_.synchronize(); }
  Event timer_begin(StreamKind s) override { return inner_.timer_begin(s); }
  TimedSpan timer_end(StreamKind s, const Event& b, KernelCost c) override {
    return inner_.timer_end(s, b, c);
  }
  TraceContext* trace_context() override { return inner_.trace_context(); }

 private:
  SimDevice inner_;
};

TEST(KernelDispatch, ADeviceKindWithoutKernelsFailsNamingTheOp) {
  const Device cuda(std::make_shared<FakeCudaDevice>());
  EXPECT_EQ(cuda.name(), "cuda:0");
  Tensor x = Tensor::full({4}, -1.0f, cuda);
  Tensor y = Tensor::zeros({4}, cuda);
  try {
    kernels::relu_forward(x, y);
    FAIL() << "expected kUnsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_STREQ(e.what(),
                 "kernel relu_forward has no implementation for cuda devices (CUDA kernels are not built)");
  }
  EXPECT_EQ(y.to_vector(), std::vector<float>(4, 0.0f));  // untouched
  EXPECT_THROW(
      kernels::reduce_into(DeviceKind::kCuda, nullptr, nullptr, 0, kernels::Reduction::kSum, DType::kF32),
      Error);
}

TEST(KernelDispatch, CpuAndSimRunTheHostKernels) {
  for (const Device& device : {Device::new_cpu(), Device::sim(1, find_preset("t4"))}) {
    const Tensor x = Tensor::from_floats(std::vector<float>{-1.0f, 2.0f}, {2}, device);
    Tensor y = Tensor::zeros({2}, device);
    kernels::relu_forward(x, y);
    EXPECT_EQ(y.to_vector(), (std::vector<float>{0.0f, 2.0f})) << device.name();
  }
}

}  // namespace
}  // namespace dpscope
