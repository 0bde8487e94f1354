// Plain CPU references for the kernel consistency test (kernel_consistency_test.cpp): each op
// written the obvious way, in double where a sum is involved, independent of src/kernels/. Also the
// device list every kernel runs on (cpu, sim, cuda: skipped visibly without a GPU), deterministic inputs, and
// the tolerance check.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "dpscope/core/cuda.hpp"
#include "dpscope/core/tensor.hpp"

namespace dpscope::kernel_test {

// ---- the devices every kernel runs on (a new device kind joins with one line) ----
struct DeviceCase {
  const char* name;
  Device (*make)();
  // Why this case cannot run on this machine (the test skips, printing it), or "" when it can.
  std::string (*unavailable)();
};

// gtest prints a case by its name ("cuda"), not its bytes.
inline void PrintTo(const DeviceCase& c, std::ostream* os) { *os << c.name; }

inline std::string always_available() { return ""; }

// The cuda case is always listed, so a machine without a GPU shows it skipped with the reason.
inline std::string cuda_unavailable() {
  return cuda::physical_device_count() > 0 ? "" : "cuda kernels not run: " + cuda::unavailable_reason();
}

inline const std::vector<DeviceCase>& device_cases() {
  static const std::vector<DeviceCase> cases = {
      {"cpu", [] { return Device::new_cpu(); }, always_available},
      {"sim", [] { return Device::sim(0, find_preset("h100-sxm")); }, always_available},
      {"cuda", [] { return cuda::make_devices({.count = 1}).front(); }, cuda_unavailable},
  };
  return cases;
}

// ---- inputs ----
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline Tensor on(const Device& device, const std::vector<float>& values, const Shape& shape) {
  return Tensor::from_floats(values, shape, device);
}

// ---- tolerance: |actual - expected| <= abs + rel * |expected| per element ----
// A suite parametrized over device_cases(): each test gets its case's device, or skips (printing
// the reason) where that kind of device cannot be made here.
class OnEveryDevice : public ::testing::TestWithParam<DeviceCase> {
 protected:
  void SetUp() override {
    const std::string reason = GetParam().unavailable();
    if (!reason.empty()) GTEST_SKIP() << reason;
    device = GetParam().make();
  }
  Device device = Device::cpu();  // replaced by the case's device in SetUp
};

struct Tolerance {
  double abs = 0.0;
  double rel = 0.0;
};
constexpr Tolerance kExact{0.0, 0.0};

inline void expect_close(const std::vector<float>& actual, const std::vector<double>& expected, Tolerance tol,
                         const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double e = expected[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(a)) << what << " [" << i << "]";
      continue;
    }
    if (std::isinf(e)) {
      EXPECT_EQ(a, e) << what << " [" << i << "]";
      continue;
    }
    ASSERT_LE(std::fabs(a - e), tol.abs + tol.rel * std::fabs(e))
        << what << " [" << i << "]: got " << a << ", expected " << e;
  }
}

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// ---- references ----
// y[r][o] = b[o] + sum_i x[r][i] w[o][i]; also the sum of |terms| for a relative tolerance.
inline std::vector<double> ref_linear(const std::vector<float>& x, const std::vector<float>& w,
                                      const std::vector<float>* b, int64_t rows, int64_t in, int64_t out) {
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b != nullptr ? (*b)[static_cast<size_t>(o)] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        s += static_cast<double>(x[static_cast<size_t>(r * in + i)]) * w[static_cast<size_t>(o * in + i)];
      y[static_cast<size_t>(r * out + o)] = s;
    }
  return y;
}

// The float32 value nearest to x among IEEE binary16 values (ties to the even bit pattern), found
// by search over every finite half: independent of the kernel's frexp/ldexp arithmetic.
inline float ref_fp16(float x) {
  static const std::vector<float> halves = [] {
    std::vector<float> v;
    for (uint32_t h = 0; h < 0x7c00; ++h) {  // every non-negative finite half, ascending
      const int exponent = static_cast<int>(h >> 10);
      const int mantissa = static_cast<int>(h & 1023);
      v.push_back(exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
                                : std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25));
    }
    return v;
  }();
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  float r = 0.0f;
  if (a >= 65520.0f) {
    r = std::numeric_limits<float>::infinity();  // halfway past 65504 rounds to the even pattern: inf
  } else {
    const auto it = std::lower_bound(halves.begin(), halves.end(), a);
    if (it == halves.end()) {
      r = halves.back();
    } else if (*it == a || it == halves.begin()) {
      r = *it;
    } else {
      const float hi = *it;
      const float lo = *(it - 1);
      const auto hi_pattern = static_cast<size_t>(it - halves.begin());
      const double below = static_cast<double>(a) - lo;  // exact in double
      const double above = static_cast<double>(hi) - a;
      if (below < above) {
        r = lo;
      } else if (above < below) {
        r = hi;
      } else {
        r = hi_pattern % 2 == 0 ? hi : lo;
      }
    }
  }
  return std::copysign(r, x);
}

}  // namespace dpscope::kernel_test
