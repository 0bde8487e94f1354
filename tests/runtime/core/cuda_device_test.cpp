// The cuda device on a real GPU (scripts/gpu-check.sh runs these on an H100): logical devices and
// their budgets, host and peer copies, memory accounting and OOM wording, the caching allocator's
// stats, events ordering one stream after another, and measured spans on the host clock. Every test
// skips with the reason when the machine has no CUDA GPU (or the build has no CUDA).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "dpscope/core/cpu_device.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/core/tensor.hpp"
#include "dpscope/core/timing.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

#define SKIP_WITHOUT_GPU()                                                \
  do {                                                                    \
    if (cuda::physical_device_count() == 0)                               \
      GTEST_SKIP() << "needs a CUDA GPU: " << cuda::unavailable_reason(); \
  } while (0)

// Keeps the kernel spans and copies a traced device emits.
class RecordingSink final : public TraceSink {
 public:
  struct Kernel {
    std::string name;
    StreamKind stream;
    int64_t ts_ns;
    int64_t dur_ns;
    int64_t step;
  };
  struct Copy {
    std::string src, dst;
    int64_t ts_ns, dur_ns;
    uint64_t bytes;
  };
  void kernel_span(const Device& device, StreamKind stream, std::string_view name, int64_t ts_ns,
                   int64_t dur_ns, KernelCost /*cost*/) override {
    std::lock_guard lock(mutex);
    kernels.push_back({std::string(name), stream, ts_ns, dur_ns, device.step()});
  }
  void span(const Device&, const SpanEvent&) override {}
  void instant(const Device&, int64_t, const InstantPayload&) override {}
  void loss_counter(const Device&, int64_t, double) override {}
  void memory_counter(const Device&, int64_t, const MemoryStats&) override {}
  uint64_t transfer(const Device&, const TraceTransfer&) override { return 0; }
  void copy_transfer(const Device& src, const Device& dst, int64_t ts_ns, int64_t dur_ns,
                     uint64_t bytes) override {
    std::lock_guard lock(mutex);
    copies.push_back({src.name(), dst.name(), ts_ns, dur_ns, bytes});
  }
  void values(const Device&, int64_t, const ValuesEvent&) override {}
  void samples(const Device&, int64_t, std::span<const int64_t>, std::optional<int64_t>) override {}
  void buckets(const Device&, int64_t, std::span<const TraceBucketInfo>, BucketReason) override {}
  void flush() override {}

  std::mutex mutex;
  std::vector<Kernel> kernels;
  std::vector<Copy> copies;
};

std::vector<float> iota_floats(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.5f);
  return v;
}

TEST(CudaDevice, MakesLogicalDevicesOnThePhysicalGpusWithEvenBudgets) {
  SKIP_WITHOUT_GPU();
  const int gpus = cuda::physical_device_count();
  const std::vector<Device> devices = cuda::make_devices({.count = 4});
  ASSERT_EQ(devices.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    const Device& d = devices[static_cast<size_t>(k)];
    EXPECT_EQ(d.name(), fmt::format("cuda:{}", k));
    EXPECT_EQ(d.kind(), DeviceKind::kCuda);
    EXPECT_FALSE(d.is_simulated());
    const int physical = cuda::physical_index(d.impl());
    EXPECT_EQ(physical, k % gpus);
    ASSERT_NE(d.hardware(), nullptr);
    EXPECT_EQ(d.hardware()->name, fmt::format("{} (GPU {})", cuda::physical_name(d.impl()), physical));
    EXPECT_EQ(d.hardware()->memory_bytes, d.memory().capacity_bytes);
    EXPECT_GT(d.memory().capacity_bytes, 0u);
    EXPECT_NE(cuda::stream_handle(d.impl(), StreamKind::kCompute),
              cuda::stream_handle(d.impl(), StreamKind::kComm));
  }
  // Logical devices on one GPU split it evenly.
  if (gpus == 1) {
    EXPECT_EQ(devices[0].memory().capacity_bytes, devices[3].memory().capacity_bytes);
  }
  const std::vector<Device> capped = cuda::make_devices({.count = 2, .memory_cap_bytes = 256 * kMiB});
  EXPECT_EQ(capped[0].memory().capacity_bytes, 256 * kMiB);
  EXPECT_EQ(capped[1].hardware()->memory_bytes, 256 * kMiB);
}

