// Double-precision reference math for the nn tests: an independent forward pass (Linear, ReLU,
// MSE, cross-entropy) and central finite differences, against which the float32 layers and
// their hand-written backward passes are checked.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "dpscope/core/tensor.hpp"

namespace dpscope::testing {

using Vec = std::vector<double>;

inline Vec to_double(const Tensor& t) {
  const std::vector<float> v = t.to_vector();
  return Vec(v.begin(), v.end());
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = dist(gen);
  return out;
}

// y[rows, out] = x[rows, in] W[out, in]^T + b[out] (b may be empty).
inline Vec linear_ref(const Vec& x, const Vec& w, const Vec& b, int64_t rows, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(rows * out), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b.empty() ? 0.0 : b[static_cast<size_t>(o)];
      for (int64_t i = 0; i < in; ++i)
        acc += x[static_cast<size_t>(r * in + i)] * w[static_cast<size_t>(o * in + i)];
      y[static_cast<size_t>(r * out + o)] = acc;
    }
  return y;
}

inline Vec relu_ref(Vec x) {
  for (double& v : x) v = v < 0.0 ? 0.0 : v;
  return x;
}

inline double mse_ref(const Vec& x, const Vec& t) {
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) sum += (x[i] - t[i]) * (x[i] - t[i]);
  return sum / static_cast<double>(x.size());
}

inline double cross_entropy_ref(const Vec& logits, const std::vector<int64_t>& targets, int64_t classes) {
  const int64_t batch = static_cast<int64_t>(targets.size());
  double total = 0.0;
  for (int64_t r = 0; r < batch; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(logits[static_cast<size_t>(r * classes + c)]);
    total += std::log(sum) - logits[static_cast<size_t>(r * classes + targets[static_cast<size_t>(r)])];
  }
  return total / static_cast<double>(batch);
}

// d f / d v[i] for every i, by central differences with step `h` (f evaluated in double).
inline Vec finite_differences(Vec v, const std::function<double(const Vec&)>& f, double h = 1e-6) {
  Vec grad(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double saved = v[i];
    v[i] = saved + h;
    const double up = f(v);
    v[i] = saved - h;
    const double down = f(v);
    v[i] = saved;
    grad[i] = (up - down) / (2.0 * h);
  }
  return grad;
}

}  // namespace dpscope::testing
