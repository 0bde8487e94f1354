// The built-in backends' registration hooks, one per backend folder and all of one shape: each
// calls add(name, factory) for the backends its folder built. A stand-in folder (no_cuda/,
// no_mpi/) adds nothing, so the registry knows those names only as "not built in this version".
// The registry (backend_registry.cpp) runs every hook of kBuiltinBackends once, on first use, in
// order. Adding a backend touches this one file: a folder with its Backend, its factory and its
// hook, and here the hook's declaration and its entry in kBuiltinBackends (plus the folder in the
// comm line's SUBDIRS of runtime/CMakeLists.txt when it is a new folder). The list is what links a
// backend's folder into the program: comm is a static library, whose linker drops an object file
// nothing refers to, so a backend cannot register itself from its own file alone.
#pragma once

#include <functional>
#include <string>

#include "dpscope/comm/backend_registry.hpp"

namespace dpscope::detail {

using AddBackend = std::function<void(const std::string& name, BackendFactory factory)>;

void add_sim_backends(const AddBackend& add);       // sim/: "sim"
void add_analytic_backends(const AddBackend& add);  // analytic/: "analytic" (--timing-only's)
void add_cuda_backends(const AddBackend& add);      // cuda/: "cuda" and "nccl"; no_cuda/: none
void add_mpi_backends(const AddBackend& add);       // mpi/: "mpi"; no_mpi/: none

inline constexpr void (*kBuiltinBackends[])(const AddBackend&) = {add_sim_backends, add_analytic_backends,
                                                                  add_cuda_backends, add_mpi_backends};

}  // namespace dpscope::detail
