// core/cuda.hpp in a CUDA build: whether GPUs are there, making the logical devices, and the native
// handles and measured-timing entry points the kernels, backends, tensors and KernelScope use.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "../cuda_internal.hpp"
#include "cuda_check.hpp"
#include "cuda_device.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/core/cuda.hpp"

namespace dpscope::cuda {

using detail::check;
using detail::cuda_device;
using detail::CudaDevice;
using detail::DeviceGuard;
using detail::PhysicalGpu;

namespace {

// Room left on each GPU outside the logical budgets: cuBLAS workspaces, NCCL buffers and the
// allocator's size-class rounding come from the same memory.
uint64_t headroom_bytes(uint64_t free_bytes) {
  return std::min<uint64_t>(free_bytes / 16, uint64_t{1} << 30);
}

// The preset of a known product (preset_id_for_gpu), else one described from the driver's
// attributes (the cuda device does not use it for timing; lessons and reports read it).
HardwarePreset preset_for(int physical, const std::string& driver_name) {
  if (const std::string id = preset_id_for_gpu(driver_name); !id.empty()) {
    try {
      return find_preset(id);
    } catch (const Error&) {
      // The asset folder is not installed: describe the GPU from the driver instead.
    }
  }
  const std::string where = fmt::format("GPU {}", physical);
  auto attribute = [&](cudaDeviceAttr attr, const char* what) {
    int value = 0;
    check(cudaDeviceGetAttribute(&value, attr, physical), fmt::format("cudaDeviceGetAttribute({})", what),
          where);
    return static_cast<double>(value);
  };
  const double sms = attribute(cudaDevAttrMultiProcessorCount, "multiprocessors");
  const double clock_khz = attribute(cudaDevAttrClockRate, "clock rate");
  const double mem_clock_khz = attribute(cudaDevAttrMemoryClockRate, "memory clock rate");
  const double bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, "memory bus width");
  HardwarePreset p;
  p.id = "cuda-generic";
  p.name = driver_name;
  // 128 FP32 lanes per SM, 2 flops per FMA; double data rate memory. Rough, and labelled so.
  p.peak_flops = std::max(1e12, sms * 128.0 * 2.0 * clock_khz * 1e3);
  p.mem_bandwidth_bytes_per_s = std::max(1e11, 2.0 * mem_clock_khz * 1e3 * bus_bits / 8.0);
  p.launch_latency_ns = 5000.0;
  p.host_link = LinkSpec{.kind = "pcie4", .bandwidth_bytes_per_s = 25e9, .latency_ns = 10000.0};
  p.peer_link = p.host_link;
  p.topology = "pcie-host";
  p.sources = {"described from the CUDA driver's device attributes (no preset matches this GPU)"};
  return p;
}

std::shared_ptr<PhysicalGpu> open_gpu(int physical) {
  const std::string where = fmt::format("GPU {}", physical);
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, physical), "cudaGetDeviceProperties", where);
  const std::string driver_name = props.name;
  return std::make_shared<PhysicalGpu>(physical, driver_name, preset_for(physical, driver_name));
}

// Lets every pair of the GPUs in use copy directly (NVLink or PCIe peer to peer) where they can;
// cudaMemcpyPeerAsync stages through the host where they cannot.
void enable_peer_access(const std::vector<int>& gpus) {
  for (int a : gpus) {
    const std::string where = fmt::format("GPU {}", a);
    DeviceGuard guard(a, where);
    for (int b : gpus) {
      if (a == b) continue;
      int can = 0;
      check(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer", where);
      if (can == 0) continue;
      const cudaError_t status = cudaDeviceEnablePeerAccess(b, 0);
      // Already enabled (an earlier make_devices), or past the driver's peer limit (copies between
      // that pair are then staged by the driver): both leave the run correct.
      if (status == cudaErrorPeerAccessAlreadyEnabled || status == cudaErrorTooManyPeers) {
        static_cast<void>(cudaGetLastError());
        continue;
      }
      check(status, fmt::format("cudaDeviceEnablePeerAccess(GPU {})", b), where);
    }
  }
}

}  // namespace

bool built() { return true; }

int physical_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return 0;
  }
  return count;
}

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return fmt::format("no CUDA GPU on this machine (cudaGetDeviceCount: {})", cudaGetErrorString(status));
  }
  if (count == 0) return "no CUDA GPU on this machine (cudaGetDeviceCount: 0 devices)";
  return "";
}

