// Deterministic training data and weight comparisons shared by the parallel, zero and train tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "dpscope/nn/module.hpp"

namespace dpscope::testing {

struct Batches {
  std::vector<Tensor> x, y;  // global batches on the cpu, one per step: [rows, features] and [rows] classes
};

inline Batches make_batches(int steps, int64_t rows, int64_t features, int64_t classes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Batches b;
  for (int s = 0; s < steps; ++s) {
    std::vector<float> x(static_cast<size_t>(rows * features));
    for (float& v : x) v = dist(gen);
    std::vector<int64_t> y(static_cast<size_t>(rows));
    for (int64_t& v : y) v = static_cast<int64_t>(gen() % static_cast<uint32_t>(classes));
    b.x.push_back(Tensor::from_floats(x, {rows, features}));
    b.y.push_back(Tensor::from_ints(y, {rows}));
  }
  return b;
}

using Weights = std::vector<std::vector<float>>;

inline Weights weights_of(const std::vector<Parameter*>& params) {
  Weights w;
  for (const Parameter* p : params) w.push_back(p->data.to_vector());
  return w;
}

// The largest absolute difference between two weight sets of the same shapes.
inline float max_diff(const Weights& a, const Weights& b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) worst = std::max(worst, std::fabs(a[i][j] - b[i][j]));
  return worst;
}

}  // namespace dpscope::testing
