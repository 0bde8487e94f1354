// The registry factories of the GPU backends (comm/cuda/): `cuda` in cuda_backend.cpp, `nccl` in
// nccl_backend.cpp; add_gpu_backends (cuda_backend.cpp) registers both.
#pragma once

#include "../sim_backend.hpp"

namespace dpscope::detail {

BackendFactory cuda_backend_factory();
BackendFactory nccl_backend_factory();

}  // namespace dpscope::detail
