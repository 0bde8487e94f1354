// The collective benchmark behind `dpscope bench` (nccl-tests' harness) on the sim backend, or on
// the cuda and nccl backends (real GPUs: device times measured with CUDA events).
//
// For each size from min_bytes to max_bytes (times `factor`) every rank runs `warmup` collectives,
// then nccl-tests' two columns in its order: out of place (separate send and receive buffers) and
// in place (one buffer, nccl-tests' layout: collectives.hpp). For each, every rank fills its send
// buffer with values whose result is exactly predictable (rank r, element i holds r + 1 + i % 7;
// for prod 1 + (r + i) % 2), runs `iterations` collectives with all streams aligned before each
// one, and reports the simulated time of one collective (cuda, nccl:
// the measured device time, mean over the timed iterations, from the earliest rank's start to the
// latest rank's end), algbw and
// busbw (nccl-tests' definitions, its doc/PERFORMANCE.md), the measured wall time per collective (host,
// from the first rank's call until every rank has returned), and #wrong from an exact check of
// the last iteration (out of place, the send buffer must also be left as it was). Timing-only runs
// use meta tensors: same times, no data, nothing to check.
//
// --backend mpi (under mpirun: this process is one rank, rank 0 reports the rows): the time is the
// slowest rank's host time between barriers; `algorithm` ring, tree or naive runs our schedules over
// MPI point-to-point (the sim's, bit-identical), auto MPI's own collectives. Before the first size
// the ranks check that they run the same options (a rank with another -e would run one size more and
// wait for peers that have finished): a difference fails every rank, naming the flag.
//
// Thread semantics: run_collective_bench() blocks; `on_row` is called from one rank thread,
// rows in order.
//
// Not part of libdpscope: the target dpscope_bench (runtime/bench/) sits above the library, linked
// by the `dpscope bench` command and by the tests. Each collective is a descriptor
// (runtime/bench/collectives.hpp) run by one harness (runtime/bench/collective_bench.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpscope/comm/nccl_cost_model.hpp"
#include "dpscope/comm/types.hpp"
#include "dpscope/core/tensor.hpp"

