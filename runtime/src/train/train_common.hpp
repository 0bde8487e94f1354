// Pieces every training mode shares (data, model checks, optimizer, loss, trace header); private
// to runtime/src/train. run_training() (single, dp) and run_ddp_training() (ddp) use them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpscope/data/dataset.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/optim/optimizer.hpp"
#include "dpscope/trace/recorder.hpp"
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

// `dpscope train --mode ddp` (train_ddp.cpp); `c` is validated.
TrainResult run_ddp_training(const TrainConfig& c, const StepObserver& on_step);

}  // namespace dpscope::detail
