// Training checkpoints as files: model, optimizer state and loop position in one safetensors file.
// This is the file format and its directory (which run owns which file, the newest valid one);
// when a run writes one and what it checks on --resume is the training layer's
// (runtime/src/train/train_common.cpp; in DDP rank 0 writes while every rank waits,
// train/train_rank.hpp).
//
// <dir>/checkpoint-00000040.safetensors holds tensors "model.<name>" (PyTorch state_dict names) and
// "optim.<param>.<slot>" (momentum_buffer, exp_avg, exp_avg_sq, step), and in __metadata__ the run
// id, the loop position (steps done, epoch and batch of the next step), the run configuration and a
// checksum over every metadata entry and every tensor's name, dtype, shape and bytes (so flipping
// one bit of `"epoch":"0"` is caught as surely as one in a weight).
//
// A run owns its checkpoints: each carries the run's id (a resumed run keeps the id of the
// checkpoint it resumed from), and no function below touches another run's. Writing is atomic
// (temporary file, fsync, rename, directory fsync), so a crash leaves either the old or the new
// checkpoint, never half of one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "dpscope/io/safetensors.hpp"

namespace dpscope {

struct CheckpointState {
  std::string run_id;          // the run that wrote it (new_run_id())
  int64_t steps_done = 0;      // optimizer steps completed
  int64_t epoch = 0;           // epoch of the next step
  int64_t batch_in_epoch = 0;  // batch index (within that epoch) of the next step
  std::string config_json;     // TrainConfig::to_json() of the run that wrote it
  NamedTensors model;          // model.state_dict()
  NamedTensors optimizer;      // optimizer.state_tensors()
};

// A fresh run's id: 16 hex digits from std::random_device and the clock.
std::string new_run_id();

// For a fresh (not --resume) run, before its first step: creates `dir` if needed, checks that a file
// can be written there, and refuses (kUsage) a directory that already holds checkpoints, naming the
// newest and its run: "--checkpoint-dir D already holds checkpoints of another run (newest:
// checkpoint-00000030.safetensors, run 1f...); continue that run with --resume or choose another
// directory".
void check_fresh_checkpoint_dir(const std::filesystem::path& dir);

// Writes the checkpoint for `state.steps_done` into `dir` (created if needed), then deletes all but
// the newest `keep` checkpoints of run `state.run_id` (the file just written is always kept) and
// stale temporary files of dead writers. Refuses (kUsage) to write into a directory holding a valid
// checkpoint of another run. Returns the file written.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const CheckpointState& state,
                                      int keep = 2);

// Reads and verifies a checkpoint (structure, metadata, checksum); tensors land on the cpu.
// Throws Error(kFormat) "checkpoint FILE: <reason>" or Error(kIo).
CheckpointState load_checkpoint(const std::filesystem::path& file);

// What --resume starts from: the newest checkpoint in a directory that verifies.
struct ResumeCheckpoint {
  std::filesystem::path file;
  CheckpointState state;
  // Empty when the newest checkpoint was taken; otherwise one line for the user naming the newest
  // (damaged) checkpoint, why, and the one taken instead. Print it as "dpscope: warning: <warning>".
  std::string warning;
};

// The newest checkpoint in `dir` that loads and verifies. Throws kUsage "--resume: no checkpoint in
// D" for none, and the newest one's kFormat error (plus "; no older checkpoint in D is valid") when
// every one is damaged.
ResumeCheckpoint load_newest_valid_checkpoint(const std::filesystem::path& dir);

// Refuses (kUsage) a resume position this run cannot continue from: more steps done than the run
// has (`total_steps`, from --steps or --epochs), or an epoch and batch that do not add up to the
// steps done with `batches_per_epoch` batches per epoch.
void check_resume_position(const CheckpointState& state, const std::filesystem::path& file,
                           int64_t total_steps, int64_t batches_per_epoch);

// The checkpoint with the most steps in `dir`, if any (by file name; not verified).
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

// The value stored in metadata "checksum": "fnv1a64:<16 hex digits>" over every metadata entry but
// "checksum" itself (key and value, length-prefixed) and every tensor's name, dtype, shape and bytes.
std::string checkpoint_checksum(const SafetensorsMetadata& metadata, const NamedTensors& tensors);

// Verifies and decodes a checkpoint's metadata and tensors (what load_checkpoint does once the file
// is read); `source` names it in errors. Throws Error(kFormat).
CheckpointState decode_checkpoint(const SafetensorsMetadata& metadata, NamedTensors tensors,
                                  const std::string& source);

// 64-bit FNV-1a over bytes, chained through `seed`; the checkpoint checksum's hash.
uint64_t fnv1a64(const void* data, size_t size_bytes, uint64_t seed = 0xcbf29ce484222325ULL);

}  // namespace dpscope
