// run_mpi_training(): `mpirun -np N dpscope train --mode ddp --device cpu --backend mpi ...` — this
// process is one rank of N (torchrun's one process per rank, with mpirun as the launcher). It reads
// its rank from the launcher's environment, joins the `mpi` process group and runs train_rank()
// like a rank thread does; every rank loads the data itself. After each step the ranks average their
// local losses (a one-float all-reduce), so rank 0 reports the same loss a simulated DDP run
// reports; rank 0 also writes --save and the checkpoints.
//
// --trace DIR: each rank writes DIR/rank-K.jsonl on its own clock. Before training, rank 0 meets
// every other rank for a few ping-pongs (send/recv of its clock, NTP's estimate: the offset from
// the round trip with the least delay, half that round trip its uncertainty); each rank's header
// records them in the run object's "process" entry, and `dpscope trace merge DIR OUT` puts the
// ranks on rank 0's clock.
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <limits>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/train/train_rank.hpp"
#include "train_common.hpp"

namespace dpscope::detail {
namespace {

struct ClockOffset {
  int64_t offset_ns = 0;       // add to this rank's trace times to get rank 0's
  int64_t uncertainty_ns = 0;  // half the best round trip
};

// This rank's clock against rank 0's (see the file comment); every rank of the group calls it.
ClockOffset measure_clock_offset(ProcessGroup& group) {
  constexpr int kRounds = 8;
  const Device& dev = group.device();
  auto clock_tensor = [&](int64_t value) {
    return Tensor::from_ints(std::vector<int64_t>{value}, {1}, dev, MemoryCategory::kBuffers);
  };
  ClockOffset best{0, std::numeric_limits<int64_t>::max()};
  for (int peer = 1; peer < group.size(); ++peer) {
    if (group.rank() != 0 && group.rank() != peer) continue;
    for (int round = 0; round < kRounds; ++round) {
      if (group.rank() == peer) {
        const int64_t sent = dev.clock_ns(StreamKind::kCompute);
        Tensor ping = clock_tensor(sent);
        group.send(ping, 0)->wait();
        Tensor pong = clock_tensor(0);
        group.recv(pong, 0)->wait();
        const int64_t back = dev.clock_ns(StreamKind::kCompute);
        const int64_t half_trip = (back - sent) / 2;
        if (half_trip < best.uncertainty_ns) best = {pong.to_ints()[0] - (sent + half_trip), half_trip};
      } else {
        Tensor ping = clock_tensor(0);
        group.recv(ping, peer)->wait();
        Tensor pong = clock_tensor(dev.clock_ns(StreamKind::kCompute));
        group.send(pong, peer)->wait();
      }
    }
  }
  return group.rank() == 0 ? ClockOffset{} : best;
}

// The run object of rank K's trace: the configuration plus where the rank stands and its clock.
std::string rank_run_json(const TrainConfig& config, int rank, int world_size, ClockOffset clock) {
  nlohmann::ordered_json run = nlohmann::ordered_json::parse(config.to_json());
  run["process"] = {{"rank", rank},
                    {"world_size", world_size},
                    {"clock_offset_ns", clock.offset_ns},
                    {"clock_uncertainty_ns", clock.uncertainty_ns}};
  return run.dump();
}

}  // namespace

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
  std::unique_ptr<TraceRecorder> tracer;
  if (!config.trace.empty()) {
    const ClockOffset clock = measure_clock_offset(*group);
    std::filesystem::create_directories(config.trace);
    const std::unique_ptr<Module> shape_model = make_model(config, Device::cpu());
    tracer = open_trace_at(std::filesystem::path(config.trace) / fmt::format("rank-{}.jsonl", group->rank()),
                           rank_run_json(config, group->rank(), group->size(), clock), {group->device()},
                           *shape_model);
  }
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
  finish_run(tracer, wall_start, result);
  return result;
}

}  // namespace dpscope::detail
