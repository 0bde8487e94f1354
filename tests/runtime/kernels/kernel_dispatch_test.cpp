// Dispatch by device kind: cpu and sim run the host kernels; a device kind without kernels (cuda,
// until its kernels are built) fails with one line naming the op, never by touching its memory.
#include <gtest/gtest.h>

#include "dpscope/core/sim_device.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "support/forwarding_device.hpp"

namespace dpscope {
namespace {

// Reports itself as a cuda device but keeps host memory, so only the dispatch can stop a kernel.
class FakeCudaDevice final : public testing::ForwardingDevice {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int index() const override { return 0; }
  void copy_from_device(void* dst, const DeviceImpl& /*src_device*/, const void* src,
                        uint64_t bytes) override {
    inner_.copy_from_host(dst, src, bytes);
  }
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
