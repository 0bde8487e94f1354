// Optimizer base behaviour: state tensors for checkpoints (names, round trip, load errors),
// memory accounting, simulated time and the optimizer span in a trace, timing-only parameters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "dpscope/core/preset.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/optim/adam.hpp"
#include "dpscope/optim/sgd.hpp"
#include "dpscope/trace/recorder.hpp"
#include "support/errors.hpp"
#include "support/presets.hpp"

namespace dpscope {
namespace {

using ::testing::ElementsAre;

using testing::what_of;

// Gives every parameter the gradient 0.01 * (index + 1).
void set_grads(Module& model) {
  for (Parameter* p : model.parameters()) {
    p->grad = p->data.has_data()
                  ? Tensor::full(p->data.shape(), 0.01f * static_cast<float>(p->index + 1), p->data.device(),
                                 MemoryCategory::kGradients)
                  : Tensor::meta(p->data.shape(), p->data.device(), MemoryCategory::kGradients);
  }
}

TEST(Optimizer, StateTensorsRoundTripIntoAFreshOptimizer) {
  auto a = Sequential::mlp("4-3-2", Device::cpu(), 0);
  auto b = Sequential::mlp("4-3-2", Device::cpu(), 0);
  Adam opt_a(a->parameters(), {.lr = 0.1});
  for (int t = 0; t < 2; ++t) {
    set_grads(*a);
    opt_a.step();
    set_grads(*b);
  }
  b->load_state_dict(a->state_dict());
  Adam opt_b(b->parameters(), {.lr = 0.1});
  opt_b.load_state_tensors(opt_a.state_tensors());
  // Loaded state is a copy: stepping A must not change B's state.
  set_grads(*a);
  opt_a.step();
  set_grads(*b);
  opt_b.step();
  for (size_t i = 0; i < a->parameters().size(); ++i)
    EXPECT_EQ(a->parameters()[i]->data.to_vector(), b->parameters()[i]->data.to_vector());
  EXPECT_EQ(opt_b.state_tensors()[0].first, "0.weight.step");
  EXPECT_EQ(opt_b.state_tensors()[0].second.item(), 3.0f);
}

TEST(Optimizer, SgdStateNamesFollowParameterNames) {
  auto model = Sequential::mlp("4-3-2", Device::cpu(), 0);
  SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  EXPECT_TRUE(sgd.state_tensors().empty());
  set_grads(*model);
  sgd.step();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : sgd.state_tensors()) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("0.weight.momentum_buffer", "0.bias.momentum_buffer",
                                 "2.weight.momentum_buffer", "2.bias.momentum_buffer"));
}

TEST(Optimizer, LoadStateTensorsErrors) {
  auto model = Sequential::mlp("4-3-2", Device::cpu(), 0);
  Adam adam(model->parameters(), {.lr = 0.1});
  const Tensor w = Tensor::zeros({3, 4});
  EXPECT_EQ(what_of([&] {
              adam.load_state_tensors({{"5.weight.exp_avg", w}});
            }),
            "load_state_tensors: unexpected key \"5.weight.exp_avg\" for Adam (expected <parameter "
            "name>.<step|exp_avg|exp_avg_sq|max_exp_avg_sq>)");
  EXPECT_EQ(what_of([&] {
              adam.load_state_tensors({{"0.weight.momentum_buffer", w}});
            }),
            "load_state_tensors: unexpected key \"0.weight.momentum_buffer\" for Adam (expected <parameter "
            "name>.<step|exp_avg|exp_avg_sq|max_exp_avg_sq>)");
  EXPECT_EQ(what_of([&] {
              adam.load_state_tensors({{"0.weight.exp_avg", Tensor::zeros({4})}});
            }),
            "load_state_tensors: size mismatch for 0.weight.exp_avg: checkpoint [4], optimizer [3, 4]");
  EXPECT_EQ(what_of([&] {
              adam.load_state_tensors({{"0.weight.exp_avg", w}, {"0.weight.exp_avg_sq", w}});
            }),
            "load_state_tensors: Adam state of 0.weight is incomplete: 0.weight.step is missing");
  EXPECT_EQ(what_of([&] {
              adam.load_state_tensors({{"0.weight.step", Tensor::zeros({})},
                                       {"0.weight.exp_avg", w},
                                       {"0.weight.exp_avg_sq", w},
                                       {"0.weight.max_exp_avg_sq", w}});
            }),
            "load_state_tensors: 0.weight.max_exp_avg_sq is present but amsgrad is off");
  // A failed load leaves the previous state in place.
  set_grads(*model);
  adam.step();
  EXPECT_THROW(adam.load_state_tensors({{"0.weight.exp_avg", w}}), Error);
  EXPECT_EQ(adam.state_tensors().size(), 12u);
}

TEST(Optimizer, StateIsAccountedAsOptimizerStateOnTheParameterDevice) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  auto model = Sequential::mlp("4-3-2", dev, 0);
  Adam adam(model->parameters(), {.lr = 0.1});
  set_grads(*model);
  adam.step();
  const uint64_t param_bytes = static_cast<uint64_t>(model->parameter_numel()) * 4u;
  // exp_avg and exp_avg_sq on the device; the step counters on the cpu, as PyTorch keeps them.
  EXPECT_EQ(dev.memory().bytes[static_cast<int>(MemoryCategory::kOptimizerState)], 2u * param_bytes);
  for (const auto& [name, tensor] : adam.state_tensors())
    EXPECT_EQ(tensor.device(), name.ends_with(".step") ? Device::cpu() : dev) << name;
}

