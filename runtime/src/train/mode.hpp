// A training mode as one descriptor: its --mode word, the flag rules it adds, how its world is made
// and how it runs. Each mode's own file defines its TrainModeSpec (single and dp: train.cpp; ddp:
// train_ddp.cpp); the generic code (parse_train_mode and name, TrainConfig::validate,
// check_machine, make_world, run_training, the memory estimate and the CLI's summary) looks the
// mode up here and never switches on it.
// Private to runtime/src/train; docs/architecture.md, "Adding a training mode", has the recipe.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "dpscope/train/train.hpp"
#include "train_common.hpp"

namespace dpscope::detail {

struct TrainModeSpec {
  TrainMode mode;         // its value: the spec sits at that index of kTrainModes
  std::string_view word;  // --mode's word, as traces, checkpoints and messages spell it
  // Whether the mode runs ranks that communicate: it takes --backend and DDP's flags (--bucket-mb,
  // --first-bucket-mb, --no-sync-every, --find-unused-parameters, --zero, --comm-hook, --algo),
  // the run object (TrainConfig::to_json) records them, and its loss is the mean over ranks.
  bool ranks = false;
  // The pitfalls it can show (the CLI's words); any other is refused naming the mode that has it.
  std::span<const std::string_view> pitfalls;
  // Its rules in TrainConfig::validate(), values only: which --device, --devices, --backend and
  // --timing-only it takes. Runs after --devices >= 1, before the model, data and loop flags.
  void (*check_flags)(const TrainConfig& config) = nullptr;
  // Its part of check_machine(), after the GPU probe: what its launcher must provide (RANK,
  // WORLD_SIZE). Returns true when it has judged the launcher's variables; false leaves
  // check_machine to refuse a launcher that started several copies of a one-process run.
  bool (*check_launcher)(const TrainConfig& config) = nullptr;
  // The devices (and rank world) of a validated `config` on a machine check_machine() accepted.
  World (*make_world)(const TrainConfig& config) = nullptr;
  // The whole run of a validated, checked `config` (run_training's last step).
  TrainResult (*run)(const TrainConfig& config, const StepObserver& on_step) = nullptr;
  // What a device holds besides the model, its gradients and the optimizer state, for the memory
  // estimate (memory_estimate.cpp).
  struct MemoryShape {
    // --batch is each rank's own, bounded by its DistributedSampler shard (ddp); otherwise the
    // whole mini-batch, split over the devices.
    bool batch_per_rank = false;
    // Device 0 gathers every replica's output and its gradient; every other device holds a replica,
    // its gradients and its chunk (dp).
    bool replicas = false;
    bool gradient_buckets = false;  // a copy of the gradients, 4 bytes a parameter (ddp)
  } memory;
  // The summary's line of the batch (`dpscope train`): "batch 64 (the whole mini-batch), 2000
  // samples, 10 steps".
  std::string (*describe_batch)(const TrainConfig& config, const TrainResult& result) = nullptr;

  bool takes_pitfall(std::string_view pitfall) const {
    for (std::string_view p : pitfalls)
      if (p == pitfall) return true;
    return false;
  }
};

extern const TrainModeSpec kSingleMode;        // train.cpp
extern const TrainModeSpec kDataParallelMode;  // train.cpp
extern const TrainModeSpec kDdpMode;           // train_ddp.cpp

// Every mode, at the index of its TrainMode value. The list is what links a mode's file into the
// program: train/ is a static library, whose linker drops an object file nothing refers to, so a
// mode cannot register itself from its own file alone.
inline constexpr const TrainModeSpec* kTrainModes[] = {&kSingleMode, &kDataParallelMode, &kDdpMode};

// The spec of `mode`; an assert names a value missing from kTrainModes.
const TrainModeSpec& mode_spec(TrainMode mode);

// Rules more than one mode's check_flags applies (train_config.cpp), so each message is written once:
// --backend mpi unless `ranks_on_cpu` (its ranks are processes on the CPU, under mpirun);
void check_mpi_backend(const TrainConfig& config, bool ranks_on_cpu);
// --timing-only (unless `timing_only_allowed`, and its own limits) and --devices' upper bound.
void check_scale(const TrainConfig& config, bool timing_only_allowed);
// A launcher's WORLD_SIZE against --devices (check_machine's part for ranks that are processes).
void check_launcher_world_size(const TrainConfig& config, int world_size);

}  // namespace dpscope::detail
