// Raw byte access to a tensor's data for the file writers and readers (private to runtime/src/io).
#pragma once

#include <string>

#include "dpscope/core/tensor.hpp"

namespace dpscope::io_detail {

inline void* tensor_bytes(Tensor& t) {
  return t.dtype() == DType::kF32 ? static_cast<void*>(t.f32()) : static_cast<void*>(t.i64());
}
inline const void* tensor_bytes(const Tensor& t) {
  return t.dtype() == DType::kF32 ? static_cast<const void*>(t.f32()) : static_cast<const void*>(t.i64());
}

// Checks that `t` can be written to `file`; `what` names it in the message ("tensor '0.weight'").
inline void check_saveable(const Tensor& t, const std::string& file, const std::string& what) {
  DPS_CHECK(t.defined(), ErrorKind::kInvalidArgument, "{}: cannot save {}: it is an undefined tensor", file,
            what);
  DPS_CHECK(t.has_data(), ErrorKind::kUnsupported,
            "{}: cannot save {}: shape {} on {} has no data (timing-only mode)", file, what,
            shape_to_string(t.shape()), t.device().name());
}

}  // namespace dpscope::io_detail