TEST(Optimizer, StepChargesTheRooflineTimeOfEachParameterUpdate) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  auto model = Sequential::mlp("64-32-10", dev, 0);
  SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  Adam adam(model->parameters(), {.lr = 0.1, .weight_decay = 0.1});
  set_grads(*model);
  int64_t sgd_expected = 0, adam_expected = 0;
  for (const Parameter* p : model->parameters()) {
    const double n = static_cast<double>(p->data.numel());
    sgd_expected += kernel_time_ns(*dev.hardware(), {5.0 * n, 20.0 * n});
    adam_expected += kernel_time_ns(*dev.hardware(), {15.0 * n, 28.0 * n});
  }
  int64_t start = dev.clock_ns(StreamKind::kCompute);
  sgd.step();
  EXPECT_EQ(dev.clock_ns(StreamKind::kCompute) - start, sgd_expected);
  start = dev.clock_ns(StreamKind::kCompute);
  adam.step();
  EXPECT_EQ(dev.clock_ns(StreamKind::kCompute) - start, adam_expected);
}

TEST(Optimizer, TimingOnlyParametersAreTimedAndGetStateWithoutData) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  auto model = Sequential::mlp_timing_only("4096-4096-10", dev);
  Adam adam(model->parameters(), {.lr = 0.1});
  set_grads(*model);
  adam.step();
  adam.step();
  const StateDict state = adam.state_tensors();
  ASSERT_EQ(state.size(), 12u);
  EXPECT_EQ(state[0].second.item(), 2.0f);  // 0.weight.step counts even without data
  EXPECT_FALSE(state[1].second.has_data());
  EXPECT_GT(dev.clock_ns(StreamKind::kCompute), 0);
}

TEST(Optimizer, StepIsTracedAsAnOptimizerSpanAroundItsKernels) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  dev.set_phase(Phase::kBackward);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("dpscope_optim_trace_{}.jsonl", ::getpid());
  TraceHeader header;
  add_trace_device(header, dev);
  auto model = Sequential::mlp("4-3-2", dev, 0);
  {
    auto tracer = TraceRecorder::open(path, header, std::span<const Device>(&dev, 1));
    SGD sgd(model->parameters(), {.lr = 0.1});
    set_grads(*model);
    sgd.step();
    tracer->close();
  }
  EXPECT_EQ(dev.phase(), Phase::kBackward);  // restored after the step
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> names;
  nlohmann::json outer;
  int64_t kernel_total_ns = 0;
  while (std::getline(in, line)) {
    const nlohmann::json event = nlohmann::json::parse(line);
    if (event["type"] != "span") continue;
    EXPECT_EQ(event["phase"], "optimizer");
    names.push_back(event["name"]);
    if (event["cat"] == "optimizer") {
      outer = event;
    } else {
      kernel_total_ns += event["dur"].get<int64_t>();
    }
  }
  std::filesystem::remove(path);
  EXPECT_THAT(names, ElementsAre("optimizer SGD 0.weight", "optimizer SGD 0.bias", "optimizer SGD 2.weight",
                                 "optimizer SGD 2.bias", "optimizer.step SGD"));
  EXPECT_EQ(outer["ts"], 0);
  EXPECT_EQ(outer["dur"], kernel_total_ns);
}

// step() checks every parameter before it updates any: a bad gradient anywhere leaves the whole
// model and the optimizer state as they were.
TEST(Optimizer, StepChecksEveryParameterBeforeUpdatingAny) {
  auto model = Sequential::mlp("4-3-2", Device::cpu(), 0);
  SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  set_grads(*model);
  std::vector<std::vector<float>> before;
  for (const Parameter* p : model->parameters()) before.push_back(p->data.to_vector());
  Parameter& last = *model->parameters().back();
  last.grad = Tensor::zeros({3}, Device::cpu(), MemoryCategory::kGradients);
  EXPECT_EQ(what_of([&] { sgd.step(); }), "SGD.step: gradient of 2.bias has shape [3], the parameter [2]");
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(model->parameters()[i]->data.to_vector(), before[i]) << i;
  EXPECT_TRUE(sgd.state_tensors().empty());  // no momentum buffer was created either
}

// The parameters of each device take one multi-tensor update call; on a simulated device it is
// still modelled (and traced) as one kernel per parameter, with the same results as a step of
// each parameter alone.
TEST(Optimizer, AStepOverManyParametersEqualsOneStepPerParameter) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  auto together = Sequential::mlp("6-5-4-3", dev, 7);
  auto alone = Sequential::mlp("6-5-4-3", dev, 7);
  AdamW adamw(together->parameters(), {.lr = 0.01, .amsgrad = true});
  std::vector<std::unique_ptr<AdamW>> singles;
  for (Parameter* p : alone->parameters())
    singles.push_back(
        std::make_unique<AdamW>(std::vector<Parameter*>{p}, AdamWOptions{.lr = 0.01, .amsgrad = true}));
  for (int t = 0; t < 3; ++t) {
    set_grads(*together);
    set_grads(*alone);
    adamw.step();
    for (auto& single : singles) single->step();
  }
  for (size_t i = 0; i < together->parameters().size(); ++i)
    EXPECT_EQ(together->parameters()[i]->data.to_vector(), alone->parameters()[i]->data.to_vector()) << i;
}

}  // namespace
}  // namespace dpscope
