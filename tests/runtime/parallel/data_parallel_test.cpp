// DataParallel: torch.chunk scatter, replicas, gather, reduce-add — and equality with one device.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "dpscope/kernels/cpu_threads.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/parallel/data_parallel.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "run_parallel.hpp"
#include "support/errors.hpp"
#include "support/temp_files.hpp"
#include "support/thread_budget.hpp"

namespace dpscope {
namespace {

std::vector<Device> make_devices(int n, const std::string& preset = "h100-sxm") {
  const HardwarePreset hw = find_preset(preset);
  std::vector<Device> devices;
  for (int i = 0; i < n; ++i) devices.push_back(Device::sim(i, hw));
  return devices;
}

Tensor random_batch(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (float& x : v) x = dist(gen);
  return Tensor::from_floats(v, {rows, cols});
}

Tensor random_classes(int64_t rows, int64_t classes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int64_t> v(static_cast<size_t>(rows));
  for (int64_t& x : v) x = static_cast<int64_t>(gen() % static_cast<uint32_t>(classes));
  return Tensor::from_ints(v, {rows});
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  float worst = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

TEST(ChunkSizes, FollowTorchChunk) {
  EXPECT_EQ(chunk_sizes(10, 4), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(chunk_sizes(5, 4), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(chunk_sizes(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(chunk_sizes(3, 8), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(chunk_sizes(7, 1), (std::vector<int64_t>{7}));
  EXPECT_TRUE(chunk_sizes(0, 4).empty());
}

// Trains the same MLP on one device and with DataParallel on n devices for a few steps.
void expect_dp_equals_single_device(int n, int64_t batch) {
  const std::string spec = "6-16-16-4";
  const Device single = Device::sim(100, find_preset("h100-sxm"));
  auto reference = Sequential::mlp(spec, single, 7);
  std::vector<Device> devices = make_devices(n);
  DataParallel dp(Sequential::mlp(spec, devices[0], 7), devices);
  SGD opt_ref(reference->parameters(), {.lr = 0.1, .momentum = 0.9});
  SGD opt_dp(dp.parameters(), {.lr = 0.1, .momentum = 0.9});
  CrossEntropyLoss loss_ref, loss_dp;
  for (int step = 0; step < 4; ++step) {
    const Tensor x = random_batch(batch, 6, 10 + step);
    const Tensor y = random_classes(batch, 4, 20 + step);
    opt_ref.zero_grad();
    const float l_ref = loss_ref.forward(reference->forward(x.to(single)), y.to(single)).item();
    reference->backward(loss_ref.backward());
    opt_ref.step();

    opt_dp.zero_grad();
    const Tensor out = dp.forward(x);
    EXPECT_EQ(out.device(), devices[0]);
    const float l_dp = loss_dp.forward(out, y.to(devices[0])).item();
    dp.backward(loss_dp.backward());
    opt_dp.step();
    EXPECT_NEAR(l_ref, l_dp, 1e-5f) << "n=" << n << " step " << step;
  }
  const auto ref_params = reference->parameters();
  const auto dp_params = dp.parameters();
  for (size_t j = 0; j < ref_params.size(); ++j)
    EXPECT_LE(max_abs_diff(ref_params[j]->data, dp_params[j]->data), 1e-5f)
        << "n=" << n << " batch=" << batch << " " << ref_params[j]->name;
}

TEST(DataParallel, EqualsSingleDeviceTraining) {
  for (int n : {1, 2, 3, 4, 8}) expect_dp_equals_single_device(n, 24);
}

TEST(DataParallel, EqualsSingleDeviceWithUnevenChunks) {
  expect_dp_equals_single_device(4, 10);  // 3, 3, 3, 1
  expect_dp_equals_single_device(4, 5);   // 2, 2, 1: only three replicas run
  expect_dp_equals_single_device(8, 3);   // 1, 1, 1
}

TEST(DataParallel, ReplicaThreadsShareTheCpusMatrixProductThreads) {
  // parallel_apply's threads multiply at once: each gets its share of the budget
  // (kernels/cpu_threads.hpp), and the budget is whole again once they are joined.
  const testing::ThreadBudget budget(8);
  if (!budget.took_effect()) GTEST_SKIP() << "this OpenBLAS runs on one thread only (a serial build)";
  std::vector<int> seen(4);
  detail::run_parallel(
      seen.size(), [&](size_t i) { seen[i] = kernels::get_num_threads(); },
      [](size_t i) { return fmt::format("replica {}", i); });
  EXPECT_EQ(seen, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(kernels::get_num_threads(), 8);
}

TEST(DataParallel, UsesFewerReplicasThanDevicesForSmallBatches) {
  std::vector<Device> devices = make_devices(4);
  DataParallel dp(Sequential::mlp("3-4-2", devices[0], 0), devices);
  const Tensor out = dp.forward(random_batch(5, 3, 1));
  EXPECT_EQ(dp.replicas_used(), 3);
  EXPECT_EQ(out.shape(), (Shape{5, 2}));
}

TEST(DataParallel, RequiresParametersOnTheFirstDevice) {
  std::vector<Device> devices = make_devices(2);
  try {
    DataParallel dp(Sequential::mlp("3-4-2", Device::cpu(), 0), devices);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "module must have its parameters and buffers on device sim:0 (device_ids[0]) but found one of them "
        "on device: cpu");
  }
}

TEST(DataParallel, MisuseGivesClearErrors) {
  std::vector<Device> devices = make_devices(2);
  using testing::what_of;
  EXPECT_EQ(what_of([&] {
              DataParallel dp(Sequential::mlp("3-4-2", devices[0], 0), {devices[0], devices[0]});
            }),
            "DataParallel: device sim:0 appears twice in device_ids");
  EXPECT_EQ(what_of([&] { DataParallel dp(Sequential::mlp("3-4-2", devices[0], 0), {}); }),
            "DataParallel: device_ids is empty");
  DataParallel dp(Sequential::mlp("3-4-2", devices[0], 0), devices);
  EXPECT_EQ(what_of([&] {
              dp.backward(Tensor::zeros({4, 2}, devices[0]));
            }),
            "DataParallel.backward() called without a forward()");
  const std::vector<int64_t> two = {1, 2};
  EXPECT_EQ(what_of([&] { dp.forward(random_batch(3, 3, 1), two); }),
            "DataParallel.forward: 2 sample indices for a batch of 3 rows");
  const Tensor out = dp.forward(random_batch(4, 3, 1));
  EXPECT_EQ(what_of([&] {
              dp.backward(Tensor::zeros({3, 2}, devices[0]));
            }),
            "DataParallel.backward: grad_output has shape [3, 2], expected 4 rows");
  EXPECT_EQ(what_of([&] { chunk_sizes(4, 0); }), "chunk_sizes: need at least one part, got 0");
}

TEST(DataParallel, StateDictHasTheModulePrefix) {
  std::vector<Device> devices = make_devices(2);
  DataParallel dp(Sequential::mlp("3-4-2", devices[0], 0), devices);
  const StateDict state = dp.state_dict();
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[0].first, "module.0.weight");
  EXPECT_EQ(state[3].first, "module.2.bias");
  dp.load_state_dict(state);  // prefixed keys load back
}

TEST(DataParallel, ReplicaMemoryIsReleasedAfterBackward) {
  std::vector<Device> devices = make_devices(3);
  DataParallel dp(Sequential::mlp("8-32-4", devices[0], 0), devices);
  const Tensor out = dp.forward(random_batch(9, 8, 3));
  EXPECT_GT(devices[2].memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 0u);
  dp.backward(Tensor::full(out.shape(), 0.1f, devices[0]));
  EXPECT_EQ(devices[2].memory().bytes[static_cast<int>(MemoryCategory::kParameters)], 0u);
  EXPECT_EQ(devices[2].memory().bytes[static_cast<int>(MemoryCategory::kGradients)], 0u);
}

TEST(DataParallel, TracesSamplesPerDeviceAndCopies) {
  std::vector<Device> devices = make_devices(4);
  const auto path = testing::unique_temp_path("dp_trace.jsonl");
  TraceHeader header;
  for (const Device& d : devices) add_trace_device(header, d);
  {
    auto tracer = TraceRecorder::open(path, header, devices);
    DataParallel dp(Sequential::mlp("3-4-2", devices[0], 0), devices);
    const std::vector<int64_t> indices = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    const Tensor out = dp.forward(random_batch(10, 3, 1), indices);
    dp.backward(Tensor::full(out.shape(), 0.1f, devices[0]));
    tracer->close();
  }
  const trace::TraceData t = trace::read_trace(path);
  std::map<std::string, std::vector<int64_t>> per_device;
  int copies_to_device3 = 0;
  for (const trace::Event& e : t.events) {
    if (e.type == trace::EventType::kSamples)
      per_device[t.device(e.dev)->name] = t.samples[static_cast<size_t>(e.payload)].indices;
    if (e.type == trace::EventType::kTransfer && t.device(t.transfer(e).dst)->name == "sim:3")
      ++copies_to_device3;
  }
  EXPECT_EQ(per_device["sim:0"], (std::vector<int64_t>{10, 11, 12}));
  EXPECT_EQ(per_device["sim:1"], (std::vector<int64_t>{13, 14, 15}));
  EXPECT_EQ(per_device["sim:2"], (std::vector<int64_t>{16, 17, 18}));
  EXPECT_EQ(per_device["sim:3"], (std::vector<int64_t>{19}));
  EXPECT_GT(copies_to_device3, 0);
  std::filesystem::remove(path);
}

// The traced gradient values of a square weight: numel / 32 is 2 of its rows, a stride that would
// sample one column (the weights of one input unit, all zeros when it is a dead ReLU). The
// samples fall in 32 different columns instead, and are the gradient's elements at those places.
TEST(DataParallel, TracedGradientValuesSpreadOverAMatrixsColumns) {
  std::vector<Device> devices = make_devices(2);
  const auto path = testing::unique_temp_path("dp_values.jsonl");
  TraceHeader header;
  for (const Device& d : devices) add_trace_device(header, d);
  std::vector<float> grad;
  {
    auto tracer = TraceRecorder::open(path, header, devices);
    DataParallel dp(Sequential::mlp("8-64-64-2", devices[0], 0), devices);
    const Tensor out = dp.forward(random_batch(6, 8, 2));
    dp.backward(Tensor::full(out.shape(), 0.1f, devices[0]));
    tracer->close();
    const Parameter* w = dp.module().parameters()[2];  // 2.weight, [64, 64]
    ASSERT_EQ(w->data.shape(), (Shape{64, 64}));
    grad = w->grad.to(Device::cpu()).to_vector();
  }
  const trace::TraceData t = trace::read_trace(path);
  int checked = 0;
  for (const trace::Event& e : t.events) {
    if (e.type != trace::EventType::kValues) continue;
    const trace::ValueSample& v = t.values[e.payload];
    if (v.param != 2 || v.when_kind != ValuesWhen::kAfterReduce) continue;
    ASSERT_EQ(v.values.size(), 32u);
    std::set<int64_t> columns;
    for (size_t i = 0; i < v.values.size(); ++i) {
      const int64_t at = static_cast<int64_t>(i) * v.stride;
      ASSERT_LT(at, 64 * 64);
      columns.insert(at % 64);
      EXPECT_EQ(v.values[i], grad[static_cast<size_t>(at)]) << "element " << at;
    }
    EXPECT_EQ(columns.size(), 32u) << "stride " << v.stride;
    ++checked;
  }
  EXPECT_EQ(checked, 1);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dpscope
