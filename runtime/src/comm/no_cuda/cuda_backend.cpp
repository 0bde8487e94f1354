// A build without CUDA has no GPU backends: the registry knows `cuda` and `nccl` by name only and
// refuses them as "not built in this version" (backend_registry.cpp).
#include "../api/builtin_backends.hpp"

namespace dpscope::detail {

void add_cuda_backends(const AddBackend&) {}

}  // namespace dpscope::detail
