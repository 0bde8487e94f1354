// The device interface (core/device_impl.hpp): streams as values, events (record, wait, elapsed),
// the kernel timer behind KernelScope, allocation and copies through the device, and the cpu device
// holding no process-wide trace state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "dpscope/core/sim_device.hpp"
#include "dpscope/core/tensor.hpp"
#include "dpscope/core/timing.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "support/forwarding_device.hpp"
#include "support/presets.hpp"

namespace dpscope {
namespace {

// A simulated device that counts what Tensor asks of it (a test double of the interface).
class CountingDevice final : public testing::ForwardingDevice {
 public:
  explicit CountingDevice(int index) : ForwardingDevice(index) {}
  void* allocate(uint64_t bytes, MemoryCategory category, bool with_data) override {
    ++allocations;
    allocated_bytes += bytes;
    return inner_.allocate(bytes, category, with_data);
  }
  void deallocate(void* data, uint64_t bytes, MemoryCategory category) noexcept override {
    ++deallocations;
    inner_.deallocate(data, bytes, category);
  }
  void copy_from_host(void* dst, const void* src, uint64_t bytes) override {
    ++host_to_device;
    inner_.copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, uint64_t bytes) override {
    ++device_to_host;
    inner_.copy_to_host(dst, src, bytes);
  }
  void fill_zeros(void* dst, uint64_t bytes) override {
    ++zero_fills;
    inner_.fill_zeros(dst, bytes);
  }
  void copy_from_device(void* dst, const DeviceImpl& src_device, const void* src, uint64_t bytes) override {
    ++device_to_device;
    inner_.copy_from_device(dst, src_device, src, bytes);
  }
  TimedSpan timer_end(StreamKind s, const Event& begin, KernelCost cost) override {
    ++timed_kernels;
    return inner_.timer_end(s, begin, cost);
  }

