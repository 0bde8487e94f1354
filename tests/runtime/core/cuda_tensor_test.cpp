// Tensors on a cuda-kind device never touch its memory from the host: fill goes through a device
// memset or a host-built copy, and to() moves data through the device's copy calls. Tested with a
// fake cuda device that keeps host memory and counts the calls, so this runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "dpscope/core/tensor.hpp"
#include "support/forwarding_device.hpp"

namespace dpscope {
namespace {

class CountingCudaDevice final : public testing::ForwardingDevice {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  void copy_from_host(void* dst, const void* src, uint64_t bytes) override {
    ++from_host;
    from_host_bytes += bytes;
    inner_.copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, uint64_t bytes) override {
    ++to_host;
    inner_.copy_to_host(dst, src, bytes);
  }
  void fill_zeros(void* dst, uint64_t bytes) override {
    ++zero_fills;
    inner_.fill_zeros(dst, bytes);
  }
  void copy_from_device(void* dst, const DeviceImpl& /*src_device*/, const void* src,
                        uint64_t bytes) override {
    ++from_device;
    inner_.copy_from_host(dst, src, bytes);
  }
  int from_host = 0;
  uint64_t from_host_bytes = 0;
  int to_host = 0;
  int zero_fills = 0;
  int from_device = 0;
};

TEST(CudaTensor, FillBuildsTheValuesOnTheHostAndCopiesThem) {
  auto fake = std::make_shared<CountingCudaDevice>();
  const Device cuda(fake);
  Tensor t = Tensor::empty({2, 3}, cuda);
  t.fill(2.5f);
  EXPECT_EQ(fake->from_host, 1);
  EXPECT_EQ(fake->from_host_bytes, 24u);
  EXPECT_EQ(fake->zero_fills, 0);
  EXPECT_EQ(t.to_vector(), std::vector<float>(6, 2.5f));
  // A view fills only its rows.
  Tensor row = t.rows(1, 1);
  row.fill(-1.0f);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{2.5f, 2.5f, 2.5f, -1.0f, -1.0f, -1.0f}));
}

TEST(CudaTensor, FillWithPositiveZeroIsAMemsetAndNegativeZeroKeepsItsSign) {
  auto fake = std::make_shared<CountingCudaDevice>();
  const Device cuda(fake);
  Tensor t = Tensor::full({4}, 0.0f, cuda);
  EXPECT_EQ(fake->zero_fills, 1);
  EXPECT_EQ(fake->from_host, 0);
  EXPECT_EQ(t.to_vector(), std::vector<float>(4, 0.0f));
  t.fill(-0.0f);  // not all-zero bits: copied
  EXPECT_EQ(fake->from_host, 1);
  for (float v : t.to_vector()) EXPECT_TRUE(std::signbit(v));
}

TEST(CudaTensor, ToAndFromTheCpuAndSimGoThroughTheCudaDevicesCopies) {
  auto fake = std::make_shared<CountingCudaDevice>();
  const Device cuda(fake);
  const std::vector<float> values{1.0f, 2.0f, 3.0f};
  const Tensor host = Tensor::from_floats(values, {3});
  const Tensor on_cuda = host.to(cuda);
  EXPECT_EQ(fake->from_host, 1);
  EXPECT_EQ(on_cuda.to(Device::cpu()).to_vector(), values);
  const int to_host_before = fake->to_host;
  // sim memory is host memory: the cuda device copies into it (sim cannot read cuda memory).
  const Device sim = Device::sim(0, find_preset("t4"));
  const Tensor on_sim = on_cuda.to(sim);
  EXPECT_EQ(fake->to_host, to_host_before + 1);
  EXPECT_EQ(on_sim.to_vector(), values);
  // ...and from sim into cuda, the cuda device copies (from host memory).
  const int from_device_before = fake->from_device;
  EXPECT_EQ(on_sim.to(cuda).to_vector(), values);
  EXPECT_EQ(fake->from_device, from_device_before + 1);
}

}  // namespace
}  // namespace dpscope
