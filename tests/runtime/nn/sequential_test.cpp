// Sequential and Module: names and indices, the MLP factory, gradient-ready hooks (order, count,
// timing), used-parameter flags, state_dict round trips and load errors, a 3-layer gradient check.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dpscope/core/preset.hpp"
#include "dpscope/core/timing.hpp"
#include "dpscope/nn/activation.hpp"
#include "dpscope/nn/linear.hpp"
#include "dpscope/nn/loss.hpp"
#include "dpscope/nn/sequential.hpp"
#include "runtime/nn/reference.hpp"
#include "support/errors.hpp"
#include "support/presets.hpp"

namespace dpscope {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::random_floats;
using testing::to_double;
using testing::Vec;

using testing::what_of;

TEST(Sequential, MlpNamesParametersLikePyTorchSequential) {
  auto model = Sequential::mlp("784-512-256-10", Device::cpu(), 0);
  ASSERT_EQ(model->size(), 5u);
  EXPECT_STREQ((*model)[0].type_name(), "Linear");
  EXPECT_STREQ((*model)[1].type_name(), "ReLU");
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  std::vector<int> indices;
  for (const Parameter* p : model->parameters()) {
    names.push_back(p->name);
    shapes.push_back(p->data.shape());
    indices.push_back(p->index);
  }
  EXPECT_THAT(names, ElementsAre("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"));
  EXPECT_THAT(shapes, ElementsAre(Shape{512, 784}, Shape{512}, Shape{256, 512}, Shape{256}, Shape{10, 256},
                                  Shape{10}));
  EXPECT_THAT(indices, ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(model->parameter_numel(), 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
  EXPECT_EQ((*model)[2].display_name(), "2.Linear");
  EXPECT_EQ((*model)[3].path(), "3");
  EXPECT_EQ(model->display_name(), "Sequential");
}

TEST(Sequential, NestedSequentialsPrefixNamesByPath) {
  auto outer = std::make_unique<Sequential>();
  outer->emplace<ReLU>();
  auto inner = Sequential::mlp("3-2", Device::cpu(), 1);
  outer->add(std::move(inner));
  std::vector<std::string> names;
  for (const Parameter* p : outer->parameters()) names.push_back(p->name);
  EXPECT_THAT(names, ElementsAre("1.0.weight", "1.0.bias"));
  EXPECT_EQ((*outer)[1].parameters()[0]->index, 0);
  // A child's state_dict is relative to the child, as in PyTorch.
  EXPECT_EQ((*outer)[1].state_dict()[0].first, "0.weight");
}

TEST(Sequential, MlpSpecErrorsNameTheSpec) {
  EXPECT_EQ(Sequential::parse_mlp_spec("784-512-10"), (std::vector<int64_t>{784, 512, 10}));
  EXPECT_EQ(what_of([] { Sequential::parse_mlp_spec("784--10"); }),
            "invalid model spec '784--10': '' is not a layer size; expected layer sizes joined by '-', like "
            "784-512-10");
  EXPECT_EQ(what_of([] { Sequential::parse_mlp_spec("784-x"); }),
            "invalid model spec '784-x': 'x' is not a layer size; expected layer sizes joined by '-', like "
            "784-512-10");
  EXPECT_EQ(
      what_of([] { Sequential::parse_mlp_spec("784"); }),
      "invalid model spec '784': needs at least an input and an output size; expected layer sizes joined "
      "by '-', like 784-512-10");
  EXPECT_EQ(
      what_of([] { Sequential::parse_mlp_spec("784-0"); }),
      "invalid model spec '784-0': layer size 0 must be positive; expected layer sizes joined by '-', like "
      "784-512-10");
  try {
    Sequential::mlp("", Device::cpu(), 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

TEST(Sequential, SameSeedSameModel) {
  auto a = Sequential::mlp("8-4-2", Device::cpu(), 5), b = Sequential::mlp("8-4-2", Device::cpu(), 5);
  for (size_t i = 0; i < a->parameters().size(); ++i)
    EXPECT_EQ(a->parameters()[i]->data.to_vector(), b->parameters()[i]->data.to_vector());
}

TEST(Sequential, GradReadyHooksFireLastLayerFirstBiasBeforeWeightOncePerBackward) {
  auto model = Sequential::mlp("4-3-2", Device::cpu(), 0);
  std::vector<std::string> order;
  model->register_grad_ready_hook([&](Parameter& p) { order.push_back(p.name); });
  const Tensor x = Tensor::from_floats(random_floats(5 * 4, 1), {5, 4});
  model->forward(x);
  model->backward(Tensor::full({5, 2}, 0.1f));
  EXPECT_THAT(order, ElementsAre("2.bias", "2.weight", "0.bias", "0.weight"));
  order.clear();
  model->forward(x);
  model->backward(Tensor::full({5, 2}, 0.1f));
  EXPECT_THAT(order, ElementsAre("2.bias", "2.weight", "0.bias", "0.weight"));
}

TEST(Sequential, HookSeesTheAccumulatedGradientAndCanBeRemoved) {
  auto model = Sequential::mlp("4-3-2", Device::cpu(), 0);
  int calls = 0;
  bool grad_defined_at_hook = true;
  HookHandle handle = model->register_grad_ready_hook([&](Parameter& p) {
    ++calls;
    grad_defined_at_hook = grad_defined_at_hook && p.grad.defined();
  });
  // A hook on a child fires only for the child's parameters.
  std::vector<std::string> child_names;
  (*model)[2].register_grad_ready_hook([&](Parameter& p) { child_names.push_back(p.name); });
  model->forward(Tensor::zeros({1, 4}));
  model->backward(Tensor::zeros({1, 2}));
  EXPECT_EQ(calls, 4);
  EXPECT_TRUE(grad_defined_at_hook);
  EXPECT_THAT(child_names, ElementsAre("2.bias", "2.weight"));
  handle.remove();
  model->forward(Tensor::zeros({1, 4}));
  model->backward(Tensor::zeros({1, 2}));
  EXPECT_EQ(calls, 4);
  EXPECT_FALSE(model->remove_grad_ready_hook(handle.id()));
}

TEST(Sequential, HookFiresWhenTheGradientKernelHasBeenCharged) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  auto model = Sequential::mlp("4-3-2", dev, 0);
  std::vector<int64_t> clocks;
  model->register_grad_ready_hook([&](Parameter&) { clocks.push_back(dev.clock_ns(StreamKind::kCompute)); });
  model->forward(Tensor::zeros({8, 4}, dev));
  const int64_t t0 = dev.clock_ns(StreamKind::kCompute);
  model->backward(Tensor::zeros({8, 2}, dev));
  const HardwarePreset& hw = *dev.hardware();
  // Layer 2 (in 3, out 2), then its grad_input, ReLU backward, then layer 0 (in 4, out 3).
  const int64_t bias2 = kernel_time_ns(hw, {8.0 * 2, 4.0 * (8 * 2 + 2 * 2)});
  const int64_t weight2 = kernel_time_ns(hw, {2.0 * 8 * 3 * 2, 4.0 * (8 * 2 + 8 * 3 + 2 * 2 * 3)});
  const int64_t input2 = kernel_time_ns(hw, {2.0 * 8 * 3 * 2, 4.0 * (8 * 2 + 2 * 3 + 8 * 3)});
  const int64_t relu = kernel_time_ns(hw, {8.0 * 3, 12.0 * 8 * 3});
  const int64_t bias0 = kernel_time_ns(hw, {8.0 * 3, 4.0 * (8 * 3 + 2 * 3)});
  const int64_t weight0 = kernel_time_ns(hw, {2.0 * 8 * 4 * 3, 4.0 * (8 * 3 + 8 * 4 + 2 * 3 * 4)});
  EXPECT_THAT(clocks,
              ElementsAre(t0 + bias2, t0 + bias2 + weight2, t0 + bias2 + weight2 + input2 + relu + bias0,
                          t0 + bias2 + weight2 + input2 + relu + bias0 + weight0));
  // The first layer's input gradient is not computed: the clock stops at the last hook.
  EXPECT_EQ(dev.clock_ns(StreamKind::kCompute), clocks.back());
}

TEST(Sequential, BackwardReturnsNoInputGradientUnlessRequested) {
  auto model = Sequential::mlp("4-3-2", Device::cpu(), 0);
  model->forward(Tensor::zeros({2, 4}));
  EXPECT_FALSE(model->backward(Tensor::zeros({2, 2})).defined());
  model->set_input_requires_grad(true);
  model->forward(Tensor::zeros({2, 4}));
  const Tensor dx = model->backward(Tensor::zeros({2, 2}));
  ASSERT_TRUE(dx.defined());
  EXPECT_EQ(dx.shape(), (Shape{2, 4}));
}

// A custom module (the extension API other layers use) whose forward skips its second child.
class FirstOnly : public Module {
 public:
  FirstOnly() {
    std::mt19937 gen(0);
    first_ = std::make_unique<Linear>(2, 2, Device::cpu(), gen);
    second_ = std::make_unique<Linear>(2, 2, Device::cpu(), gen);
    register_child("first", *first_);
    register_child("second", *second_);
  }
  const char* type_name() const override { return "FirstOnly"; }

 protected:
  Tensor forward_impl(const Tensor& input) override { return first_->forward(input); }
  Tensor backward_impl(const Tensor& grad_output, bool need_input_grad) override {
    return first_->backward(grad_output, need_input_grad);
  }
  std::unique_ptr<Module> clone_impl(const Device*) const override { return std::make_unique<FirstOnly>(); }

 private:
  std::unique_ptr<Linear> first_;
  std::unique_ptr<Linear> second_;
};

TEST(Module, ForwardMarksExactlyTheParametersItUsed) {
  auto model = Sequential::mlp("4-3-2", Device::cpu(), 0);
  for (const Parameter* p : model->parameters()) EXPECT_FALSE(p->used_in_last_forward);
  model->forward(Tensor::zeros({1, 4}));
  for (const Parameter* p : model->parameters()) EXPECT_TRUE(p->used_in_last_forward) << p->name;

  FirstOnly custom;
  std::vector<std::string> names, used, ready;
  for (Parameter* p : custom.parameters()) {
    names.push_back(p->name);
    p->used_in_last_forward = true;  // stale flags from an earlier forward are cleared
  }
  EXPECT_THAT(names, ElementsAre("first.weight", "first.bias", "second.weight", "second.bias"));
  custom.register_grad_ready_hook([&](Parameter& p) { ready.push_back(p.name); });
  custom.forward(Tensor::zeros({1, 2}));
  for (const Parameter* p : custom.parameters())
    if (p->used_in_last_forward) used.push_back(p->name);
  EXPECT_THAT(used, ElementsAre("first.weight", "first.bias"));
  custom.backward(Tensor::zeros({1, 2}));
  EXPECT_THAT(ready, ElementsAre("first.bias", "first.weight"));
  EXPECT_FALSE(custom.parameters()[2]->grad.defined());
}

TEST(Sequential, ThreeLayerGradientsMatchFiniteDifferences) {
  constexpr int64_t kBatch = 3;
  auto model = Sequential::mlp("5-4-3-2", Device::cpu(), 11);
  model->set_input_requires_grad(true);
  const std::vector<float> x = random_floats(kBatch * 5, 12);
  const std::vector<int64_t> targets{1, 0, 1};
  CrossEntropyLoss loss_fn;
  const Tensor logits = model->forward(Tensor::from_floats(x, {kBatch, 5}));
  loss_fn.forward(logits, Tensor::from_ints(targets, {kBatch}));
  const Tensor dx = model->backward(loss_fn.backward());

  // Reference: the same network in double, as a function of all parameters and the input.
  std::vector<Vec> params;
  for (const Parameter* p : model->parameters()) params.push_back(to_double(p->data));
  const Vec xd(x.begin(), x.end());
  auto loss = [&](const std::vector<Vec>& ps, const Vec& input) {
    Vec h = testing::relu_ref(testing::linear_ref(input, ps[0], ps[1], kBatch, 5, 4));
    h = testing::relu_ref(testing::linear_ref(h, ps[2], ps[3], kBatch, 4, 3));
    return testing::cross_entropy_ref(testing::linear_ref(h, ps[4], ps[5], kBatch, 3, 2), targets, 2);
  };
  const std::vector<Parameter*> ps = model->parameters();
  for (size_t k = 0; k < ps.size(); ++k) {
    const Vec expected = testing::finite_differences(params[k], [&](const Vec& v) {
      std::vector<Vec> changed = params;
      changed[k] = v;
      return loss(changed, xd);
    });
    const Vec got = to_double(ps[k]->grad);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 2e-6) << ps[k]->name << "[" << i << "]";
  }
  const Vec expected_dx = testing::finite_differences(xd, [&](const Vec& v) { return loss(params, v); });
  const Vec got_dx = to_double(dx);
  for (size_t i = 0; i < got_dx.size(); ++i) EXPECT_NEAR(got_dx[i], expected_dx[i], 2e-6) << "input " << i;
}

TEST(Sequential, StateDictRoundTripsIntoAnotherModel) {
  auto a = Sequential::mlp("6-5-4", Device::cpu(), 1);
  auto b = Sequential::mlp("6-5-4", Device::cpu(), 2);
  const StateDict state = a->state_dict();
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[0].first, "0.weight");
  EXPECT_EQ(state[3].first, "2.bias");
  b->load_state_dict(state);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(b->parameters()[i]->data.to_vector(), a->parameters()[i]->data.to_vector());
  // A copy, not shared storage.
  b->parameters()[0]->data.fill(0.0f);
  EXPECT_NE(a->parameters()[0]->data.to_vector(), b->parameters()[0]->data.to_vector());
}

TEST(Sequential, StateDictLoadsAcrossDevices) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  auto a = Sequential::mlp("3-2", Device::cpu(), 1);
  auto b = Sequential::mlp("3-2", dev, 2);
  b->load_state_dict(a->state_dict());
  EXPECT_EQ(b->parameters()[0]->data.device(), dev);
  EXPECT_EQ(b->parameters()[0]->data.to_vector(), a->parameters()[0]->data.to_vector());
}

TEST(Sequential, LoadStateDictErrorsNameTheKeys) {
  auto model = Sequential::mlp("784-256-10", Device::cpu(), 0);
  StateDict state = Sequential::mlp("784-512-10", Device::cpu(), 0)->state_dict();
  EXPECT_EQ(what_of([&] { model->load_state_dict(state); }),
            "load_state_dict: size mismatch for 0.weight: checkpoint [512, 784], model [256, 784]");

  StateDict good = model->state_dict();
  StateDict missing(good.begin(), good.end() - 1);
  EXPECT_EQ(what_of([&] { model->load_state_dict(missing); }),
            "load_state_dict: Missing key(s) in state_dict: \"2.bias\".");
  StateDict extra = good;
  extra.emplace_back("module.0.weight", good[0].second);
  EXPECT_EQ(what_of([&] { model->load_state_dict(extra); }),
            "load_state_dict: Unexpected key(s) in state_dict: \"module.0.weight\".");
  StateDict both = missing;
  both.emplace_back("4.bias", good[3].second);
  EXPECT_EQ(what_of([&] { model->load_state_dict(both); }),
            "load_state_dict: Missing key(s) in state_dict: \"2.bias\". Unexpected key(s) in state_dict: "
            "\"4.bias\".");
  StateDict wrong_dtype = good;
  wrong_dtype[1].second = Tensor::zeros({256}, Device::cpu(), MemoryCategory::kBuffers, DType::kI64);
  EXPECT_EQ(what_of([&] { model->load_state_dict(wrong_dtype); }),
            "load_state_dict: dtype mismatch for 0.bias: checkpoint int64, model float32");
}

TEST(Sequential, FailedLoadChangesNothing) {
  auto model = Sequential::mlp("3-2-2", Device::cpu(), 0);
  const std::vector<float> before = model->parameters()[0]->data.to_vector();
  StateDict state = Sequential::mlp("3-2-2", Device::cpu(), 1)->state_dict();
  state[3].second = Tensor::zeros({3});  // 2.bias has the wrong size
  EXPECT_THROW(model->load_state_dict(state), Error);
  EXPECT_EQ(model->parameters()[0]->data.to_vector(), before);
}

TEST(Sequential, CloneKeepsNamesValuesAndSettings) {
  auto model = Sequential::mlp("4-3-2", Device::cpu(), 3);
  std::unique_ptr<Module> copy = model->clone();
  ASSERT_EQ(copy->parameters().size(), 4u);
  EXPECT_EQ(copy->parameters()[2]->name, "2.weight");
  EXPECT_EQ(copy->parameters()[2]->index, 2);
  EXPECT_FALSE(copy->input_requires_grad());
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(copy->parameters()[i]->data.to_vector(), model->parameters()[i]->data.to_vector());
  const Tensor x = Tensor::from_floats(random_floats(8, 4), {2, 4});
  EXPECT_EQ(copy->forward(x).to_vector(), model->forward(x).to_vector());
}

TEST(Sequential, TimingOnlyMlpRunsWithoutData) {
  const Device dev = Device::sim(0, testing::roofline_preset("h100-sxm"));
  auto model = Sequential::mlp_timing_only("8192-8192-8192-1000", dev);
  EXPECT_EQ(model->parameter_numel(), 8192 * 8192 * 2 + 8192 * 2 + 8192 * 1000 + 1000);
  CrossEntropyLoss loss_fn;
  const Tensor logits = model->forward(Tensor::meta({512, 8192}, dev));
  const Tensor loss =
      loss_fn.forward(logits, Tensor::meta({512}, dev, MemoryCategory::kActivations, DType::kI64));
  EXPECT_FALSE(loss.has_data());
  model->backward(loss_fn.backward());
  for (const Parameter* p : model->parameters()) {
    EXPECT_TRUE(p->grad.defined());
    EXPECT_FALSE(p->grad.has_data());
  }
  EXPECT_GT(dev.clock_ns(StreamKind::kCompute), 0);
}

}  // namespace
}  // namespace dpscope
