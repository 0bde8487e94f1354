// spawn(): run a function once per rank, one thread each (torch.multiprocessing.spawn for `sim`).
//
//   spawn(4, [](ProcessGroup& pg) { ... }, {.preset = "h100-sxm"});
//
// Each thread calls init_process_group with an InMemoryStore that spawn() creates for its ranks,
// so the ranks meet there before fn runs; its device is sim:rank (the world's device `rank`, with
// rank set for tracing). If a rank throws, its backend is aborted at once — peers blocked in
// collectives fail fast instead of hanging — and, once every thread has ended, spawn() rethrows
// the first failure as dpscope::Error of the same kind: "rank 2 failed: <message>". A rank that
// returns early makes peers still waiting for it fail.
//
// spawn_ranks() is the same for any registered backend whose ranks are threads of one process
// (sim, cuda, nccl): the backend and its options come in InitOptions.
//
// Thread semantics: spawn() blocks the calling thread until every rank thread has ended.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/sim_world.hpp"

namespace dpscope {

using RankFunction = std::function<void(ProcessGroup& group)>;

// Runs fn on options.world_size threads; thread r calls init_process_group with `options` and
// rank r. A null options.store is replaced by a new InMemoryStore (whose timeout is
// options.timeout, if set). Throws kInvalidArgument for a world size below 1.
void spawn_ranks(InitOptions options, const RankFunction& fn);

// Runs fn on every rank of an existing world (so the caller can attach a trace recorder to its
// devices first, or inspect them afterwards); the rendezvous' timeout is the world's. `backend`:
// "sim" for a world of simulated GPUs, "cuda" or "nccl" for one from make_cuda_world().
void spawn(const std::shared_ptr<SimWorld>& world, const RankFunction& fn,
           const std::string& backend = "sim");

// Creates a world of `world_size` ranks with `options`, then runs fn on every rank.
void spawn(int world_size, const RankFunction& fn, SimWorldOptions options = {});

}  // namespace dpscope
