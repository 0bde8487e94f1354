// The first value of a float32 tensor that is not a finite number (NaN, +inf, -inf): what the
// training run's loaders check once, when they read --data, --init and a checkpoint, so that a bad
// value is named with its file and position instead of surfacing later as "loss became nan".
//
//   if (auto bad = first_non_finite(x)) throw Error(..., "x.npy: value {} is {}", bad->position, bad->value);
//
// One pass over the values (about 1 ms per 4 MiB); used by data/dataset.cpp, train/checkpoint.cpp and
// train/train_common.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dpscope/core/tensor.hpp"

namespace dpscope {

struct NonFiniteValue {
  int64_t flat_index = 0;  // in row-major order
  float value = 0.0f;      // nan, inf or -inf
  std::string position;    // "[2, 1]": the index per dimension ("[]" for a 0-d tensor)
};

// The first NaN or infinite value of `t` in row-major order; nullopt when every value is finite, or
// when `t` is not float32 or holds no data (a timing-only tensor).
std::optional<NonFiniteValue> first_non_finite(const Tensor& t);

}  // namespace dpscope
