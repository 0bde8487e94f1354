// What the GPU backends decide without a GPU: the cuda world, the nccl rank-count check and the
// NCCL names of reduce ops and dtypes (comm/gpu_backends.hpp). Compiled in every build.
#include "dpscope/comm/gpu_backends.hpp"

#include "dpscope/base/error.hpp"
#include "dpscope/core/cuda.hpp"

namespace dpscope {

std::shared_ptr<SimWorld> make_cuda_world(int world_size, SimWorldOptions options, uint64_t memory_cap_bytes,
                                          int first_device) {
  DPS_CHECK(world_size >= 1, ErrorKind::kInvalidArgument,
            "make_cuda_world: world size must be at least 1, got {}", world_size);
  cuda::require_available("make_cuda_world");
  options.devices =
      cuda::make_devices({.count = world_size, .memory_cap_bytes = memory_cap_bytes, .first = first_device});
  return SimWorld::create(world_size, std::move(options));
}

std::string nccl_world_size_problem(int world_size, int gpu_count) {
  if (gpu_count <= 0)
    return fmt::format("nccl: {} rank{} need{} a CUDA GPU, this machine has none", world_size,
                       world_size == 1 ? "" : "s", world_size == 1 ? "s" : "");
  if (world_size <= gpu_count) return "";
  return fmt::format(
      "nccl: {} ranks need {} GPUs, this machine has {} (NCCL refuses two ranks on one GPU); use --backend "
      "cuda "
      "to run logical GPUs on one",
      world_size, world_size, gpu_count);
}

const char* nccl_reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "ncclSum";
    case ReduceOp::kAvg: return "ncclAvg";
    case ReduceOp::kProduct: return "ncclProd";
    case ReduceOp::kMin: return "ncclMin";
    case ReduceOp::kMax: return "ncclMax";
  }
  return "ncclSum";
}

const char* nccl_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "ncclFloat32";
    case DType::kI64: return "ncclInt64";
    case DType::kF16: return "ncclFloat16";
    case DType::kBF16: return "ncclBfloat16";
    case DType::kF64: return "ncclFloat64";
    case DType::kI8: return "ncclInt8";
    case DType::kU8: return "ncclUint8";
    case DType::kI32: return "ncclInt32";
    case DType::kU32: return "ncclUint32";
    case DType::kU64: return "ncclUint64";
  }
  return "ncclFloat32";
}

}  // namespace dpscope