  int allocations = 0, deallocations = 0, zero_fills = 0, host_to_device = 0, device_to_host = 0,
      device_to_device = 0, timed_kernels = 0;
  uint64_t allocated_bytes = 0;
};

TEST(DeviceInterface, StreamsAreValuesAndEventsOrderThem) {
  const Device sim = Device::sim(0, testing::roofline_preset("h100-sxm"));
  const Stream compute = sim.stream(StreamKind::kCompute);
  const Stream comm = sim.stream(StreamKind::kComm);
  EXPECT_EQ(compute.kind(), StreamKind::kCompute);
  EXPECT_TRUE(compute.device() == sim);
  sim.advance(StreamKind::kCompute, 700);
  const Event grads_ready = compute.record();
  EXPECT_EQ(grads_ready.ts_ns, 700);
  EXPECT_EQ(grads_ready.stream, StreamKind::kCompute);
  EXPECT_EQ(grads_ready.native, nullptr);  // sim events need no native object
  comm.wait(grads_ready);                  // the all-reduce starts after backward produced the bucket
  EXPECT_EQ(comm.clock_ns(), 700);
  sim.advance(StreamKind::kComm, 300);
  compute.wait(comm.record());  // the optimizer waits for the all-reduce
  EXPECT_EQ(compute.clock_ns(), 1000);
  // A wait on an event already passed moves nothing.
  comm.wait(grads_ready);
  EXPECT_EQ(comm.clock_ns(), 1000);
}

TEST(DeviceInterface, ElapsedTimeBetweenTwoEventsIsTheirDistanceOnTheClock) {
  const Device sim = Device::sim(0, testing::roofline_preset("h100-sxm"));
  const Event start = sim.record(StreamKind::kCopy);
  sim.advance(StreamKind::kCopy, 1234);
  const Event end = sim.record(StreamKind::kCopy);
  EXPECT_EQ(sim.elapsed_ns(start, end), 1234);
  EXPECT_EQ(sim.elapsed_ns(end, start), -1234);

  const Device cpu = Device::new_cpu();
  const Event a = cpu.record(StreamKind::kCompute);
  const Event b = cpu.record(StreamKind::kCompute);
  EXPECT_GE(cpu.elapsed_ns(a, b), 0);  // wall clock: monotonic
}

TEST(DeviceInterface, KernelScopeChargesTheRooflineCostThroughTheDeviceTimer) {
  auto impl = std::make_shared<CountingDevice>(0);
  const Device dev(impl);
  const KernelCost cost{.flops = 1e9, .bytes = 1e6};
  const int64_t expected = kernel_time_ns(*dev.hardware(), cost);
  { KernelScope kernel(dev, "matmul", cost, StreamKind::kComm); }
  EXPECT_EQ(impl->timed_kernels, 1);
  EXPECT_EQ(dev.clock_ns(StreamKind::kComm), expected);
  EXPECT_EQ(dev.clock_ns(StreamKind::kCompute), 0);
}

TEST(DeviceInterface, StorageAllocatesAndFreesThroughItsDevice) {
  auto impl = std::make_shared<CountingDevice>(2);
  const Device dev(impl);
  {
    const Tensor w = Tensor::zeros({4, 8}, dev, MemoryCategory::kParameters);
    const Tensor view = w.rows(1, 2);  // a view allocates nothing
    const Tensor shapes_only = Tensor::meta({1000}, dev, MemoryCategory::kActivations);
    EXPECT_EQ(impl->allocations, 2);
    EXPECT_EQ(impl->allocated_bytes, 4u * 8u * 4u + 4000u);
    EXPECT_EQ(dev.memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 128u);
    EXPECT_EQ(dev.memory().bytes[static_cast<int>(MemoryCategory::kActivations)], 4000u);
    EXPECT_EQ(impl->deallocations, 0);
    EXPECT_EQ(impl->zero_fills, 1);  // zeros() clears through the device (cudaMemset on cuda)
  }
  EXPECT_EQ(impl->deallocations, 2);
  EXPECT_EQ(dev.memory().in_use_bytes(), 0u);
  EXPECT_EQ(dev.memory().peak_bytes, 4128u);
}

TEST(DeviceInterface, CopiesGoThroughTheDeviceInTheirDirection) {
  auto a_impl = std::make_shared<CountingDevice>(0);
  auto b_impl = std::make_shared<CountingDevice>(1);
  const Device a(a_impl), b(b_impl);
  const std::vector<float> values = {1.0f, 2.0f, 3.0f};
  const Tensor host = Tensor::from_floats(values, {3});
  const Tensor on_a = host.to(a);
  EXPECT_EQ(a_impl->host_to_device, 1);
  const Tensor on_b = on_a.to(b);
  EXPECT_EQ(b_impl->device_to_device, 1);  // the destination copies from its peer
  const Tensor back = on_b.to(Device::cpu());
  EXPECT_EQ(b_impl->device_to_host, 1);
  EXPECT_EQ(back.to_vector(), values);
  // Reading values back copies to the host through the device, as from a GPU.
  const Tensor scalar = Tensor::from_floats(std::vector<float>{7.0f}, {}, a);
  EXPECT_EQ(a_impl->host_to_device, 2);
  EXPECT_EQ(scalar.item(), 7.0f);
  EXPECT_EQ(on_a.to_vector(), values);
  EXPECT_EQ(a_impl->device_to_host, 2);
  Tensor clone = on_a.clone();
  EXPECT_EQ(a_impl->device_to_device, 1);  // within a device
  EXPECT_EQ(clone.to_vector(), values);
}

TEST(DeviceInterface, OutOfMemoryThroughTheDeviceKeepsCudaWordingAndAccountsNothing) {
  HardwarePreset tiny = find_preset("t4");
  tiny.memory_bytes = 4096;
  const Device sim = Device::sim(3, tiny);
  const Tensor a = Tensor::zeros({512}, sim, MemoryCategory::kGradients);  // 2 KiB with data
  try {
    Tensor::zeros({1024}, sim, MemoryCategory::kOptimizerState);
    FAIL() << "expected OOM";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_STREQ(
        e.what(),
        "sim:3 out of memory: tried to allocate 4.00 KiB for optimizer_state; 2.00 KiB free of 4.00 KiB "
        "(parameters 0 B, gradients 2.00 KiB, optimizer state 0 B, activations 0 B, buffers 0 B)");
  }
  EXPECT_EQ(sim.memory().in_use_bytes(), 2048u);
}

TEST(DeviceInterface, EveryCpuDeviceIsTheSameDeviceForTensors) {
  const Device run_a = Device::new_cpu();
  const Device run_b = Device::new_cpu();
  EXPECT_TRUE(run_a == Device::cpu());
  EXPECT_TRUE(run_a == run_b);
  EXPECT_EQ(run_a.name(), "cpu");
  const Tensor x = Tensor::full({2}, 1.0f, run_a);
  const Tensor y = Tensor::full({2}, 2.0f, Device::cpu());
  EXPECT_NO_THROW(check_same_device(x, y));
  const Tensor same = x.to(run_b);
  EXPECT_EQ(same.f32(), x.f32());  // no copy between cpu instances
}

TEST(DeviceInterface, EachCpuInstanceHasItsOwnTraceContextAndMemory) {
  const Device run_a = Device::new_cpu();
  const Device run_b = Device::new_cpu();
  run_a.set_rank(3);
  run_a.set_step(7);
  run_a.set_phase(Phase::kBackward);
  EXPECT_EQ(run_a.rank(), 3);
  EXPECT_EQ(run_a.step(), 7);
  EXPECT_EQ(run_a.phase(), Phase::kBackward);
  EXPECT_EQ(run_b.rank(), 0);
  EXPECT_EQ(run_b.step(), -1);
  EXPECT_EQ(run_b.phase(), Phase::kNone);
  const Tensor t = Tensor::zeros({10}, run_a, MemoryCategory::kParameters);
  EXPECT_EQ(run_a.memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 40u);
  EXPECT_EQ(run_b.memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 0u);
}

TEST(DeviceInterface, TheSharedCpuDeviceHoldsNoTraceState) {
  const Device shared = Device::cpu();
  shared.set_phase(Phase::kForward);
  shared.set_rank(5);
  shared.set_step(9);
  EXPECT_EQ(shared.phase(), Phase::kNone);
  EXPECT_EQ(shared.rank(), 0);
  EXPECT_EQ(shared.step(), -1);
  EXPECT_EQ(shared.tracer(), nullptr);
  EXPECT_NO_THROW(shared.attach_tracer(nullptr, -1));  // detaching is harmless
  NullTraceSink sink;
  try {
    shared.attach_tracer(&sink, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(e.what(),
                 "cannot trace the process's shared cpu device: give the run its own with Device::new_cpu()");
  }
  const Device run = Device::new_cpu();
  run.attach_tracer(&sink, 4);
  EXPECT_EQ(run.tracer(), &sink);
  EXPECT_EQ(run.trace_id(), 4);
  EXPECT_EQ(Device::cpu().tracer(), nullptr);  // the run's tracer stays with the run
}

TEST(DeviceInterface, CpuTimerMeasuresWallTime) {
  const Device cpu = Device::new_cpu();
  const Event begin = cpu.impl().timer_begin(StreamKind::kCompute);
  const TimedSpan span = cpu.impl().timer_end(StreamKind::kCompute, begin, KernelCost{1e12, 1e12});
  EXPECT_EQ(span.start_ns, begin.ts_ns);
  EXPECT_GE(span.dur_ns, 0);
  EXPECT_LT(span.dur_ns, 1'000'000'000);  // wall time, not the (huge) modelled cost
}

TEST(DeviceInterface, ACpuTrainingRunIsTracedThroughItsOwnCpuDevice) {
  // The run makes its own cpu device; its batches, activations and kernels live there, so every
  // layer's kernel is traced although the process's shared cpu device holds no tracer.
  const auto trace =
      std::filesystem::temp_directory_path() / fmt::format("dpscope_cpu_run_{}.jsonl", ::getpid());
  const std::string command = fmt::format(
      "{} train --backend cpu --model 2-8-3 --dataset spirals:64 --batch 16 --steps 2 --trace {} > /dev/null",
      DPSCOPE_CLI, trace.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(trace);
  int spans = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"type\":\"span\"") != std::string::npos) ++spans;
  std::filesystem::remove(trace);
  // Per step: forward (Linear, ReLU, Linear, loss), backward (loss, 2.Linear x3, ReLU, 0.Linear x2
  // without grad_input), the SGD update of 4 parameters and the optimizer.step span: 4 + 7 + 4 + 1.
  EXPECT_EQ(spans, 2 * 16);
}

}  // namespace
}  // namespace dpscope
