// The GPU process-group backends: `cuda` (our own schedules on device buffers, any number of
// logical GPUs) and `nccl` (NCCL, one rank per physical GPU). Both are registered by name in a
// build with CUDA (comm/backend_registry.hpp) and both run rank threads of one process over a
// SimWorld made of cuda devices, which their ranks share as the sim backend's ranks do (nccl also
// runs one process per rank, each over a world of its own device):
//
//   auto world = make_cuda_world(4);                    // cuda:0 .. cuda:3 (logical GPUs)
//   spawn_ranks({.backend = "cuda", .world_size = 4, .world = world}, fn);
//
// Without a GPU (or without CUDA in the build) init fails with one line saying why; nccl refuses
// more ranks than physical GPUs at once (nccl_world_size_problem). The pure functions below are
// what the backends decide without a GPU, so they are tested on any machine.
//
// Thread semantics: every function here is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/types.hpp"
#include "dpscope/core/tensor.hpp"

namespace dpscope {

// A world of `world_size` rank threads on logical GPUs cuda:F .. cuda:F+N-1 (F = first_device;
// cuda::make_devices: logical GPU k on physical GPU k mod count), for the `cuda` and `nccl`
// backends. The world's network model (options.preset/hardware) only picks the schedules of kAuto
// and ring orders, as on sim; times are measured. A process that is one rank of an nccl group
// (`dpscope launch`) makes make_cuda_world(1, {...}, cap, LOCAL_RANK): its own GPU alone.
// Throws kDevice "make_cuda_world: <why>" without a usable GPU.
std::shared_ptr<SimWorld> make_cuda_world(int world_size, SimWorldOptions options = {},
                                          uint64_t memory_cap_bytes = 0, int first_device = 0);

// Why nccl cannot run `world_size` ranks on a machine with `gpu_count` physical GPUs, or "" when
// it can: "nccl: 2 ranks need 2 GPUs, this machine has 1 (NCCL refuses two ranks on one GPU);
// use --backend cuda to run logical GPUs on one" (and a no-GPU line for gpu_count 0).
std::string nccl_world_size_problem(int world_size, int gpu_count);

// The NCCL names a ReduceOp and a DType map to ("ncclSum", "ncclAvg", ...; "ncclFloat32",
// "ncclInt64"): the nccl backend maps with the same table.
const char* nccl_reduce_op_name(ReduceOp op);
const char* nccl_dtype_name(DType dtype);

}  // namespace dpscope
