// A build without MPI has no `mpi` backend: the registry knows the name only and refuses it as
// "not built in this version" (backend_registry.cpp); initialize() says the same.
#include "dpscope/comm/mpi_backend.hpp"
#include "../api/builtin_backends.hpp"
#include "../mpi/launch_env.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope::mpi {

bool built() { return false; }

std::optional<Launch> launch_from_environment() { return detail::launch_from_env(); }

Launch initialize() {
  throw Error(ErrorKind::kUnsupported,
              "mpi::initialize: the mpi backend is not built in this version of dpscope (configure with "
              "libopenmpi-dev installed)");
}

}  // namespace dpscope::mpi

namespace dpscope::detail {

void add_mpi_backends(const AddBackend&) {}

}  // namespace dpscope::detail
