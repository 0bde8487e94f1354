// Reading an MPI launcher's environment (mpi::launch_from_environment, comm/mpi_backend.hpp),
// shared by the mpi backend (mpi/) and builds without it (no_mpi/). No MPI call in here.
#pragma once

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "dpscope/comm/mpi_backend.hpp"

namespace dpscope::detail {

inline std::optional<int> env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return std::nullopt;
  const std::string_view s(text);
  int value = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (error != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

inline std::optional<mpi::Launch> launch_from_env() {
  for (const auto& [rank_var, size_var] :
       {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, std::pair{"PMI_RANK", "PMI_SIZE"}}) {
    const std::optional<int> rank = env_int(rank_var);
    const std::optional<int> size = env_int(size_var);
    if (rank && size && *size >= 1 && *rank >= 0 && *rank < *size) return mpi::Launch{*rank, *size};
  }
  return std::nullopt;
}

// How many processes of this job run on this machine, as the launcher says: mpirun (OpenMPI's
// OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS) or dpscope launch and torchrun
// (LOCAL_WORLD_SIZE); nothing when none does.
inline std::optional<int> local_process_count() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE"}) {
    if (const std::optional<int> count = env_int(name); count && *count >= 1) return count;
  }
  return std::nullopt;
}

}  // namespace dpscope::detail
