// Training checkpoints: model, optimizer state and loop position in one safetensors file.
//
// <dir>/checkpoint-00000040.safetensors holds tensors "model.<name>" (PyTorch state_dict names) and
// "optim.<param>.<slot>" (momentum_buffer, exp_avg, exp_avg_sq, step), and in __metadata__ the loop
// position (steps done, epoch and batch of the next step), the run configuration and a checksum of
// every tensor's name and bytes. Writing is atomic (temporary file, fsync, rename, directory fsync),
// so a crash leaves either the old or the new checkpoint, never half of one; the newest `keep`
// checkpoints are kept. Loading refuses a truncated or corrupted file with one clear line; resuming
// from a checkpoint continues bit-identically (the data order is a function of seed and epoch).
// In DDP, rank 0 writes and every rank waits at a barrier (DistributedDataParallel lesson 05).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "dpscope/nn/module.hpp"

namespace dpscope {

struct CheckpointState {
  int64_t steps_done = 0;      // optimizer steps completed
  int64_t epoch = 0;           // epoch of the next step
  int64_t batch_in_epoch = 0;  // batch index (within that epoch) of the next step
  std::string config_json;     // TrainConfig::to_json() of the run that wrote it
  StateDict model;             // model.state_dict()
  StateDict optimizer;         // optimizer.state_tensors()
};

// Writes the checkpoint for `state.steps_done` into `dir` (created if needed) and deletes all but
// the newest `keep` checkpoints there. Returns the file written.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const CheckpointState& state,
                                      int keep = 2);

// Reads and verifies a checkpoint (structure, metadata, checksum); tensors land on the cpu.
// Throws Error(kFormat) "checkpoint FILE: <reason>" or Error(kIo).
CheckpointState load_checkpoint(const std::filesystem::path& file);

// The checkpoint with the most steps in `dir`, if any (by file name; not verified).
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

// 64-bit FNV-1a over bytes, chained through `seed`; the checkpoint checksum.
uint64_t fnv1a64(const void* data, size_t size_bytes, uint64_t seed = 0xcbf29ce484222325ULL);

}  // namespace dpscope
