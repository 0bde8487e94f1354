// The `cuda` process-group backend: the sim backend's schedules (SimBackend, sim_plan.cpp,
// sim_execute.cpp) executed on device buffers through CudaDataPath — chunk copies with
// cudaMemcpyPeerAsync and reductions with the kernel layer's CUDA kernels, all on the receiving
// rank's comm stream, which is synchronized at the end of every step before the step barrier, so
// peers read only finished chunks and every element sees the schedule's order of operations:
// results are bit-identical to `sim` for the same schedule. One rank thread per cuda device,
// logical or physical, and one comm worker thread per rank that runs its collectives
// (comm/async/async_backend.hpp), so a DDP rank's backward overlaps its buckets' all-reduces. Times are
// measured with the comm stream's events (SimBackend::run).
#include <cuda_runtime_api.h>

#include "../async/async_backend.hpp"
#include "cuda_check.hpp"
#include "dpscope/comm/gpu_backends.hpp"
#include "dpscope/kernels/kernels.hpp"
#include "factories.hpp"

namespace dpscope::detail {
namespace {

class CudaDataPath final : public DataPath {
 public:
  bool measured() const override { return true; }

  std::shared_ptr<std::byte> scratch(const Device& device, uint64_t bytes) override {
    if (bytes == 0) return nullptr;
    auto* data = static_cast<std::byte*>(device.impl().allocate(bytes, MemoryCategory::kBuffers, true));
    // Freed after the rank's fence: no work on it is pending by then.
    return std::shared_ptr<std::byte>(data, [device, bytes](std::byte* p) {
      device.impl().deallocate(p, bytes, MemoryCategory::kBuffers);
    });
  }

  // A call queued to the rank's comm worker waits for the compute stream as it was when the rank
  // made the call (not for the backward kernels the rank has issued since); a direct call, for
  // everything issued so far.
  void prepare(const Device& device) override {
    if (const Event* issued = IssuedEventScope::current(device)) {
      device.wait(StreamKind::kComm, *issued);
      return;
    }
    comm_waits_for_compute(device);
  }

  void copy(const Device& dst_device, std::byte* dst, const Device& src_device, const std::byte* src,
            uint64_t bytes) override {
    if (bytes == 0 || dst == src) return;
    cuda::make_current(dst_device.impl());
    // A peer copy between physical GPUs, a device-to-device copy between logical GPUs on one.
    check_cuda(cudaMemcpyPeerAsync(dst, cuda::physical_index(dst_device.impl()), src,
                                   cuda::physical_index(src_device.impl()), bytes, comm_stream(dst_device)),
               "cudaMemcpyPeerAsync", dst_device);
  }

  void reduce(const Device& dst_device, std::byte* dst, const Device& src_device, const std::byte* src,
              int64_t count, ReduceOp op, DType dtype) override {
    if (count == 0) return;
    cuda::make_current(dst_device.impl());
    const cuda::StreamGuard on_comm(StreamKind::kComm);
    const uint64_t bytes = static_cast<uint64_t>(count) * element_size(dtype);
    if (cuda::physical_index(src_device.impl()) == cuda::physical_index(dst_device.impl())) {
      kernels::reduce_into(dst_device, dst, src, count, reduction_of(op), dtype);
      return;
    }
    // Another physical GPU's memory: stage the chunk here first (no peer access is assumed), and
    // finish before the staging buffer goes back to the allocator.
    std::shared_ptr<std::byte> staged = scratch(dst_device, bytes);
    copy(dst_device, staged.get(), src_device, src, bytes);
    kernels::reduce_into(dst_device, dst, staged.get(), count, reduction_of(op), dtype);
    fence(dst_device);
  }

  void divide(const Device& device, std::byte* data, int64_t count, int divisor) override {
    if (count == 0) return;
    cuda::make_current(device.impl());
    const cuda::StreamGuard on_comm(StreamKind::kComm);
    kernels::divide(device, data, count, static_cast<float>(divisor));
  }

  void fence(const Device& device) override {
    cuda::make_current(device.impl());
    check_cuda(cudaStreamSynchronize(comm_stream(device)), "cudaStreamSynchronize (comm stream)", device);
  }
};

}  // namespace

BackendFactory cuda_backend_factory() {
  auto path = std::make_shared<CudaDataPath>();  // stateless: one for every rank of every world
  return [path](const InitOptions& options) -> std::unique_ptr<Backend> {
    cuda::require_available("init_process_group(\"cuda\")");
    DPS_CHECK(options.world != nullptr, ErrorKind::kInvalidArgument,
              "init_process_group(\"cuda\"): options.world is required (make_cuda_world(world_size): the "
              "ranks' cuda devices)");
    DPS_CHECK(options.world->size() == options.world_size, ErrorKind::kInvalidArgument,
              "init_process_group: world_size {} but the world has {} ranks", options.world_size,
              options.world->size());
    SimWorld& world = *options.world;
    DPS_CHECK(world.device(options.rank).kind() == DeviceKind::kCuda, ErrorKind::kInvalidArgument,
              "init_process_group(\"cuda\"): rank {} is on {}, not a cuda device (make the world with "
              "make_cuda_world)",
              options.rank, world.device(options.rank).name());
    world.device(options.rank).set_rank(options.rank);
    // The schedules meet their peers on the host after every step: on the rank's comm worker,
    // so that the rank's thread goes on with backward meanwhile (comm/async/async_backend.hpp).
    return std::make_unique<AsyncBackend>(
        std::make_unique<SimBackend>(options.world, world.state().default_group, options.rank,
                                     options.timeout, "cuda", path),
        std::make_shared<CommWorker>());
  };
}

void add_cuda_backends(const AddBackend& add) {
  add("cuda", cuda_backend_factory());
  add("nccl", nccl_backend_factory());
}

}  // namespace dpscope::detail
