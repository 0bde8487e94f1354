// The three choices that shape a training run, as types: the mode (--mode), the kind of device
// (--device, core's DeviceKind) and the process-group backend (--backend).
//
// The CLI parses each flag once with parse_*(), which throws the usage error `dpscope train` has
// always printed; everything after (validation, world.cpp, the loops, the summary) compares enums.
// name() gives back the flag's spelling: the word written in traces ("run" header), checkpoints,
// summaries and messages, so those stay byte-identical to the strings they used to be.
#pragma once

#include <cstdint>
#include <string>

#include "dpscope/core/device_impl.hpp"

namespace dpscope {

// How the model is spread over the devices (README's "Train on simulated GPUs").
enum class TrainMode : uint8_t {
  kSingle,        // "single": one device
  kDataParallel,  // "dp": one process scatters each mini-batch over its GPUs (nn.DataParallel)
  kDdp,           // "ddp": one rank per GPU, gradients all-reduced (DistributedDataParallel)
};

// The process group the ranks of --mode ddp communicate through (comm/backend_registry.hpp holds
// the backends built under the same names). Unused by single and dp.
enum class PgBackend : uint8_t {
  kSim,   // "sim": rank threads on the simulated machine
  kCuda,  // "cuda": our collective schedules on device buffers
  kNccl,  // "nccl": NCCL, one rank per physical GPU
  kMpi,   // "mpi": this process is one rank of `mpirun -np N`, on the CPU
};

// Throw Error(kUsage) "--mode 'x' is not one of single, dp, ddp" (and likewise for --device and
// --backend) for any other word.
TrainMode parse_train_mode(const std::string& text);
DeviceKind parse_device_kind(const std::string& text);
PgBackend parse_pg_backend(const std::string& text);

// The flag's spelling: "single" | "dp" | "ddp", "cpu" | "sim" | "cuda", "sim" | "cuda" | "nccl" | "mpi".
std::string name(TrainMode mode);
std::string name(DeviceKind device);
std::string name(PgBackend backend);

}  // namespace dpscope
