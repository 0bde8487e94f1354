// The memory a training run will need, estimated from its configuration before anything is
// allocated, and the check that refuses a run the devices or this machine cannot hold ("--model
// 2-2147483648-3 needs about 144.00 GiB on sim:0 (NVIDIA H100 SXM5 80GB) (parameters 48.00 GiB,
// ...), which holds 80.00 GiB" instead of a run that grows silently). It counts what the run holds at
// its peak, not the kernels' scratch space, so it errs low: the devices' own accounting (an OOM
// worded like CUDA's) still catches the rest. docs/parallel.md ("Memory") explains it with an
// example. Used by load_data (every mode with data) and --timing-only.
#pragma once

#include <cstdint>
#include <string>

#include "dpscope/train/train.hpp"

namespace dpscope {

struct MemoryEstimate {
  // On the most loaded device (dp: device 0, which also holds the optimizer state).
  uint64_t parameters_bytes = 0;  // 4 bytes per parameter
  uint64_t gradients_bytes = 0;   // the same again
  // SGD with momentum 4 bytes per parameter, Adam/AdamW 8 (two moments); with --zero a rank holds
  // 1/N of it (ZeroRedundancyOptimizer).
  uint64_t optimizer_bytes = 0;
  uint64_t buffers_bytes = 0;  // ddp: the gradient buckets, 4 bytes per parameter
  // The rows a device holds (single: the batch; dp: its chunk, and on device 0 the gathered output;
  // ddp: the rank's batch) times the input, each Linear's and ReLU's output and the loss's, in
  // float32, plus the targets.
  uint64_t activations_bytes = 0;
  uint64_t device_bytes = 0;  // the sum of the above
  // Host memory the run's tensors take: --device cpu the device's; --device sim every simulated
  // GPU's (their tensors live in host memory); 0 for cuda devices and --timing-only (no data).
  uint64_t host_bytes = 0;
};

// The estimate for `config` (validated) training on a data set of `rows` samples (ignored with
// --timing-only, which has no data). Throws Error(kUsage) when a count overflows 64 bits.
MemoryEstimate estimate_training_memory(const TrainConfig& config, int64_t rows);

// Refuses (Error kUsage), before the model is built, a run whose estimate exceeds the simulated
// device's capacity (the preset's memory, --device sim) or this machine's memory (--device cpu,
// and --device sim, whose tensors are host memory), naming the device, both sizes and the parts.
void check_training_memory(const TrainConfig& config, int64_t rows);

}  // namespace dpscope
