// The closed-form collective cases every backend's suite checks (tests/runtime/comm/
// backend_suite_test.cpp on rank threads, tests/mpi/mpi_collectives_test.cpp on processes):
//   rank r, element i holds r * n + i (n ranks), so with S = n(n-1)/2 the results are
//   sum n*S + n*i,  avg S + i,  min i,  max (n-1)*n + i
// (integers below 2^24: exact in float32 whatever the order of additions, so compared exactly).
// For products rank r holds 2 at elements where i % n == r and -1 elsewhere: the product is
// 2 * (-1)^(n-1) everywhere, and a rank missing or counted twice changes it.
#pragma once

#include <cstdint>
#include <vector>

#include "dpscope/comm/types.hpp"

namespace dpscope::test {

inline constexpr int64_t kCounts[] = {0, 1, 13, 1000};
inline constexpr int64_t kLargeCount = (int64_t{1} << 18) + 3;
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct, ReduceOp::kMin,
                                    ReduceOp::kMax};

inline float input(ReduceOp op, int rank, int n, int64_t i) {
  if (op == ReduceOp::kProduct) return i % n == rank ? 2.0f : -1.0f;
  return static_cast<float>(rank * n + i);
}

inline std::vector<float> inputs(ReduceOp op, int rank, int n, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = input(op, rank, n, i);
  return v;
}

inline float expected(ReduceOp op, int n, int64_t i) {
  const int64_t s = static_cast<int64_t>(n) * (n - 1) / 2;
  switch (op) {
    case ReduceOp::kSum: return static_cast<float>(n * s + n * i);
    case ReduceOp::kAvg: return static_cast<float>(s + i);
    case ReduceOp::kProduct: return n % 2 == 1 ? 2.0f : -2.0f;
    case ReduceOp::kMin: return static_cast<float>(i);
    case ReduceOp::kMax: return static_cast<float>((n - 1) * n + i);
  }
  return 0.0f;
}

inline std::vector<float> expecteds(ReduceOp op, int n, int64_t first, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) v[static_cast<size_t>(k)] = expected(op, n, first + k);
  return v;
}

// Every rank's inputs back to back: what all_gather and gather collect.
inline std::vector<float> concatenated(int n, int64_t count) {
  std::vector<float> all;
  for (int r = 0; r < n; ++r)
    for (float v : inputs(ReduceOp::kSum, r, n, count)) all.push_back(v);
  return all;
}

}  // namespace dpscope::test
