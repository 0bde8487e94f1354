// env:// (comm/env_rendezvous.hpp).
#include "dpscope/comm/env_rendezvous.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/tcp_store.hpp"

namespace dpscope {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// The variable as an integer in [min, max]; `fallback` when unset.
int64_t integer(const char* name, int64_t fallback, int64_t min, int64_t max, std::string_view what) {
  const char* text = env(name);
  if (text == nullptr) return fallback;
  const std::string_view s(text);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  DPS_CHECK(error == std::errc() && end == s.data() + s.size() && value >= min && value <= max,
            ErrorKind::kUsage, "{}='{}' is not {}", name, s, what);
  return value;
}

}  // namespace

std::optional<EnvRendezvous> read_env_rendezvous() {
  const bool has_rank = env("RANK") != nullptr;
  const bool has_world = env("WORLD_SIZE") != nullptr;
  if (!has_rank && !has_world) return std::nullopt;
  DPS_CHECK(
      has_rank && has_world, ErrorKind::kUsage,
      "env:// needs both RANK and WORLD_SIZE, but only {} is set (start the processes with dpscope launch)",
      has_rank ? "RANK" : "WORLD_SIZE");
  EnvRendezvous r;
  // The bounds are in the message: WORLD_SIZE=1048577 once said "not a world size (1 or more)".
  r.world_size = static_cast<int>(integer("WORLD_SIZE", 1, 1, 1 << 20, "a world size (1 to 1048576)"));
  r.rank = static_cast<int>(integer("RANK", 0, 0, 1 << 20, "a rank (0 to WORLD_SIZE - 1)"));
  DPS_CHECK(r.rank < r.world_size, ErrorKind::kUsage, "RANK={} must be below WORLD_SIZE={}", r.rank,
            r.world_size);
  r.local_world_size = static_cast<int>(
      integer("LOCAL_WORLD_SIZE", r.world_size, 1, r.world_size, "a local world size (1 to WORLD_SIZE)"));
  r.local_rank =
      static_cast<int>(integer("LOCAL_RANK", r.rank, 0, 1 << 20, "a local rank (0 to LOCAL_WORLD_SIZE - 1)"));
  DPS_CHECK(r.local_rank < r.local_world_size, ErrorKind::kUsage,
            "LOCAL_RANK={} must be below LOCAL_WORLD_SIZE={}", r.local_rank, r.local_world_size);
  if (const char* addr = env("MASTER_ADDR")) r.master_addr = addr;
  r.master_port =
      static_cast<uint16_t>(integer("MASTER_PORT", 29500, 1, 65535, "a port number (1 to 65535)"));
  return r;
}

std::shared_ptr<Store> env_store(const EnvRendezvous& env_rendezvous, Milliseconds timeout) {
  return std::make_shared<TCPStore>(env_rendezvous.master_addr, env_rendezvous.master_port,
                                    env_rendezvous.rank == 0, timeout);
}

}  // namespace dpscope
