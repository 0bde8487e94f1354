// Dispatch by device kind: cpu and sim run the host kernels, cuda tensors the CUDA kernels. Without
// CUDA in the build a cuda tensor reaching a kernel fails with one line naming the op, the device
// and why, never by touching its memory; without a GPU no cuda tensor can be made at all. Also the
// argument checks of the dispatch layer itself (host-kind reductions, multi-tensor updates).
#include <gtest/gtest.h>

#include "dpscope/core/cuda.hpp"
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

TEST(KernelDispatch, WithoutCudaInTheBuildACudaTensorFailsInOneLine) {
  if (cuda::built())
    GTEST_SKIP() << "this build has the CUDA kernels (the cuda case of KernelConsistency covers them)";
  const std::string reason = cuda::unavailable_reason();
  EXPECT_EQ(reason.rfind("dpscope was built without CUDA", 0), 0u) << reason;
  const Device cuda(std::make_shared<FakeCudaDevice>());
  EXPECT_EQ(cuda.name(), "cuda:0");
  Tensor x = Tensor::full({4}, -1.0f, cuda);
  Tensor y = Tensor::zeros({4}, cuda);
  try {
    kernels::relu_forward(x, y);
    FAIL() << "expected kUnsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(std::string(e.what()), "kernel relu_forward on cuda:0: " + reason);
  }
  EXPECT_EQ(y.to_vector(), std::vector<float>(4, 0.0f));  // untouched
  try {
    kernels::divide(cuda, nullptr, 0, 2.0f);
    FAIL() << "expected kUnsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_EQ(std::string(e.what()), "kernel divide on cuda:0: " + reason);
  }
}

TEST(KernelDispatch, WithoutAGpuNoCudaTensorCanBeMade) {
  if (cuda::physical_device_count() > 0) GTEST_SKIP() << "this machine has a CUDA GPU";
  EXPECT_FALSE(cuda::unavailable_reason().empty());
  try {
    const std::vector<Device> devices = cuda::make_devices({.count = 1});
    FAIL() << "made " << devices.size() << " cuda device(s) without a GPU";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_FALSE(message.empty());
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;  // one line
  }
}

// A collective's host buffers are named by their device kind; cuda memory needs its Device, whose
// current stream the reduction runs on.
TEST(KernelDispatch, HostKindReductionsRefuseCudaMemory) {
  try {
    kernels::reduce_into(DeviceKind::kCuda, nullptr, nullptr, 0, kernels::Reduction::kSum, DType::kF32);
    FAIL() << "expected kInvalidArgument";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(
        e.what(),
        "reduce_into on cuda memory needs its Device (the stream to run on): call reduce_into(device, "
        "...)");
  }
  EXPECT_THROW(kernels::divide(DeviceKind::kCuda, nullptr, 0, 2.0f), Error);
  std::vector<float> dst = {1.0f, 2.0f};
  const std::vector<float> src = {3.0f, 5.0f};
  kernels::reduce_into(DeviceKind::kSim, reinterpret_cast<std::byte*>(dst.data()),
                       reinterpret_cast<const std::byte*>(src.data()), 2, kernels::Reduction::kSum,
                       DType::kF32);
  kernels::divide(DeviceKind::kCpu, reinterpret_cast<std::byte*>(dst.data()), 2, 2.0f);
  EXPECT_EQ(dst, (std::vector<float>{2.0f, 3.5f}));
}

TEST(KernelDispatch, AMultiTensorUpdateTakesTheTensorsOfOneDevice) {
  const Device a = Device::sim(0, find_preset("t4"));
  const Device b = Device::sim(1, find_preset("t4"));
  Tensor pa = Tensor::zeros({2}, a), ga = Tensor::zeros({2}, a), pb = Tensor::zeros({2}, b),
         gb = Tensor::zeros({2}, b), none;
  const kernels::SgdStep step{.neg_lr = -0.1f};
  const std::vector<kernels::SgdTensors> tensors = {{&pa, &ga, &none, step}, {&pb, &gb, &none, step}};
  try {
    kernels::sgd_update_multi(tensors);
    FAIL() << "expected kInvalidArgument";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(
        e.what(),
        "sgd_update_multi: parameters on sim:0 and sim:1: one call updates the tensors of one device");
  }
  kernels::sgd_update_multi({});  // nothing to do
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
