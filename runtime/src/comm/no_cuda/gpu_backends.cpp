// A build without CUDA has no GPU backends: the registry knows `cuda` and `nccl` by name only and
// refuses them as "not built in this version" (backend_registry.cpp).
#include "../sim_backend.hpp"

namespace dpscope::detail {

void add_gpu_backends(const std::function<void(const std::string&, BackendFactory)>&) {}

}  // namespace dpscope::detail
