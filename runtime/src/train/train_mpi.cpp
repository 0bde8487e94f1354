// run_mpi_training(): `mpirun -np N dpscope train --mode ddp --device cpu --backend mpi ...` — this
// process is one rank of N (torchrun's one process per rank, with mpirun as the launcher). It reads
// its rank from the launcher's environment, joins the `mpi` process group and runs train_rank()
// like a rank thread does; every rank loads the data itself. After each step the ranks average their
// local losses (a one-float all-reduce), so rank 0 reports the same loss a simulated DDP run
// reports; rank 0 also writes --save and the checkpoints.
#include <chrono>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/train/train_rank.hpp"
#include "train_common.hpp"

namespace dpscope::detail {

TrainResult run_mpi_training(const TrainConfig& config, const StepObserver& on_step) {
  const auto wall_start = std::chrono::steady_clock::now();
  const mpi::Launch launch = mpi::require_mpirun_launch(config.devices, "train");
  std::shared_ptr<ProcessGroup> group =
      init_process_group({.backend = "mpi", .rank = launch.rank, .world_size = launch.size});

  TrainResult result;
  result.process_rank = group->rank();
  RankOptions options;
  options.data = load_data(config);
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(config.model);
  check_data_fits(config, *options.data, sizes.front(), sizes.back());
  result.samples = options.data->size();
  options.on_step = [&](const StepReport& report) {
    Tensor loss = Tensor::from_floats(std::vector<float>{static_cast<float>(report.loss)}, {1},
                                      group->device(), MemoryCategory::kBuffers);
    group->all_reduce(loss, {.op = ReduceOp::kAvg})->wait();  // every rank, every step: the same order
    StepReport whole = report;
    whole.loss = loss.item();
    whole.rank = -1;
    result.losses.push_back(whole.loss);
    if (on_step && group->rank() == 0) on_step(whole);
  };
  const RankResult mine = train_rank(*group, config, options);
  result.steps = mine.steps;
  result.parameter_count = mine.parameter_count;
  result.samples_per_step = mine.samples_per_step;
  result.last_checkpoint = mine.last_checkpoint;
  result.device_name =
      fmt::format("{} processes on the CPU (rank {} of {}, mpi)", launch.size, group->rank(), launch.size);
  std::unique_ptr<TraceRecorder> no_trace;
  finish_run(no_trace, wall_start, result);
  return result;
}

}  // namespace dpscope::detail
