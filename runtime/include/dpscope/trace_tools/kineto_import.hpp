// import_kineto(): the Chrome traces torch.profiler (Kineto) writes, one per rank, as a dpscope trace,
// so a real PyTorch DDP run's profile opens in dpscope-viz and `dpscope trace stats`.
//
//   dpscope trace import rank-0.pt.trace.json run.jsonl     one trace -> one trace file
//   dpscope trace import PROFILE_DIR OUT_DIR                  N ranks -> OUT_DIR/rank-K.jsonl
//
// What maps to what (docs/pytorch-import.md): ProfilerStep#N -> step N - N0 (N0: the smallest N of
// the run); phases from DistributedDataParallel.forward, the autograd engine's first function and
// Optimizer.step; collectives (gloo:* work, NCCL kernels, c10d::* calls, record_param_comms) ->
// `collective` spans on the comm stream; the all-reduces of backward -> buckets (bytes only: a
// profile does not say which parameters a bucket holds); AccumulateGrad -> grad_ready (param -1).
// The file is parsed with simdjson, bounded in size (kMaxKinetoFileBytes); every malformed input is
// an Error(kFormat) "FILE: reason". Outputs are written atomically (base/atomic_file.hpp).
// Used by: `dpscope trace import` (cli/trace_cmd.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dpscope::trace {

// The largest Kineto file read (a trace of a few profiled steps is a few MB; simdjson needs about
// as much again to parse it).
constexpr uint64_t kMaxKinetoFileBytes = uint64_t{1} << 30;

// What one rank's conversion found.
struct KinetoRankSummary {
  std::filesystem::path source;   // the torch.profiler file
  std::filesystem::path written;  // the dpscope trace written for it
  int rank = 0;
  int world_size = 1;
  int64_t first_profiler_step = 0;  // N of its first ProfilerStep#N
  int steps = 0;                    // ProfilerStep spans
  int collectives = 0;              // collective spans written
  int bucket_assignments = 0;       // `buckets` events written
  int grad_ready = 0;               // grad_ready instants written
  uint64_t events = 0;              // event lines written (the header not counted)
};

struct KinetoImportResult {
  bool directory = false;                // OUT is a directory of rank-K.jsonl files
  std::vector<KinetoRankSummary> ranks;  // by rank
};

// The Kineto files IN stands for: IN itself when it is a file, else IN's `*.json` files sorted by
// name. Throws Error(kIo) for an unreadable IN, Error(kFormat) for a directory without any, and
// Error(kUnsupported) for a gzip-compressed trace (`*.json.gz`): gunzip it first.
std::vector<std::filesystem::path> list_kineto_files(const std::filesystem::path& in);

// Converts the traces of `in` (list_kineto_files) and writes them to `out`: one trace -> the file
// `out`; several (one per rank, as torch.profiler writes them) -> `out`/rank-K.jsonl, each header with
// its `process` entry, all ranks on one clock. Callers check `out` first (OutputGuard); this throws
// Error(kUsage) when `out` is a directory that holds rank files of another run, Error(kFormat) for a
// malformed trace ("FILE: reason") or traces that are not one run's ranks.
KinetoImportResult import_kineto(const std::filesystem::path& in, const std::filesystem::path& out);

}  // namespace dpscope::trace