TEST(CudaDevice, CopiesHostToDeviceAndBackThroughTheStagingBuffer) {
  SKIP_WITHOUT_GPU();
  const Device cuda = cuda::make_devices({.count = 1}).front();
  // Small, and larger than the 16 MiB staging buffer (copied in chunks).
  for (size_t n : {size_t{1}, size_t{1000}, size_t{5'000'001}}) {
    const std::vector<float> values = iota_floats(n);
    const Tensor t = Tensor::from_floats(values, {static_cast<int64_t>(n)}, cuda);
    EXPECT_EQ(t.to_vector(), values) << n;
    EXPECT_EQ(t.to(Device::cpu()).to_vector(), values) << n;
  }
  const Tensor one = Tensor::full({1}, 3.25f, cuda);
  EXPECT_EQ(one.item(), 3.25f);
  EXPECT_EQ(Tensor::zeros({3, 5}, cuda).to_vector(), std::vector<float>(15, 0.0f));
  const std::vector<int64_t> ints{7, -1, 1LL << 40};
  EXPECT_EQ(Tensor::from_ints(ints, {3}, cuda).to_ints(), ints);
}

TEST(CudaDevice, CopiesBetweenLogicalDevicesAndWithinOne) {
  SKIP_WITHOUT_GPU();
  const std::vector<Device> devices = cuda::make_devices({.count = 2});
  const std::vector<float> values = iota_floats(300'000);
  const Tensor a = Tensor::from_floats(values, {300'000}, devices[0]);
  const Tensor b = a.to(devices[1]);
  EXPECT_EQ(b.device(), devices[1]);
  EXPECT_EQ(b.to_vector(), values);
  EXPECT_EQ(b.to(devices[0]).to_vector(), values);
  const Tensor c = b.clone();  // within cuda:1 (device to device on its current stream)
  EXPECT_EQ(c.to_vector(), values);
  // A sim tensor's host memory goes in through the cuda device, and comes back out.
  const Device sim = Device::sim(0, find_preset("h100-sxm"));
  EXPECT_EQ(a.to(sim).to(devices[1]).to_vector(), values);
}

TEST(CudaDevice, AccountsByCategoryTracksPeakAndWordsTheOutOfMemoryError) {
  SKIP_WITHOUT_GPU();
  const Device cuda = cuda::make_devices({.count = 1, .memory_cap_bytes = 4 * kMiB}).front();
  {
    const Tensor params = Tensor::zeros({512 * 1024}, cuda, MemoryCategory::kParameters);  // 2 MiB
    const Tensor timing_only =
        Tensor::meta({256 * 1024}, cuda, MemoryCategory::kGradients);  // 1 MiB, no data
    const MemoryStats m = cuda.memory();
    EXPECT_EQ(m.bytes[static_cast<int>(MemoryCategory::kParameters)], 2 * kMiB);
    EXPECT_EQ(m.bytes[static_cast<int>(MemoryCategory::kGradients)], kMiB);
    EXPECT_EQ(m.in_use_bytes(), 3 * kMiB);
    const testing::Outcome oom =
        testing::error_of([&] { Tensor::empty({512 * 1024}, cuda, MemoryCategory::kActivations); });
    EXPECT_EQ(oom.kind, ErrorKind::kOutOfMemory);
    const std::string prefix =
        "cuda:0 out of memory: tried to allocate 2.00 MiB for activations; 1.00 MiB free of 4.00 MiB "
        "(parameters 2.00 MiB, gradients 1.00 MiB, optimizer state 0 B, activations 0 B, buffers 0 B); GPU ";
    EXPECT_EQ(oom.message.rfind(prefix, 0), 0u) << oom.message;
    EXPECT_NE(oom.message.find(" free of "), oom.message.rfind(" free of ")) << "driver free/total missing";
    EXPECT_NE(oom.message.find("(driver)"), std::string::npos) << oom.message;
    EXPECT_EQ(cuda.memory().in_use_bytes(), 3 * kMiB);  // the failed request accounted nothing
  }
  EXPECT_EQ(cuda.memory().in_use_bytes(), 0u);
  EXPECT_EQ(cuda.memory().peak_bytes, 3 * kMiB);
}

TEST(CudaDevice, TheCachingAllocatorReusesFreedBlocksUntilEmptyCache) {
  SKIP_WITHOUT_GPU();
  const Device cuda = cuda::make_devices({.count = 1}).front();
  cuda::empty_cache(cuda.impl());
  const cuda::AllocatorStats before = cuda::allocator_stats(cuda.impl());
  EXPECT_EQ(before.allocated_bytes, 0u);
  EXPECT_GT(before.driver_total_bytes, before.driver_free_bytes);
  const void* first = nullptr;
  {
    const Tensor t = Tensor::empty({3 * 1024 * 1024 / 4}, cuda);  // 3 MiB -> the 4 MiB class
    first = t.f32();                                              // the address only, never read
    EXPECT_EQ(cuda::allocator_stats(cuda.impl()).allocated_bytes, 4 * kMiB);
  }
  const cuda::AllocatorStats cached = cuda::allocator_stats(cuda.impl());
  EXPECT_EQ(cached.allocated_bytes, 0u);
  EXPECT_EQ(cached.reserved_bytes, before.reserved_bytes + 4 * kMiB);
  {
    const Tensor again = Tensor::empty({3 * 1024 * 1024 / 4}, cuda);
    EXPECT_EQ(again.f32(), first);  // the cached block, same stream and size class
  }
  cuda::empty_cache(cuda.impl());
  EXPECT_EQ(cuda::allocator_stats(cuda.impl()).reserved_bytes, before.reserved_bytes);
}

TEST(CudaDevice, LogicalDevicesOnOneGpuShareTheAllocatorButNotEachOthersFreedBlocks) {
  SKIP_WITHOUT_GPU();
  const std::vector<Device> devices = cuda::make_devices({.count = 2 * cuda::physical_device_count()});
  const Device& a = devices[0];
  const Device& b = devices[static_cast<size_t>(cuda::physical_device_count())];  // also on GPU 0
  ASSERT_EQ(cuda::physical_index(b.impl()), 0);
  const void* freed_by_a = nullptr;
  {
    const Tensor t = Tensor::empty({1024}, a);
    freed_by_a = t.f32();
  }
  const Tensor on_b = Tensor::empty({1024}, b);
  EXPECT_NE(on_b.f32(), freed_by_a);  // cuda:0's cached block waits for cuda:0's streams
  EXPECT_EQ(cuda::allocator_stats(a.impl()).allocated_bytes, cuda::allocator_stats(b.impl()).allocated_bytes);
  EXPECT_EQ(Tensor::empty({1024}, a).f32(), freed_by_a);  // and is reused by cuda:0
}

TEST(CudaDevice, AnEventOrdersTheCommStreamAfterTheComputeStream) {
  SKIP_WITHOUT_GPU();
  const Device cuda = cuda::make_devices({.count = 1}).front();
  Tensor big = Tensor::empty({64 * 1024 * 1024}, cuda);  // 256 MiB: a memset that takes a while
  const Event before = cuda.record(StreamKind::kCompute);
  big.fill(0.0f);  // on the compute stream
  const Event produced = cuda.record(StreamKind::kCompute);
  cuda.wait(StreamKind::kComm, produced);
  const Event consumed = cuda.record(StreamKind::kComm);
  const int64_t produced_ns = cuda::event_time_ns(cuda.impl(), produced);
  const int64_t consumed_ns = cuda::event_time_ns(cuda.impl(), consumed);
  EXPECT_GE(consumed_ns, produced_ns);
  EXPECT_GT(cuda.elapsed_ns(before, produced), 0);         // the memset took measurable time
  EXPECT_GE(cuda.synchronize(), consumed_ns - 1'000'000);  // host clock, within the offset's error
}

// The measured-span tests run under both kernel timers: CUPTI's activity records (the default) and
// a CUDA event pair per kernel.
class CudaTimer : public ::testing::TestWithParam<cuda::KernelTimer> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    cuda::set_kernel_timer(GetParam());
    if (GetParam() == cuda::KernelTimer::kCupti && cuda::kernel_timer_description() != "cupti")
      GTEST_SKIP() << "CUPTI is not usable here: " << cuda::kernel_timer_description();
  }
  void TearDown() override { cuda::set_kernel_timer(cuda::KernelTimer::kCupti); }
};

INSTANTIATE_TEST_SUITE_P(Timers, CudaTimer,
                         ::testing::Values(cuda::KernelTimer::kCupti, cuda::KernelTimer::kEvents),
                         [](const auto& timer) {
                           return timer.param == cuda::KernelTimer::kCupti ? "cupti" : "events";
                         });

TEST_P(CudaTimer, TracedKernelsGetMeasuredSpansOnTheHostClockWithoutTracingCostWhenOff) {
  const Device cuda = cuda::make_devices({.count = 1}).front();
  // Tracing off: no event is recorded and no span opened for a kernel.
  EXPECT_EQ(cuda.impl().timer_begin(StreamKind::kCompute).native, nullptr);

  RecordingSink sink;
  cuda.attach_tracer(&sink, 0);
  Tensor big = Tensor::empty({64 * 1024 * 1024}, cuda);
  const int64_t host_before_ns = wall_ns_since_origin();
  cuda.set_step(7);
  {
    const KernelScope scope(cuda, "memset", KernelCost{0.0, 256.0 * kMiB});
    big.fill(0.0f);
  }
  cuda.set_step(8);  // the span keeps the step it was launched in
  const int64_t host_after_ns = cuda.synchronize();
  cuda::flush_trace(cuda.impl());  // CUPTI's records may come a little after synchronize()
  ASSERT_EQ(sink.kernels.size(), 1u);
  const RecordingSink::Kernel& k = sink.kernels.front();
  EXPECT_EQ(k.name, "memset");
  EXPECT_EQ(k.stream, StreamKind::kCompute);
  EXPECT_EQ(k.step, 7);
  EXPECT_GT(k.dur_ns, 0);
  // On the host clock, inside the host interval (allowing the offset's measurement error).
  EXPECT_GE(k.ts_ns, host_before_ns - 1'000'000);
  EXPECT_LE(k.ts_ns + k.dur_ns, host_after_ns + 1'000'000);
  EXPECT_EQ(cuda::untimed_kernel_spans(cuda.impl()), 0u);

  // Copies made by to() are traced with measured times.
  const Tensor host = big.to(Device::cpu());
  ASSERT_EQ(sink.copies.size(), 1u);
  EXPECT_EQ(sink.copies[0].src, "cuda:0");
  EXPECT_EQ(sink.copies[0].dst, "cpu");
  EXPECT_EQ(sink.copies[0].bytes, 256 * kMiB);
  EXPECT_GT(sink.copies[0].dur_ns, 0);
  cuda.attach_tracer(nullptr, -1);
}

TEST_P(CudaTimer, TheSynchronousTimerMeasuresTheKernelBetweenItsEnds) {
  const Device cuda = cuda::make_devices({.count = 1}).front();
  RecordingSink sink;
  cuda.attach_tracer(&sink, 0);
  Tensor big = Tensor::empty({64 * 1024 * 1024}, cuda);
  const int64_t host_before_ns = wall_ns_since_origin();
  const Event begin = cuda.impl().timer_begin(StreamKind::kCompute);
  ASSERT_NE(begin.native, nullptr);
  big.fill(0.0f);
  const TimedSpan span = cuda.impl().timer_end(StreamKind::kCompute, begin, KernelCost{});
  EXPECT_GT(span.dur_ns, 0);
  EXPECT_GE(span.start_ns, host_before_ns - 1'000'000);
  EXPECT_LE(span.start_ns + span.dur_ns, wall_ns_since_origin() + 1'000'000);
  EXPECT_TRUE(sink.kernels.empty());  // timer_end only measures; KernelScope emits
  cuda.attach_tracer(nullptr, -1);
}

TEST_P(CudaTimer, DetachingATracerEmitsTheSpansStillQueued) {
  const Device cuda = cuda::make_devices({.count = 1}).front();
  RecordingSink sink;
  cuda.attach_tracer(&sink, 0);
  Tensor t = Tensor::empty({1024}, cuda);
  for (int i = 0; i < 10; ++i) {
    const KernelScope scope(cuda, "zero", KernelCost{});
    t.fill(0.0f);
  }
  cuda.attach_tracer(nullptr, -1);
  ASSERT_EQ(sink.kernels.size(), 10u);
  // One stream: in order, never overlapping (events: within the rounding of float milliseconds).
  for (size_t i = 1; i < sink.kernels.size(); ++i)
    EXPECT_GE(sink.kernels[i].ts_ns + 1000, sink.kernels[i - 1].ts_ns + sink.kernels[i - 1].dur_ns);
  EXPECT_EQ(cuda::untimed_kernel_spans(cuda.impl()), 0u);
}

TEST_P(CudaTimer, ALongRunEmitsItsSpansAsTheGpuGoesWithoutASynchronize) {
  const Device cuda = cuda::make_devices({.count = 1}).front();
  RecordingSink sink;
  cuda.attach_tracer(&sink, 0);
  Tensor t = Tensor::empty({4096}, cuda);
  Tensor u = Tensor::empty({4096}, cuda);
  auto launch = [&](int n) {
    for (int i = 0; i < n; ++i) {
      // Two kernels in one span: the span covers both.
      const KernelScope scope(cuda, "two fills", KernelCost{});
      t.fill(1.0f);
      u.fill(2.0f);
    }
  };
  launch(300);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the GPU finishes them meanwhile
  launch(300);
  {
    std::lock_guard lock(sink.mutex);
    EXPECT_GE(sink.kernels.size(), 256u);  // emitted in batches, before any synchronize()
  }
  cuda.synchronize();
  cuda::flush_trace(cuda.impl());
  ASSERT_EQ(sink.kernels.size(), 600u);
  EXPECT_EQ(cuda::untimed_kernel_spans(cuda.impl()), 0u);
  for (const RecordingSink::Kernel& k : sink.kernels) EXPECT_GT(k.dur_ns, 0);
  cuda.attach_tracer(nullptr, -1);
}

TEST(CudaKernelTimer, SaysWhichTimerTracersUse) {
  cuda::set_kernel_timer(cuda::KernelTimer::kEvents);
  const std::string events = cuda::kernel_timer_description();
  cuda::set_kernel_timer(cuda::KernelTimer::kCupti);
  const std::string cupti = cuda::kernel_timer_description();
  if (!cuda::built()) {
    EXPECT_EQ(events.rfind("none (", 0), 0u) << events;
    return;
  }
  EXPECT_EQ(events, "events (chosen by the program)");
  // CUPTI where libcupti loads, else events with the reason.
  EXPECT_TRUE(cupti == "cupti" || cupti.rfind("events (", 0) == 0) << cupti;
}

}  // namespace
}  // namespace dpscope