namespace dpscope {

// nccl-tests' two column groups: out of place (separate send and receive buffers) and in place
// (one buffer; its src/common.cu startColl: the send buffer is recvbuff + sendInplaceOffset * rank,
// the receive buffer recvbuff + recvInplaceOffset * rank).
enum class Placement : uint8_t { kOutOfPlace, kInPlace };
const char* to_string(Placement placement);  // "out-of-place", "in-place"

struct BenchOptions {
  OpType collective = OpType::kAllReduce;  // all_reduce, all_gather, reduce_scatter, broadcast, reduce,
                                           // alltoall
  std::string backend = "sim";             // sim, cuda (logical GPUs), nccl (one rank per GPU), mpi
  int devices = 4;                         // GPUs per node (nccl-tests' threads -t x GPUs each -g)
  // GPUs one host thread drives (nccl-tests' -g). That thread launches the collective's kernel on
  // its GPUs one after another inside a group, so on the sim backend the k-th GPU of a thread starts
  // k of the preset's kernel launches after the first (comm/nccl_fidelity.hpp,
  // grouped_launch_offset_ns) and every time includes that wait. 1: every GPU has a thread (or
  // process) of its own and they start together, as on real GPUs (cuda, nccl: a rank thread per
  // GPU), under mpirun and across nodes.
  int gpus_per_thread = 1;
  // nccl-tests' -m: collectives a group aggregates. NCCL runs a group's collectives in one launch
  // (its user guide, "Aggregated Operations"), so a thread's late starts are paid once per
  // agg_iters collectives: each starts 1/agg_iters of its late start late, the mean per collective
  // nccl-tests reports.
  int agg_iters = 1;
  // Nodes of `devices` GPUs joined by the preset's [cluster] network; > 1 is timed by the cost model
  // alone (timing-only: NCCL's collectives across nodes, comm/nccl_cost_model.hpp).
  int nodes = 1;
  std::optional<NcclProto> proto;  // NCCL_PROTO (sim): nullopt = the cost model's tuner
  // NCCL_ALGO=NVLS (sim, all_reduce, `--algo nvls`): the cost model forced to NVLS (NVLS-tree across
  // nodes) while `algorithm`'s schedule moves the data; nullopt = as `algorithm` says.
  std::optional<NcclAlgo> nccl_algo;
  std::string preset = "h100-sxm";
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 128ull << 20;
  uint64_t factor = 2;      // -f: each size is the last times this ...
  uint64_t step_bytes = 0;  // ... or, with -i (> 0), the last plus this many bytes
  int cycles = 1;           // -N: the whole sweep this many times, each cycle's rows reported
  Algorithm algorithm = Algorithm::kDefault;
  // -d: the element type. The collectives move float32 data; every other type of nccl-tests' is
  // timed from its bytes on meta buffers (timing_only, sim backend), its count bytes / its size.
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  int slices = 0;  // 0: by size
  // One column group only; nullopt: both, nccl-tests' out-of-place then in-place (what `dpscope
  // bench` runs unless --placement says otherwise). The library's default is the in-place group
  // alone, one collective per iteration, as run_collective_bench() ran before it had two groups
  // (the visualizer's fixtures trace that).
  std::optional<Placement> only = Placement::kInPlace;
  bool timing_only = false;
  bool check = true;            // -c 0: no exact check of the results (#wrong is -1)
  int iterations = 20;          // nccl-tests' -n default
  int warmup = 5;               // nccl-tests' -w default
  std::filesystem::path trace;  // empty: no trace
  // --timeout: how long a collective (and, under mpirun, the ranks' meeting) may wait for the other
  // ranks; 0: 10 min (mpi: gloo's 30 min).
  Milliseconds timeout{0};
};

// One of nccl-tests' two column groups of a row: time, algbw, busbw, #wrong.
struct BenchColumn {
  // False where this form did not run (bench_runs): nothing to print.
  bool ran = true;
  double sim_us = 0.0;  // simulated time of one collective (cuda, nccl: measured on the devices)
  double algbw_gbps = 0.0;
  double busbw_gbps = 0.0;
  double wall_us = 0.0;  // measured, mean over iterations
  int64_t wrong = -1;    // -1: not checked (timing-only, -c 0)
};

struct BenchRow {
  uint64_t bytes = 0;  // nccl-tests' size column (all ranks' data for all_gather/reduce_scatter)
  int64_t count = 0;   // nccl-tests' count column: the count the collective is called with, one
                       // rank's block for all_gather, reduce_scatter and alltoall (src/common.cu
                       // prints the test's paramcount), the whole size otherwise
  // nccl-tests' out-of-place and in-place columns (its src/common.cu BenchTime, run in that order).
  // Out of place, #wrong also counts input elements the collective changed (the send buffer must
  // be left intact).
  BenchColumn out_of_place;
  BenchColumn in_place;
  std::string algo;  // sim: the cost model's algorithm/protocol ("ring/LL"); empty otherwise
};

// Parses "all_reduce" (also "allreduce", "all-reduce"), "all_gather", "reduce_scatter",
// "broadcast", "reduce"; throws kUsage otherwise.
OpType parse_bench_collective(std::string_view text);
// nccl-tests' element types in its order (src/common.cu's test_typenames, without the fp8 types):
// int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, what -d all runs.
inline constexpr DType kBenchDatatypes[] = {DType::kI8,  DType::kU8,  DType::kI32, DType::kU32, DType::kI64,
                                            DType::kU64, DType::kF16, DType::kF32, DType::kF64, DType::kBF16};
// nccl-tests' name of `dtype`, as its type column prints it: "half", "float", "double", "bfloat16",
// "int8", ...
const char* bench_datatype_name(DType dtype);
// Whether collective `op` takes a reduce op (-o; its descriptor's): all_reduce, reduce, reduce_scatter.
bool bench_reduces(OpType op);
// Whether collective `op` has a root rank (-r; its descriptor's): broadcast, reduce.
bool bench_rooted(OpType op);
// Parses -d: nccl-tests' names, or PyTorch's ("float32", "float16", "float64"); throws kUsage
// listing them otherwise ("all" is the command's to expand: kBenchDatatypes).
DType parse_bench_datatype(std::string_view text);
// Parses a byte count: digits with an optional K, M, G suffix (binary: 1K = 1024); kUsage on junk.
uint64_t parse_byte_size(std::string_view text, std::string_view flag);

// The sizes of the rows, in order: min_bytes, then times factor (or plus step_bytes) up to
// max_bytes, the whole sweep `cycles` times.
std::vector<uint64_t> bench_sizes(const BenchOptions& options);
// The most rows one command runs (sizes times -N cycles, times the types and ops of -d all and
// -o all): past it a sweep would not end in reasonable time.
inline constexpr uint64_t kMaxBenchRows = 100'000;

// Whether `options`' backend runs `placement`'s form of the collective: all but --backend mpi
// with our schedules (--algo ring|tree|naive) out of place for all_reduce, broadcast and reduce.
// Where it does not, that column group of every row does not run and prints "-".
bool bench_offers(const BenchOptions& options, Placement placement);
// bench_offers, and not left out by `options.only` (--placement).
bool bench_runs(const BenchOptions& options, Placement placement);
// Parses --placement: "both" (nullopt), "out-of-place", "in-place"; throws kUsage otherwise.
std::optional<Placement> parse_bench_placement(std::string_view text);

// How late the GPU of `rank` starts each collective after its thread's first GPU: nccl-tests' -g
// GPUs launched in turn (grouped_launch_offset_ns, comm/nccl_fidelity.hpp), paid once per -m
// agg_iters collectives; 0 where every GPU has a thread of its own.
int64_t bench_late_start_ns(const BenchOptions& options, const HardwarePreset& preset, int rank);

// Throws kUsage naming the flag for inconsistent options (kInvalidArgument for an unknown preset
// or more devices than its topology holds).
void validate_bench_options(const BenchOptions& options);

// Validates `options`, then runs the benchmark.
std::vector<BenchRow> run_collective_bench(const BenchOptions& options,
                                           const std::function<void(const BenchRow&)>& on_row = {});

}  // namespace dpscope
