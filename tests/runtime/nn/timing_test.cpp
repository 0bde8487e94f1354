// Simulated time and tracing of a training step: every kernel advances the compute clock by
// exactly its roofline time, timing-only tensors cost the same, and a tracer sees one span per
// kernel and one grad_ready instant per parameter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "dpscope/core/preset.hpp"
#include "dpscope/core/timing.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/trace/recorder.hpp"
#include "support/presets.hpp"

namespace dpscope {
namespace {

using ::testing::ElementsAre;

constexpr int64_t kBatch = 16, kIn = 64, kHidden = 32, kClasses = 10;

struct Kernel {
  std::string name;
  KernelCost cost;
};

// The kernels of one step of "64-32-10" with cross-entropy, in order, with their documented cost.
std::vector<Kernel> expected_kernels() {
  const double b = kBatch, i = kIn, h = kHidden, c = kClasses;
  return {
      {"forward 0.Linear", {2 * b * i * h + b * h, 4 * (b * i + h * i + h + b * h)}},
      {"forward 1.ReLU", {b * h, 8 * b * h}},
      {"forward 2.Linear", {2 * b * h * c + b * c, 4 * (b * h + c * h + c + b * c)}},
      {"loss CrossEntropy forward", {4 * b * c, 8 * b * c + 8 * b + 4}},
      {"loss CrossEntropy backward", {2 * b * c, 8 * b * c + 8 * b}},
      {"backward 2.Linear grad_bias", {b * c, 4 * (b * c + 2 * c)}},
      {"backward 2.Linear grad_weight", {2 * b * h * c, 4 * (b * c + b * h + 2 * c * h)}},
      {"backward 2.Linear grad_input", {2 * b * h * c, 4 * (b * c + c * h + b * h)}},
      {"backward 1.ReLU", {b * h, 12 * b * h}},
      {"backward 0.Linear grad_bias", {b * h, 4 * (b * h + 2 * h)}},
      {"backward 0.Linear grad_weight", {2 * b * i * h, 4 * (b * h + b * i + 2 * h * i)}},
  };
}

// Runs forward, loss and backward; returns the compute time it took on `dev`.
int64_t run_step(Sequential& model, const Device& dev, bool timing_only) {
  const int64_t start = dev.clock_ns(StreamKind::kCompute);
  CrossEntropyLoss loss_fn;
  const Tensor x = timing_only ? Tensor::meta({kBatch, kIn}, dev) : Tensor::zeros({kBatch, kIn}, dev);
  const Tensor y = timing_only ? Tensor::meta({kBatch}, dev, MemoryCategory::kActivations, DType::kI64)
                               : Tensor::zeros({kBatch}, dev, MemoryCategory::kActivations, DType::kI64);
  loss_fn.forward(model.forward(x), y);
  model.backward(loss_fn.backward());
  return dev.clock_ns(StreamKind::kCompute) - start;
}

TEST(SimTiming, AStepAdvancesTheComputeClockByTheRooflineTimeOfItsKernels) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  auto model = Sequential::mlp("64-32-10", dev, 0);
  int64_t expected = 0;
  for (const Kernel& k : expected_kernels()) expected += kernel_time_ns(*dev.hardware(), k.cost);
  EXPECT_EQ(run_step(*model, dev, false), expected);
  EXPECT_EQ(dev.clock_ns(StreamKind::kComm), 0);  // nothing ran on the other streams
}

TEST(SimTiming, TimingOnlyTensorsCostTheSameTime) {
  const Device real = Device::sim(0, find_preset("a100-sxm"));
  const Device meta = Device::sim(1, find_preset("a100-sxm"));
  auto model = Sequential::mlp("64-32-10", real, 0);
  auto shapes_only = Sequential::mlp_timing_only("64-32-10", meta);
  EXPECT_EQ(run_step(*shapes_only, meta, true), run_step(*model, real, false));
}

TEST(SimTiming, TracerSeesOneSpanPerKernelAndGradReadyInstants) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("dpscope_nn_timing_{}.jsonl", ::getpid());
  TraceHeader header;
  add_trace_device(header, dev);
  {
    auto tracer = TraceRecorder::open(path, header, std::span<const Device>(&dev, 1));
    auto model = Sequential::mlp("64-32-10", dev, 0);
    run_step(*model, dev, false);
    tracer->close();
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::string> spans, ready;
  std::vector<int64_t> durations;
  while (std::getline(in, line)) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["type"] == "span") {
      spans.push_back(event["name"]);
      durations.push_back(event["dur"]);
    } else if (event["type"] == "instant" && event["name"] == "grad_ready") {
      ready.push_back(fmt::format("{}@{}", event["args"]["param"].get<int>(), event["ts"].get<int64_t>()));
    }
  }
  std::filesystem::remove(path);

  const std::vector<Kernel> kernels = expected_kernels();
  ASSERT_EQ(spans.size(), kernels.size());
  int64_t t = 0;
  std::vector<std::string> expected_ready;
  for (size_t k = 0; k < kernels.size(); ++k) {
    EXPECT_EQ(spans[k], kernels[k].name);
    EXPECT_EQ(durations[k], kernel_time_ns(*dev.hardware(), kernels[k].cost)) << kernels[k].name;
    t += durations[k];
    // Parameter indices: 0.weight 0, 0.bias 1, 2.weight 2, 2.bias 3.
    if (kernels[k].name == "backward 2.Linear grad_bias") expected_ready.push_back(fmt::format("3@{}", t));
    if (kernels[k].name == "backward 2.Linear grad_weight") expected_ready.push_back(fmt::format("2@{}", t));
    if (kernels[k].name == "backward 0.Linear grad_bias") expected_ready.push_back(fmt::format("1@{}", t));
    if (kernels[k].name == "backward 0.Linear grad_weight") expected_ready.push_back(fmt::format("0@{}", t));
  }
  EXPECT_EQ(ready, expected_ready);
}

}  // namespace
}  // namespace dpscope
