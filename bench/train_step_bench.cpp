// Times one training step (forward, loss, backward, SGD step) of an MLP on the cpu device, with
// tracing off and on, and prints one JSON line per mode. bench/train_step_vs_torch.py runs it
// side by side with PyTorch and prints the ratios (docs/benchmarks.md).
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

// Median seconds per step over `steps` steps after a warm-up.
double time_steps(Sequential& model, Optimizer& opt, Loss& loss, const Tensor& x, const Tensor& y,
                  int steps) {
  auto one_step = [&] {
    opt.zero_grad();
    const Tensor out = model.forward(x);
    loss.forward(out, y);
    model.backward(loss.backward());
    opt.step();
  };
  for (int i = 0; i < 10; ++i) one_step();
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    one_step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string spec = argc > 1 ? argv[1] : "784-512-512-10";
  const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 128;
  const int steps = argc > 3 ? std::stoi(argv[3]) : 200;
  const std::string device_name = argc > 4 ? argv[4] : "cpu";
  try {
    const Device device = device_name == "sim" ? Device::sim(0, find_preset("h100-sxm")) : Device::cpu();
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

    const double off = time_steps(*model, opt, loss, x, y, steps);
    const auto trace_path = std::filesystem::temp_directory_path() / "dpscope_train_step_bench.jsonl";
    TraceHeader header;
    header.clock = device.is_simulated() ? "simulated" : "measured";
    header.add_device(device);
    const Device devices[] = {device};
    double on = 0.0;
    {
      auto tracer = TraceRecorder::open(trace_path, header, devices);
      on = time_steps(*model, opt, loss, x, y, steps);
      tracer->close();
    }
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