std::vector<Device> make_devices(const LogicalGpuOptions& options) {
  detail::check_options(options);
  require_available("--device cuda");
  const int physical_count = physical_device_count();
  std::map<int, std::shared_ptr<PhysicalGpu>> gpus;  // physical index -> GPU, for the GPUs used
  std::map<int, uint64_t> budgets;
  for (int k = options.first; k < options.first + options.count; ++k) {
    const int p = physical_for(k, physical_count);
    if (gpus.count(p) > 0) continue;
    gpus[p] = open_gpu(p);
    DeviceGuard guard(p, fmt::format("GPU {}", p));
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", fmt::format("GPU {}", p));
    const uint64_t usable = free_bytes - headroom_bytes(free_bytes);
    // The logical devices this call makes on GPU p (another process's devices are its own budget).
    int sharing = 0;
    for (int j = options.first; j < options.first + options.count; ++j)
      sharing += physical_for(j, physical_count) == p ? 1 : 0;
    budgets[p] = logical_budget(usable, sharing, options.memory_cap_bytes);
  }
  std::vector<int> used;
  for (const auto& [p, gpu] : gpus) used.push_back(p);
  enable_peer_access(used);
  std::vector<Device> devices;
  for (int k = options.first; k < options.first + options.count; ++k) {
    const int p = physical_for(k, physical_count);
    devices.emplace_back(std::make_shared<CudaDevice>(k, gpus[p], budgets[p]));
  }
  return devices;
}

int physical_index(const DeviceImpl& device) { return cuda_device(device, "physical_index").gpu().index; }

std::string physical_name(const DeviceImpl& device) {
  return cuda_device(device, "physical_name").gpu().driver_name;
}

void make_current(const DeviceImpl& device) {
  const CudaDevice& cuda = cuda_device(device, "make_current");
  check(cudaSetDevice(cuda.gpu().index), "cudaSetDevice", cuda.name());
}

void* stream_handle(const DeviceImpl& device, StreamKind stream) {
  return cuda_device(device, "stream_handle").stream(stream);
}

void empty_cache(const DeviceImpl& device) {
  // The physical GPU's cache: its logical devices share one allocator (cuda_device.hpp).
  cuda_device(device, "empty_cache").gpu().allocator.empty_cache();
}

AllocatorStats allocator_stats(const DeviceImpl& device) {
  const CudaDevice& cuda = cuda_device(device, "allocator_stats");
  const CachingAllocator::Stats s = cuda.gpu().allocator.stats();
  AllocatorStats out{.reserved_bytes = s.reserved_bytes, .allocated_bytes = s.allocated_bytes};
  DeviceGuard guard(cuda.gpu().index, cuda.name());
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", cuda.name());
  out.driver_free_bytes = free_bytes;
  out.driver_total_bytes = total_bytes;
  return out;
}

int64_t event_time_ns(const DeviceImpl& device, const Event& event) {
  return cuda_device(device, "event_time_ns").event_time_ns(event);
}

void defer_kernel_span(DeviceImpl& device, StreamKind stream, std::string_view name, const Event& begin,
                       KernelCost cost) {
  cuda_device(device, "defer_kernel_span").defer_kernel_span(stream, name, begin, cost);
}

void defer_phase_span(DeviceImpl& device, Phase phase, const Event& begin, const Event& end) {
  cuda_device(device, "defer_phase_span").defer_phase_span(phase, begin, end);
}

void flush_trace(DeviceImpl& device) {
  if (auto* cuda = dynamic_cast<CudaDevice*>(&device)) {
    DeviceGuard guard(cuda->gpu().index, cuda->name());
    cuda->flush_trace();
  }
}

uint64_t untimed_kernel_spans(const DeviceImpl& device) {
  return cuda_device(device, "untimed_kernel_spans").untimed_spans();
}

std::optional<TimedSpan> last_copy_span(DeviceImpl& device) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr) return std::nullopt;
  DeviceGuard guard(cuda->gpu().index, cuda->name());
  return cuda->last_copy_span();
}

}  // namespace dpscope::cuda

namespace dpscope::cuda::detail {

CudaDevice& cuda_device(const DeviceImpl& device, std::string_view what) {
  auto* cuda = dynamic_cast<const CudaDevice*>(&device);
  DPS_CHECK(cuda != nullptr, ErrorKind::kDevice, "{}: {} is not a cuda device", what, device.name());
  // The handles hand out a device the caller already holds by non-const reference elsewhere.
  return const_cast<CudaDevice&>(*cuda);
}

}  // namespace dpscope::cuda::detail
