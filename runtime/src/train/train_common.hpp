// Pieces every training mode shares (data, model checks, optimizer, loss, trace header); private
// to runtime/src/train. run_training() (single, dp) and run_ddp_training() (ddp) use them.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dpscope/data/dataset.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/optim/optimizer.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/train/checkpoint.hpp"
#include "dpscope/train/train.hpp"

namespace dpscope::detail {

std::shared_ptr<TensorDataset> load_data(const TrainConfig& c);
// Checks that the data fits the model and the loss; every mismatch is one kUsage line.
void check_data_fits(const TrainConfig& c, const Dataset& data, int64_t in_features, int64_t out_features);
// Loads --init into `model`; a mismatch is one kUsage line naming the file and the model.
void load_initial_weights(const TrainConfig& c, Module& model);
std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& c, std::vector<Parameter*> params);
std::unique_ptr<Loss> make_loss(const TrainConfig& c);
// Opens --trace (nullptr when not tracing) with every device and the model's parameters in the header.
std::unique_ptr<TraceRecorder> open_trace(const TrainConfig& c, const std::vector<Device>& devices,
                                          const Module& model);
// "sim:0..sim:3 (4 x NVIDIA H100 SXM5 80GB)".
std::string describe_devices(const std::vector<Device>& devices);
// The model --model describes, on `device` (with --pitfall unused-parameter: plus an unused layer).
std::unique_ptr<Module> make_model(const TrainConfig& c, const Device& device);

// --resume: the newest checkpoint in --checkpoint-dir, verified and checked against `c`.
CheckpointState load_resume_checkpoint(const TrainConfig& c);
// Writes the checkpoint after step `steps_done`, which was batch `batch_done` of `epoch_done` (an
// epoch has `per_epoch` batches), traces `checkpoint_saved` on `device`; returns the file.
std::string write_checkpoint(const TrainConfig& c, const Device& device, int64_t steps_done,
                             int64_t epoch_done, int64_t batch_done, int64_t per_epoch, const Module& model,
                             StateDict optimizer_state);
// --save: the model's weights with plain nn.Sequential names, so PyTorch loads them directly.
void save_weights(const TrainConfig& c, const Module& model);
// Closes the trace (if any) and fills the result's trace and wall-time fields.
void finish_run(std::unique_ptr<TraceRecorder>& tracer, std::chrono::steady_clock::time_point wall_start,
                TrainResult& result);

// `dpscope train --mode ddp` (train_ddp.cpp); `c` is validated.
TrainResult run_ddp_training(const TrainConfig& c, const StepObserver& on_step);

}  // namespace dpscope::detail
