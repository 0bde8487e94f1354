// Times one training step (forward, loss, backward, SGD step) of an MLP on the cpu (or a sim)
// device, with tracing off and on in alternating blocks, and prints one JSON line.
// bench/train_step_vs_torch.py runs it side by side with PyTorch and prints the ratios (docs/benchmarks.md).
//
// Usage: train_step_bench [MODEL=784-512-512-10] [BATCH=128] [STEPS=200] [DEVICE=cpu|sim]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/trace/recorder.hpp"

namespace {

using namespace dpscope;

// Runs `steps` training steps, alternating blocks with tracing off and on (so both see the same
// machine state), and returns the median seconds per step of each: {off, on}.
std::pair<double, double> time_steps(Sequential& model, Optimizer& opt, Loss& loss, const Tensor& x,
                                     const Tensor& y, int steps, const Device& device, TraceRecorder& tracer,
                                     int trace_id) {
  auto one_step = [&] {
    opt.zero_grad();
    const Tensor out = model.forward(x);
    loss.forward(out, y);
    model.backward(loss.backward());
    opt.step();
  };
  for (int i = 0; i < 10; ++i) one_step();
  constexpr int kBlock = 10;
  std::vector<double> off, on;
  for (int done = 0; done < 2 * steps; done += kBlock) {
    const bool traced = (done / kBlock) % 2 == 1;
    device.attach_tracer(traced ? &tracer : nullptr, traced ? trace_id : -1);
    for (int i = 0; i < kBlock; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      one_step();
      (traced ? on : off)
          .push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (traced) tracer.flush();  // as the training loop does once per step
  }
  device.attach_tracer(nullptr, -1);
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  return {median(off), median(on)};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string spec = argc > 1 ? argv[1] : "784-512-512-10";
  const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 128;
  const int steps = argc > 3 ? std::stoi(argv[3]) : 200;
  const std::string device_name = argc > 4 ? argv[4] : "cpu";
  try {
    const Device device = device_name == "sim" ? Device::sim(0, find_preset("h100-sxm")) : Device::new_cpu();
    std::unique_ptr<Sequential> model = Sequential::mlp(spec, device, 0);
    const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(spec);
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    std::vector<float> xs(static_cast<size_t>(batch * sizes.front()));
    for (float& v : xs) v = normal(gen);
    std::vector<int64_t> ys(static_cast<size_t>(batch));
    for (int64_t& v : ys) v = static_cast<int64_t>(gen() % static_cast<uint32_t>(sizes.back()));
    const Tensor x = Tensor::from_floats(xs, {batch, sizes.front()}, device);
    const Tensor y = Tensor::from_ints(ys, {batch}, device);
    SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
    CrossEntropyLoss loss;

    const auto trace_path = std::filesystem::temp_directory_path() / "dpscope_train_step_bench.jsonl";
    TraceHeader header;
    header.clock = device.is_simulated() ? "simulated" : "measured";
    add_trace_device(header, device);
    const Device devices[] = {device};
    std::pair<double, double> times;
    {
      auto tracer = TraceRecorder::open(trace_path, header, devices);
      const int trace_id = device.trace_id();
      times = time_steps(*model, opt, loss, x, y, steps, device, *tracer, trace_id);
      tracer->close();
    }
    const double off = times.first, on = times.second;
    std::filesystem::remove(trace_path);
    std::printf(
        "{\"impl\":\"dpscope\",\"model\":\"%s\",\"batch\":%lld,\"device\":\"%s\",\"ms_per_step\":%.4f,"
        "\"ms_per_step_traced\":%.4f}\n",
        spec.c_str(), static_cast<long long>(batch), device_name.c_str(), off * 1e3, on * 1e3);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
