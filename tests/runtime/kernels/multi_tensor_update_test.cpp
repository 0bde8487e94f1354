// The multi-tensor optimizer updates (kernels::sgd_update_multi / adam_update_multi, PyTorch's
// fused=True) against the per-tensor functions, on every device kind: the results must be
// bit-identical (the host path calls the per-tensor function; the CUDA path runs the same body in
// one launch per 32 tensors). 40 tensors of mixed sizes, empty ones included, cross that batching.
#include <gtest/gtest.h>

#include "dpscope/kernels/kernels.hpp"
#include "kernel_reference.hpp"

namespace dpscope {
namespace {

using namespace kernel_test;

class MultiTensorUpdate : public OnEveryDevice {};

// Sizes of the 40 tensors: 0, 1, odd, and a few large ones.
std::vector<int64_t> tensor_sizes() {
  std::vector<int64_t> sizes;
  for (int k = 0; k < 40; ++k) sizes.push_back(k % 10 == 0 ? 0 : (k % 7 == 3 ? 4099 + k : 1 + 13 * k));
  return sizes;
}

// The tensors of one parameter: param, grad and three state slots, from deterministic seeds.
struct ParamState {
  Tensor param, grad, a, b, c;
};

std::vector<ParamState> make_states(const Device& device, uint32_t seed, bool with_c) {
  std::vector<ParamState> states;
  uint32_t s = seed;
  for (int64_t n : tensor_sizes()) {
    const auto size = static_cast<size_t>(n);
    states.push_back({on(device, random_floats(size, s + 1), {n}),
                      on(device, random_floats(size, s + 2), {n}),
                      on(device, random_floats(size, s + 3, -0.1f, 0.1f), {n}),
                      on(device, random_floats(size, s + 4, 0.0f, 0.01f), {n}),
                      with_c ? on(device, random_floats(size, s + 5, 0.0f, 0.01f), {n}) : Tensor()});
    s += 10;
  }
  return states;
}

void expect_identical(const std::vector<ParamState>& got, const std::vector<ParamState>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].param.to_vector(), want[k].param.to_vector()) << what << " param " << k;
    EXPECT_EQ(got[k].a.to_vector(), want[k].a.to_vector()) << what << " state a " << k;
    EXPECT_EQ(got[k].b.to_vector(), want[k].b.to_vector()) << what << " state b " << k;
    if (want[k].c.defined()) {
      EXPECT_EQ(got[k].c.to_vector(), want[k].c.to_vector()) << what << " state c " << k;
    }
  }
}

TEST_P(MultiTensorUpdate, SgdIsBitIdenticalToPerTensorUpdates) {
  struct Case {
    const char* name;
    kernels::SgdStep step;
  };
  const Case cases[] = {
      {"plain", {.neg_lr = -0.1f}},
      {"momentum first step", {.neg_lr = -0.01f, .momentum = 0.9f, .use_momentum = true, .first = true}},
      {"momentum dampening maximize",
       {.neg_lr = -0.01f,
        .momentum = 0.9f,
        .one_minus_dampening = 0.9f,
        .use_momentum = true,
        .maximize = true}},
      {"nesterov weight decay",
       {.neg_lr = -0.05f,
        .momentum = 0.8f,
        .weight_decay = 0.01f,
        .use_momentum = true,
        .decay = true,
        .nesterov = true}},
  };
  for (const Case& c : cases) {
    std::vector<ParamState> fused = make_states(device, 100, false);
    std::vector<ParamState> single = make_states(device, 100, false);
    std::vector<kernels::SgdTensors> list;
    for (ParamState& s : fused) list.push_back({&s.param, &s.grad, &s.a, c.step});
    kernels::sgd_update_multi(list);
    for (ParamState& s : single) kernels::sgd_update(s.param, s.grad, s.a, c.step);
    expect_identical(fused, single, fmt::format("sgd {} on {}", c.name, device.name()));
  }
}

TEST_P(MultiTensorUpdate, AdamAndAdamWAreBitIdenticalToPerTensorUpdates) {
  struct Case {
    const char* name;
    bool decoupled, amsgrad, maximize;
    double lr, weight_decay;
    int step;
  };
  const Case cases[] = {{"adam", false, false, false, 1e-3, 0.0, 1},
                        {"adam amsgrad weight decay", false, true, false, 1e-2, 0.01, 3},
                        {"adamw", true, false, true, 1e-3, 0.01, 10},
                        {"adamw amsgrad", true, true, false, 1e-3, 0.01, 2}};
  const double beta1 = 0.9, beta2 = 0.999;
  for (const Case& c : cases) {
    std::vector<ParamState> fused = make_states(device, 200, c.amsgrad);
    std::vector<ParamState> single = make_states(device, 200, c.amsgrad);
    std::vector<kernels::AdamTensors> list;
    // Each tensor its own step count, as parameters that joined training at different steps.
    const auto step_of = [&](size_t k) {
      const int step = c.step + static_cast<int>(k % 3);
      const double bc1 = 1.0 - std::pow(beta1, step);
      const double bc2 = 1.0 - std::pow(beta2, step);
      return kernels::AdamStep{.beta1 = static_cast<float>(beta1),
                               .beta2 = static_cast<float>(beta2),
                               .one_minus_beta1 = static_cast<float>(1.0 - beta1),
                               .one_minus_beta2 = static_cast<float>(1.0 - beta2),
                               .neg_step_size = static_cast<float>(-(c.lr / bc1)),
                               .bias_correction2_sqrt = static_cast<float>(std::sqrt(bc2)),
                               .eps = 1e-8f,
                               .weight_decay = static_cast<float>(c.weight_decay),
                               .decay_factor = static_cast<float>(1.0 - c.lr * c.weight_decay),
                               .coupled_decay = !c.decoupled && c.weight_decay != 0.0,
                               .decoupled_decay = c.decoupled,
                               .maximize = c.maximize};
    };
    for (size_t k = 0; k < fused.size(); ++k)
      list.push_back({&fused[k].param, &fused[k].grad, &fused[k].a, &fused[k].b, &fused[k].c, step_of(k)});
    kernels::adam_update_multi(list);
    for (size_t k = 0; k < single.size(); ++k)
      kernels::adam_update(single[k].param, single[k].grad, single[k].a, single[k].b, single[k].c,
                           step_of(k));
    expect_identical(fused, single, fmt::format("{} on {}", c.name, device.name()));
  }
}

std::string device_case_name(const ::testing::TestParamInfo<DeviceCase>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(AllDevices, MultiTensorUpdate, ::testing::ValuesIn(device_cases()),
                         device_case_name);

}  // namespace
}  // namespace dpscope
