// The backend registry: a name -> factory table behind a mutex, filled with the built-in backends
// on first use (a function-local static, so no static-initialisation order is involved), each
// through its folder's hook (builtin_backends.hpp).
#include "dpscope/comm/backend_registry.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "builtin_backends.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope {
namespace {

// Backends this version of dpscope knows by name but has not compiled in: asking for one is a
// build question (kUnsupported), not a typo (kInvalidArgument).
constexpr const char* kKnownNotBuilt[] = {"cuda", "nccl", "mpi", "gloo"};

struct Registry {
  std::mutex mutex;
  std::map<std::string, BackendFactory> factories;
};

void add_locked(Registry& registry, const std::string& name, BackendFactory factory) {
  DPS_CHECK(!name.empty(), ErrorKind::kInvalidArgument, "register_backend: the backend name is empty");
  DPS_CHECK(factory != nullptr, ErrorKind::kInvalidArgument, "register_backend: backend '{}' has no factory",
            name);
  DPS_CHECK(registry.factories.count(name) == 0, ErrorKind::kInvalidArgument,
            "register_backend: backend '{}' is already registered", name);
  registry.factories.emplace(name, std::move(factory));
}

Registry& registry() {
  static Registry* const instance = [] {
    auto* r = new Registry();  // never destroyed: rank threads may outlive static destruction
    const detail::AddBackend add = [r](const std::string& name, BackendFactory factory) {
      add_locked(*r, name, std::move(factory));
    };
    for (const auto hook : detail::kBuiltinBackends) hook(add);
    return r;
  }();
  return *instance;
}

std::string joined_locked(const Registry& r) {
  std::string names;
  for (const auto& [name, factory] : r.factories) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  add_locked(r, name, std::move(factory));
}

bool is_backend_registered(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.factories.count(name) > 0;
}

std::vector<std::string> registered_backends() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;  // std::map keeps them sorted
}

BackendFactory find_backend(const std::string& name, const std::string& caller) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (auto it = r.factories.find(name); it != r.factories.end()) return it->second;
  const bool known = std::any_of(std::begin(kKnownNotBuilt), std::end(kKnownNotBuilt),
                                 [&](const char* k) { return name == k; });
  DPS_CHECK(!known, ErrorKind::kUnsupported,
            "{}: backend '{}' is not built in this version of dpscope (registered backends: {})", caller,
            name, joined_locked(r));
  throw Error(ErrorKind::kInvalidArgument, fmt::format("{}: unknown backend '{}' (registered backends: {})",
                                                       caller, name, joined_locked(r)));
}

}  // namespace dpscope
