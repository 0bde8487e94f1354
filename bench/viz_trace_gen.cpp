// viz_trace_gen: writes the big DDP trace of the viewer benchmark (docs/benchmarks.md,
// "Visualizer"; `dpscope-viz TRACE --bench-frames N`) with the runtime itself in timing-only mode.
//
// D simulated GPUs (the sim ProcessGroup on rank threads, as `dpscope train --mode ddp`) train an
// MLP of meta tensors (Sequential::mlp_timing_only: shapes, memory accounting and the timing model,
// no data) under DistributedDataParallel for as many steps as it takes to write --events events.
// Each step traces what train_rank() traces — the DistributedSampler's rows, the batch's H2D copy,
// forward, backward with bucketed ring all-reduces, the optimizer, memory — except the events
// that need numbers (gradient values, loss). The step count comes from two short probe runs
// (2 and 3 steps; every step after the bucket rebuild writes the same number of events).
//
//   build/ci/bin/viz_trace_gen --devices 8 --layers 8 --width 256 --events 1000000 --out ddp8-1m.jsonl
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/data/distributed_sampler.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"
#include "dpscope/trace/recorder.hpp"

namespace {

using namespace dpscope;

struct GenOptions {
  int devices = 8;
  int layers = 8;       // Linear layers of `width` x `width`, ReLU between
  int64_t width = 256;  // features
  int64_t batch = 64;   // per rank
  double bucket_mb = 25.0;
  std::string preset = "h100-sxm";
  uint64_t events = 1'000'000;  // at least this many events
  std::filesystem::path out;
};

std::string model_spec(const GenOptions& o) {
  std::string spec = std::to_string(o.width);
  for (int l = 0; l < o.layers; ++l) spec += "-" + std::to_string(o.width);
  return spec;
}

// Runs `steps` timing-only DDP steps traced to `path`; returns the number of events (header not counted).
uint64_t write_trace(const GenOptions& o, int64_t steps, const std::filesystem::path& path) {
  const std::string spec = model_spec(o);
  const std::shared_ptr<SimWorld> world = SimWorld::create(o.devices, {.preset = o.preset});
  const std::vector<Device>& devices = world->devices();
  TraceHeader header;
  header.run_json = fmt::format(
      R"({{"mode":"ddp","device":"sim","backend":"sim","devices":{},"preset":"{}","model":"{}","batch":{},)"
      R"("steps":{},"bucket_mb":{},"timing_only":true,"command":"viz_trace_gen"}})",
      o.devices, o.preset, spec, o.batch, steps, o.bucket_mb);
  std::vector<int> ids;
  for (const Device& d : devices) ids.push_back(add_trace_device(header, d));
  add_network_links(header, *devices.front().hardware(), ids);
  const std::unique_ptr<Sequential> shape_model = Sequential::mlp_timing_only(spec, Device::cpu());
  for (const Parameter* p : shape_model->parameters())
    header.params.push_back(
        {.index = p->index, .name = p->name, .shape = p->data.shape(), .bytes = p->data.nbytes()});
  auto recorder = TraceRecorder::open(path, header, devices);

  // The rows the sampler hands out are real (one epoch of exactly `steps` batches per rank).
  const int64_t dataset_len = o.batch * o.devices * steps;
  spawn(world, [&](ProcessGroup& pg) {
    const Device& dev = pg.device();
    auto model = Sequential::mlp_timing_only(spec, dev);
    DistributedDataParallel ddp(*model, pg, {.bucket_cap_mb = o.bucket_mb, .algorithm = Algorithm::kRing});
    SGD optimizer(model->parameters(), {.lr = 0.01});
    CrossEntropyLoss loss;
    const DistributedSampler sampler(dataset_len,
                                     {.num_replicas = o.devices, .rank = pg.rank(), .shuffle = false});
    const std::vector<int64_t> rows = sampler.indices();
    for (int64_t step = 0; step < steps; ++step) {
      dev.set_step(step);
      Tensor x, y;
      {
        PhaseScope phase(dev, Phase::kData);
        const std::vector<int64_t> batch(rows.begin() + step * o.batch, rows.begin() + (step + 1) * o.batch);
        dev.tracer()->samples(dev, dev.clock_ns(StreamKind::kCompute), batch, std::nullopt);
        x = Tensor::meta({o.batch, o.width}, Device::cpu()).to(dev, MemoryCategory::kActivations);
        y = Tensor::meta({o.batch}, dev, MemoryCategory::kActivations, DType::kI64);
      }
      {
        PhaseScope phase(dev, Phase::kForward);
        loss.forward(ddp.forward(x), y);
        dev.trace_memory();
      }
      {
        PhaseScope phase(dev, Phase::kBackward);
        ddp.backward(loss.backward());
        dev.trace_memory();
      }
      {
        PhaseScope phase(dev, Phase::kOptimizer);
        optimizer.step();
        optimizer.zero_grad();
        dev.trace_memory();
      }
    }
    dev.set_step(-1);
  });
  recorder->close();
  return recorder->events_written() - 1;  // the recorder counts the header line too
}

}  // namespace

int main(int argc, char** argv) {
  GenOptions o;
  CLI::App app{"viz_trace_gen: a big timing-only DDP trace from the runtime, for dpscope-viz --bench-frames"};
  app.add_option("--devices", o.devices, "simulated GPUs (ranks)")->check(CLI::Range(1, 64));
  app.add_option("--layers", o.layers, "Linear layers of the MLP")->check(CLI::Range(1, 1000));
  app.add_option("--width", o.width, "features of every layer")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  app.add_option("--batch", o.batch, "rows per rank and step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--bucket-mb", o.bucket_mb, "DDP bucket_cap_mb")->check(CLI::PositiveNumber);
  app.add_option("--preset", o.preset, "hardware preset");
  app.add_option("--events", o.events, "write at least this many events")
      ->check(CLI::Range(1, 1'000'000'000));
  app.add_option("--out", o.out, "the trace to write (JSON Lines; a name ending in .zst: zstd-compressed)")
      ->required();
  CLI11_PARSE(app, argc, argv);
  try {
    const std::filesystem::path probe = o.out.string() + ".probe";
    const uint64_t two = write_trace(o, 2, probe);
    const uint64_t three = write_trace(o, 3, probe);
    std::filesystem::remove(probe);
    const uint64_t per_step = three - two;
    const uint64_t fixed = two - 2 * per_step;  // setup, step 0's extras, the end
    const int64_t steps =
        o.events <= fixed + per_step ? 1 : static_cast<int64_t>((o.events - fixed + per_step - 1) / per_step);
    const uint64_t written = write_trace(o, steps, o.out);
    fmt::print("{}: {} events, {} steps of {} events, {} ranks, model {}\n", o.out.string(), written, steps,
               per_step, o.devices, model_spec(o));
  } catch (const std::exception& e) {
    fmt::print(stderr, "viz_trace_gen: {}\n", e.what());
    return 1;
  }
  return 0;
}
