// env:// — torch.distributed's default init method: a process learns its place from the
// environment `dpscope launch` (or torchrun) sets, and the ranks meet in a TCPStore at
// MASTER_ADDR:MASTER_PORT that rank 0 hosts.
//
//   const std::optional<EnvRendezvous> env = read_env_rendezvous();   // nullopt: not launched
//   std::shared_ptr<Store> store = env_store(*env, Milliseconds(60000));
//   auto group = init_process_group({.backend = "nccl", .store = store, .rank = env->rank,
//                                    .world_size = env->world_size});
//
// Variables: RANK, WORLD_SIZE (required together), LOCAL_RANK and LOCAL_WORLD_SIZE (default: RANK
// and WORLD_SIZE), MASTER_ADDR (default 127.0.0.1), MASTER_PORT (default 29500, torchrun's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dpscope/comm/store.hpp"

namespace dpscope {

struct EnvRendezvous {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;
};

// The launcher's environment; nullopt when neither RANK nor WORLD_SIZE is set (not launched).
// Throws kUsage naming the variable, its value and what it must be ("RANK=4 must be below
// WORLD_SIZE=4", "MASTER_PORT='http' is not a port number (1 to 65535)"), or when only one of RANK
// and WORLD_SIZE is set.
std::optional<EnvRendezvous> read_env_rendezvous();

// The store the ranks of `env` meet in: rank 0 starts a TCPStore server on MASTER_PORT; every rank
// (rank 0 too) connects to MASTER_ADDR:MASTER_PORT within `timeout`.
std::shared_ptr<Store> env_store(const EnvRendezvous& env, Milliseconds timeout = Store::kDefaultTimeout);

}  // namespace dpscope
