// DDP vs DataParallel, and DDP's bucket-size trade-off, in SIMULATED time on 4 H100s.
//
// A timing-only MLP (shapes, memory accounting and the timing model; no data) of ~235M parameters
// trains a few steps; the step time after the bucket rebuild is rank 0's simulated compute-clock
// delta for one step. Printed as two tables; docs/benchmarks.md has the results and the command:
//   build/release/bin/ddp_sim_study [LAYERS=24] [WIDTH=2048] [BATCH_PER_RANK=512]
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "dpscope/comm/spawn.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/data_parallel.hpp"
#include "dpscope/parallel/distributed_data_parallel.hpp"

namespace {

using namespace dpscope;

constexpr int kGpus = 4;
constexpr int kSteps = 3;  // step 0 runs with one bucket; steps 1.. use the rebuilt buckets

struct DdpResult {
  int64_t step_ns = 0;
  int64_t backward_compute_ns = 0;  // first gradient hook → last gradient hook
  int64_t comm_ns = 0;              // sum of the bucket all-reduces
  int64_t exposed_ns = 0;           // last all-reduce end − last gradient ready
  size_t buckets = 0;
};

DdpResult run_ddp(const std::string& spec, int64_t batch, double bucket_mb) {
  DdpResult out;
  spawn(kGpus,
        [&](ProcessGroup& pg) {
          const Device& dev = pg.device();
          auto model = Sequential::mlp_timing_only(spec, dev);
          DistributedDataParallel ddp(*model, pg, {.bucket_cap_mb = bucket_mb});
          SGD opt(model->parameters(), {.lr = 0.01});
          CrossEntropyLoss loss;
          int64_t first_ready = -1, last_ready = 0;
          model->register_grad_ready_hook([&](Parameter&) {
            const int64_t now = dev.clock_ns(StreamKind::kCompute);
            if (first_ready < 0) first_ready = now;
            last_ready = now;
          });
          const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(spec);
          for (int s = 0; s < kSteps; ++s) {
            first_ready = -1;
            const int64_t t0 = dev.synchronize();
            const Tensor x = Tensor::meta({batch, sizes.front()}, dev);
            const Tensor y = Tensor::meta({batch}, dev, MemoryCategory::kActivations, DType::kI64);
            opt.zero_grad();
            loss.forward(ddp.forward(x), y);
            ddp.backward(loss.backward());
            opt.step();
            const int64_t t1 = dev.synchronize();
            if (pg.rank() == 0 && s == kSteps - 1) {
              out.step_ns = t1 - t0;
              out.backward_compute_ns = last_ready - first_ready;
              out.buckets = ddp.buckets().size();
              out.comm_ns = 0;
              for (const DdpBucket& b : ddp.buckets()) out.comm_ns += b.work->end_ns() - b.work->start_ns();
              out.exposed_ns = ddp.buckets().back().work->end_ns() - last_ready;
            }
          }
        },
        {.preset = "h100-sxm"});
  return out;
}

int64_t run_dp(const std::string& spec, int64_t global_batch) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  std::vector<Device> gpus;
  for (int i = 0; i < kGpus; ++i) gpus.push_back(Device::sim(i, h100));
  DataParallel dp(Sequential::mlp_timing_only(spec, gpus[0]), gpus);
  SGD opt(dp.parameters(), {.lr = 0.01});
  CrossEntropyLoss loss;
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(spec);
  int64_t step_ns = 0;
  auto sync_all = [&] {
    int64_t t = 0;
    for (const Device& d : gpus) t = std::max(t, d.synchronize());
    for (const Device& d : gpus)
      for (int s = 0; s < kStreamCount; ++s) d.wait_until(static_cast<StreamKind>(s), t);
    return t;
  };
  for (int s = 0; s < kSteps; ++s) {
    const int64_t t0 = sync_all();
    const Tensor x = Tensor::meta({global_batch, sizes.front()}, gpus[0]);
    const Tensor y = Tensor::meta({global_batch}, gpus[0], MemoryCategory::kActivations, DType::kI64);
    opt.zero_grad();
    loss.forward(dp.forward(x), y);
    dp.backward(loss.backward());
    opt.step();
    step_ns = sync_all() - t0;
  }
  return step_ns;
}

std::string ms(int64_t ns) { return fmt::format("{:.3f}", ns / 1e6); }

}  // namespace

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::stoi(argv[1]) : 24;
  const int64_t width = argc > 2 ? std::stoll(argv[2]) : 2048;
  const int64_t batch = argc > 3 ? std::stoll(argv[3]) : 512;
  const std::vector<int64_t> dims(static_cast<size_t>(layers + 1), width);
  const std::string spec = fmt::format("{}", fmt::join(dims, "-"));
  try {
    const auto params = Sequential::mlp_timing_only(spec, Device::cpu())->parameter_numel();
    fmt::print(
        "model: MLP of {} Linear({}, {}) layers ({:.1f} M parameters, {:.0f} MiB of fp32 gradients), {} x "
        "H100 SXM (simulated)\n\n",
        layers, width, width, params / 1e6, params * 4.0 / 1048576, kGpus);

    const DdpResult ddp = run_ddp(spec, batch, 25.0);
    const int64_t dp = run_dp(spec, batch * kGpus);
    fmt::print("| mode | global batch | simulated step (ms) | vs DDP |\n|---|---|---|---|\n");
    fmt::print("| DataParallel (scatter, replicate, gather, reduce-add) | {} | {} | {:.2f}x |\n",
               batch * kGpus, ms(dp), static_cast<double>(dp) / ddp.step_ns);
    fmt::print("| DistributedDataParallel (25 MiB buckets) | {} ({} per rank) | {} | 1.00x |\n\n",
               batch * kGpus, batch, ms(ddp.step_ns));

    fmt::print(
        "| bucket_cap_mb | buckets | step (ms) | backward compute (ms) | all-reduce total (ms) | exposed "
        "comm (ms) |\n");
    fmt::print("|---|---|---|---|---|---|\n");
    for (double mb : {0.001, 0.01, 0.1, 1.0, 5.0, 25.0, 100.0, 10000.0}) {
      const DdpResult r = run_ddp(spec, batch, mb);
      fmt::print("| {} | {} | {} | {} | {} | {} |\n", mb, r.buckets, ms(r.step_ns), ms(r.backward_compute_ns),
                 ms(r.comm_ns), ms(r.exposed_ns));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "ddp_sim_study: {}\n", e.what());
    return 2;
  }
  return 0;
}
