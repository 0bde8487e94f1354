// spawn(): run a function once per rank, one thread each (torch.multiprocessing.spawn for `sim`).
//
//   spawn(4, [](ProcessGroup& pg) { ... }, {.preset = "h100-sxm"});
//
// Each thread calls init_process_group("sim", rank, N, {world}) and runs fn with its group; its
// device is sim:rank (the world's device `rank`, with rank set for tracing). If a rank throws, the
// world is aborted at once — peers blocked in collectives fail fast instead of hanging — and, once
// every thread has ended, spawn() rethrows the first failure as dpscope::Error of the same kind:
// "rank 2 failed: <message>". A rank that returns early makes peers still waiting for it fail.
//
// Thread semantics: spawn() blocks the calling thread until every rank thread has ended.
#pragma once

#include <functional>
#include <memory>

#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/sim_world.hpp"

namespace dpscope {

using RankFunction = std::function<void(ProcessGroup& group)>;

// Runs fn on every rank of an existing world (so the caller can attach a trace recorder to its
// devices first, or inspect them afterwards).
void spawn(const std::shared_ptr<SimWorld>& world, const RankFunction& fn);

// Creates a world of `world_size` ranks with `options`, then runs fn on every rank.
void spawn(int world_size, const RankFunction& fn, SimWorldOptions options = {});

}  // namespace dpscope
