// The process-group backend registry: which names init_process_group accepts, and how each one
// creates the Backend of one rank (c10d's Backend::register_backend).
//
//   register_backend("mine", [](const InitOptions& options) -> std::unique_ptr<Backend> {
//     return std::make_unique<MyBackend>(options.store, options.rank, options.world_size);
//   });
//   auto group = init_process_group({.backend = "mine", .store = store, .rank = r, .world_size = n});
//
// Built-in backends register themselves the first time the registry is used (`sim` and `analytic`;
// `cuda` and `nccl` in a build with CUDA, whatever the machine: without a GPU their init fails with one
// line; `mpi` in a build with MPI), so there is no static-initialisation order to get wrong and no
// object file a static link could drop. Names of
// backends this version knows but did not build (cuda, nccl, mpi, gloo) fail with kUnsupported; any other
// unknown name fails with kInvalidArgument listing the registered ones.
//
// The registry is the one process-wide table in the comm layer, as in c10d: a backend is a
// property of the program, not of a run. It only grows; entries are never replaced.
//
// Thread semantics: every function here is thread-safe; a factory runs on the thread of the rank
// it creates a backend for, after that rank met its peers in the store (see init_process_group).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpscope/comm/backend.hpp"

namespace dpscope {

struct InitOptions;

// Creates this rank's Backend from validated options: rank in [0, world_size), backend named,
// timeout as given (0 = the backend's default). options.store may be null (see InitOptions).
using BackendFactory = std::function<std::unique_ptr<Backend>(const InitOptions& options)>;

// Adds `name`. Throws kInvalidArgument for an empty name, an empty factory or a name already
// registered ("register_backend: backend 'sim' is already registered").
void register_backend(const std::string& name, BackendFactory factory);

bool is_backend_registered(const std::string& name);

// The registered names, sorted: {"analytic", "sim"} in a build without CUDA or MPI, {"analytic",
// "cuda", "nccl", "sim"} with CUDA.
std::vector<std::string> registered_backends();

// The factory of `name`. Throws kUnsupported for a known backend this build lacks ("init_process_group:
// backend 'nccl' is not built in this version of dpscope (registered backends: sim)") and
// kInvalidArgument for any other unregistered name. `caller` prefixes the message.
BackendFactory find_backend(const std::string& name, const std::string& caller = "init_process_group");

}  // namespace dpscope
