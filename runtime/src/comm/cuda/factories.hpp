// The registry factories of the GPU backends (comm/cuda/): `cuda` in cuda_backend.cpp, `nccl` in
// nccl_backend.cpp; add_cuda_backends (cuda_backend.cpp, api/builtin_backends.hpp) registers both.
#pragma once

#include "../api/builtin_backends.hpp"
#include "../sim/sim_backend.hpp"

namespace dpscope::detail {

BackendFactory cuda_backend_factory();
BackendFactory nccl_backend_factory();

}  // namespace dpscope::detail
