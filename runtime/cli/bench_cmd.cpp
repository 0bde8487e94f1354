// `dpscope bench COLLECTIVE`: an nccl-tests style table for the collectives of a backend (sim, cuda,
// nccl, or mpi under mpirun: MPI's own collectives, or with --algo ring|tree|naive our schedules).
//
//   dpscope bench all_reduce --devices 8 --preset h100-sxm -b 8 -e 128M -f 2 --algo ring
//
// One row per size: size count type redop root, then nccl-tests' out-of-place and in-place column
// groups (each: simulated time, algbw, busbw, #wrong: exact check, "N/A" with --timing-only or
// -c 0), the measured wall time per collective (mean over both groups), the cost model's
// algo/proto; then nccl-tests' footer
// (busbw averaged over both groups, as nccl-tests does). --placement runs one group only (a lesson
// that shows one collective per size); the other prints -.
// nccl-tests' flags keep their meanings and its -n 20 / -w 5 defaults: -b -e with -f (a factor) or
// -i (a fixed step), -g (GPUs one thread drives, their kernels launched in turn) with -t (threads),
// -n, -w, -c, -d (float moves data; every type of nccl-tests', and all, is timed with --timing-only),
// -o (all: each op), -r, -N (cycles of the sweep), and -a, accepted and said once (a simulated collective has
// one time, not one per rank). --devices N is dpscope's own count: N GPUs, a rank thread each, as DDP runs
// (nccl-tests' -t N -g 1). One default differs on purpose: without -b/-e the table sweeps 8 B to 128 MiB by
// x2 (nccl-tests: 32 MiB once). The harness is run_collective_bench() (dpscope_bench/collective_bench.hpp,
// runtime/bench/). Bad flags exit with code 2.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/comm/env_rendezvous.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/nccl_fidelity.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope_bench/collective_bench.hpp"

namespace dpscope::cli {
namespace {

struct BenchArgs {
  std::string collective;
  std::string backend = "sim";
  int devices = 4;          // --devices: GPUs, a rank thread each; with --nodes, GPUs per node
  int gpus = 1;             // -g: GPUs one thread drives (nccl-tests); with --nodes, GPUs per node
  int threads = 1;          // -t: threads of -g GPUs each (nccl-tests; one node)
  bool gpus_given = false;  // -g or -t given: nccl-tests' way of counting GPUs
  int nodes = 1;
  std::string proto;  // empty: the cost model's tuner
  std::string preset = "h100-sxm";
  std::string min_bytes = "8";
  std::string max_bytes = "128M";
  std::string factor = "2";
  std::string step_bytes;  // -i; empty: not given
  int cycles = 1;
  int check = 1;
  std::string datatype = "float";
  int average = 1;  // nccl-tests' -a: accepted, one number per collective here
  std::string algo = "auto";
  std::string op = "sum";
  int root = 0;
  int slices = 0;
  int iterations = 20;  // nccl-tests' defaults
  int warmup = 5;
  bool timing_only = false;
  std::string placement = "both";  // --placement
  std::string trace;
  double timeout_s = 0.0;  // 0: not given
  // nccl-tests' flags of how its host drives the GPUs, which a simulated collective has no part
  // for: accepted, so its command lines run as they are, and said once each (kHostFlags).
  int agg_iters = 1;       // -m
  int parallel_init = 0;   // -p
  int blocking = 0;        // -z
  int stream_null = 0;     // -y
  int cudagraph = 0;       // -G
  int report_cputime = 0;  // -C
};

// nccl-tests' host flags (BenchArgs): its short and long names, and what a simulated run makes of
// it. Each takes a count from 0 (-m from 1 to a million: validate_bench_options).
struct HostFlag {
  const char* flag;
  const char* name;
  int BenchArgs::*value;
  const char* note;
};
constexpr HostFlag kHostFlags[] = {
    {"-m", "--agg_iters", &BenchArgs::agg_iters,
     "NCCL runs a group's collectives in one launch, so one thread's late starts on its -g GPUs are paid "
     "once per that many collectives"},
    {"-p", "--parallel_init", &BenchArgs::parallel_init, "accepted; setting up the ranks is not timed"},
    {"-z", "--blocking", &BenchArgs::blocking,
     "accepted; each collective is waited for before the next either way"},
    {"-y", "--stream_null", &BenchArgs::stream_null,
     "accepted; every GPU runs its collectives on its comm stream"},
    {"-G", "--cudagraph", &BenchArgs::cudagraph,
     "accepted; no CUDA graph is captured: every collective is launched on its own"},
    {"-C", "--report_cputime", &BenchArgs::report_cputime,
     "accepted; the time columns are the collectives' own time (the wall column is this host's)"},
};

// nccl-tests' reduce ops in its order (src/common.cu's test_opnames), what -o all runs; its
// premulsum (NCCL's ncclRedOpCreatePreMulSum) is not offered.
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMax, ReduceOp::kMin,
                                ReduceOp::kAvg};

// `hw`: the preset a.preset names.
BenchOptions to_options(const BenchArgs& a, const HardwarePreset& hw) {
  BenchOptions o;
  o.backend = a.backend;  // checked by run_collective_bench before anything runs
  o.collective = parse_bench_collective(a.collective);
  o.nodes = a.nodes;
  DPS_CHECK(a.threads >= 1 && a.threads <= 64, ErrorKind::kUsage, "-t must be from 1 to 64 threads, got {}",
            a.threads);
  // nccl-tests runs across nodes under mpirun with a process per GPU (`mpirun -np 16 all_reduce_perf
  // -g 1`, how published multi-node tables are run): -g is then the GPUs of a node, and no thread
  // drives several of them.
  DPS_CHECK(a.threads == 1 || a.nodes == 1, ErrorKind::kUsage,
            "-t {} with --nodes {}: across nodes every GPU is a process of its own (as mpirun -np N runs "
            "nccl-tests with -g 1); give the GPUs of a node with -g",
            a.threads, a.nodes);
  o.devices = a.devices;
  if (a.gpus_given) {
    DPS_CHECK(a.gpus >= 1, ErrorKind::kUsage, "-g must be at least 1 GPU, got {}", a.gpus);
    o.devices = checked_mul(a.gpus, a.threads, "-t * -g", ErrorKind::kUsage);
    // One thread launching on its -g GPUs in turn is a host's launch mode, simulated on the sim
    // backend of one node; real GPUs (cuda, nccl) are driven by a rank thread each, mpi by processes.
    o.gpus_per_thread = a.backend == "sim" && a.nodes == 1 ? a.gpus : 1;
    // Said in the flags given (validate_bench_options names --devices, which -t x -g amounts to).
    const int per_node = hw.cluster.gpus_per_node;
    DPS_CHECK(per_node == 0 || o.devices <= per_node, ErrorKind::kUsage,
              "-t {} -g {}: {} GPUs, but a node of preset {} holds {}; across nodes use -g {} --nodes {}",
              a.threads, a.gpus, o.devices, a.preset, per_node, per_node,
              (int64_t{o.devices} + per_node - 1) / per_node);
  }
  if (!a.proto.empty()) o.proto = parse_nccl_proto(a.proto, "--proto");
  o.preset = a.preset;
  o.min_bytes = parse_byte_size(a.min_bytes, "-b");
  o.max_bytes = parse_byte_size(a.max_bytes, "-e");
  o.factor = parse_byte_size(a.factor, "-f");
  if (!a.step_bytes.empty()) {
    o.step_bytes = parse_byte_size(a.step_bytes, "-i");
    DPS_CHECK(o.step_bytes >= 1, ErrorKind::kUsage, "-i must be at least 1 byte, got {}", a.step_bytes);
  }
  o.cycles = a.cycles;
  DPS_CHECK(a.check >= 0, ErrorKind::kUsage, "-c must be 0 (no check) or a count of checks, got {}", a.check);
  o.check = a.check > 0;
  // -d all: the command runs the sweep once per type (kBenchDatatypes), the first here.
  DPS_CHECK(a.datatype != "all" || (a.timing_only && a.backend == "sim"), ErrorKind::kUsage,
            "-d all: the collectives move float data; the other types are timed from their bytes with "
            "--timing-only (--backend sim)");
  o.dtype = a.datatype == "all" ? kBenchDatatypes[0] : parse_bench_datatype(a.datatype);
  DPS_CHECK(a.average >= 0 && a.average <= 3, ErrorKind::kUsage,
            "-a must be 0 (rank 0), 1 (average), 2 (min) or 3 (max), got {}", a.average);
  try {
    // NCCL_ALGO=NVLS: NVLink SHARP times the all-reduce; no schedule of ours is that algorithm, so
    // the data moves by the ring or tree one auto picks.
    if (parse_nccl_algo(a.algo) == NcclAlgo::kNvls) {
      o.nccl_algo = NcclAlgo::kNvls;
      o.algorithm = Algorithm::kAuto;
    } else {
      o.algorithm = parse_algorithm(a.algo, "--algo");  // ring and tree: our schedules, NCCL's names
    }
  } catch (const Error& e) {
    throw Error(ErrorKind::kUsage, e.what());
  }
  try {
    o.op = a.op == "all" ? kAllOps[0] : parse_reduce_op(a.op);  // -o all: the command runs each
  } catch (const Error&) {
    throw Error(ErrorKind::kUsage, fmt::format("-o '{}': expected one of nccl-tests' ops: sum, prod, max, "
                                               "min, avg, or all",
                                               printable_line(a.op)));
  }
  if (a.op == "all") {
    DPS_CHECK(bench_reduces(o.collective), ErrorKind::kUsage, "-o all given, but {} does not reduce",
              api_name(o.collective));
    DPS_CHECK(a.backend != "mpi", ErrorKind::kUsage,
              "-o all: --backend mpi runs one reduce op per mpirun; give one of sum, prod, max, min, avg");
  }
  DPS_CHECK(a.trace.empty() || (a.op != "all" && a.datatype != "all"), ErrorKind::kUsage,
            "--trace {}: -d all and -o all run one sweep per type and op, and a trace holds one sweep; give "
            "one -d and one -o with --trace",
            printable_line(a.trace));
  o.agg_iters = a.agg_iters;
  o.root = a.root;
  o.slices = a.slices;
  o.iterations = a.iterations;
  o.warmup = a.warmup;
  o.only = parse_bench_placement(a.placement);
  o.timing_only = a.timing_only;
  o.trace = a.trace;
  if (!o.trace.empty()) {  // before the header is printed: a directory, a FIFO, a missing folder
    OutputGuard guard;
    guard.add_output("--trace", o.trace);
    guard.check();
  }
  // The same range as train's --timeout: a millisecond (the unit of every wait) to a day.
  DPS_CHECK(
      a.timeout_s == 0.0 || (std::isfinite(a.timeout_s) && a.timeout_s >= 0.001 && a.timeout_s <= 86400.0),
      ErrorKind::kUsage, "--timeout must be a number of seconds from 0.001 to 86400, got {}", a.timeout_s);
  o.timeout = Milliseconds(static_cast<int64_t>(std::llround(a.timeout_s * 1000.0)));
  return o;
}

// How the GPUs' kernels start, which is most of a small message's time when one thread drives
// several GPUs (nccl-tests' -g).
void print_launches(const BenchOptions& o, const HardwarePreset& hw) {
  if (o.devices * o.nodes < 2) return;
  if (o.nodes > 1) {
    fmt::print(
        "# launches: a process per GPU (as mpirun -np {} runs nccl-tests with -g 1): every GPU's kernel "
        "starts together\n",
        o.devices * o.nodes);
  } else if (o.backend != "sim") {
    fmt::print("# launches: a rank thread per GPU, each launching its own kernel (nccl-tests -t {} -g 1)\n",
               o.devices);
  } else if (o.gpus_per_thread == 1) {
    fmt::print(
        "# launches: a rank thread per GPU (nccl-tests -t {} -g 1): every GPU's kernel starts together\n",
        o.devices);
  } else {
    const int threads = o.devices / o.gpus_per_thread;
    const int last = o.gpus_per_thread - 1;  // a thread's last GPU
    const double late_us = static_cast<double>(grouped_launch_offset_ns(hw, last)) / 1e3;
    fmt::print(
        "# launches: {} thread{} of {} GPUs (nccl-tests -t {} -g {}): a thread launches the kernel on "
        "its GPUs in turn, {:g} us apart (the preset's kernel launch latency), so every time includes "
        "its last GPU's {:g} us late start{}; --devices {} (-t {} -g 1) gives every GPU a thread of its "
        "own\n",
        threads, threads == 1 ? "" : "s", o.gpus_per_thread, threads, o.gpus_per_thread,
        static_cast<double>(grouped_launch_offset_ns(hw, 1)) / 1e3, late_us,
        o.agg_iters > 1 ? fmt::format(", paid once per -m {} collectives: {:.2f} us each", o.agg_iters,
                                      static_cast<double>(bench_late_start_ns(o, hw, last)) / 1e3)
                        : std::string(),
        o.devices, o.devices);
  }
}

// `average`: nccl-tests' -a when the command line gave it (`average_given`), said once.
// `datatype_all`, `op_all`: -d all, -o all (one sweep per type and op).
void print_header(const BenchOptions& o, const HardwarePreset& hw, bool average_given, int average,
                  bool datatype_all, bool op_all, const std::vector<std::string>& host_notes) {
  const char* env = std::getenv("DPSCOPE_ALGO");
  const bool from_env = o.algorithm == Algorithm::kDefault && env != nullptr && *env != '\0';
  if (o.backend == "mpi") {
    // Which algorithm moves the data: ours (ring, tree, naive over MPI point-to-point) or MPI's.
    const Algorithm effective = from_env ? parse_algorithm(env, "DPSCOPE_ALGO") : o.algorithm;
    const bool ours =
        effective == Algorithm::kRing || effective == Algorithm::kTree || effective == Algorithm::kNaive;
    fmt::print("# dpscope bench {}: backend mpi, {} processes on this machine's CPUs\n",
               api_name(o.collective), o.devices);
    fmt::print("# time: the slowest rank's, measured on the host between barriers ({})\n",
               ours ? fmt::format("our {} schedule over MPI point-to-point", to_string(effective))
                    : std::string("MPI's own algorithms"));
  } else {
    // A preset's names are its file's (DPSCOPE_ASSETS: a user's own): written out
    // (base/terminal_text.hpp).
    const NetworkModel net(hw, o.devices);
    fmt::print("# dpscope bench {}: backend {}, {} x {} (preset {})\n", api_name(o.collective), o.backend,
               o.devices, printable_line(hw.name), printable_line(hw.id));
    fmt::print("# network: {}\n", printable_line(net.describe()));
    if (o.nodes > 1)
      fmt::print(
          "# nodes: {} x {} GPUs, {} {:.0f} GB/s per GPU (rail-optimized); timed by NCCL's cost model\n",
          o.nodes, o.devices, printable_line(hw.cluster.nic.kind),
          hw.cluster.nic.bandwidth_bytes_per_s / 1e9);
    print_launches(o, hw);
  }
  const std::string algo = o.nccl_algo ? "nvls (NCCL_ALGO=NVLS: NVLink SHARP's time; the data moves by the "
                                         "ring or tree schedule auto picks)"
                           : o.algorithm != Algorithm::kDefault ? to_string(o.algorithm)
                           : from_env                           ? fmt::format("{} (DPSCOPE_ALGO)", env)
                                                                : std::string("auto");
  fmt::print(
      "# algorithm: {}, slices: {}, data: {}, iterations: {} (+{} warm-up)\n", printable_line(algo),
      o.slices == 0 ? std::string("by size") : std::to_string(o.slices),
      o.timing_only ? "none (timing-only)" : (o.check ? "real, checked exactly" : "real, not checked (-c 0)"),
      o.iterations, o.warmup);
  fmt::print("# sizes: {} to {} B, {}{}\n", o.min_bytes, o.max_bytes,
             o.step_bytes > 0 ? fmt::format("+{} B a row (-i)", o.step_bytes)
                              : fmt::format("x{} a row (-f)", o.factor),
             o.cycles > 1 ? fmt::format(", the sweep {} times (-N)", o.cycles) : std::string());
  if (o.dtype != DType::kF32 || datatype_all)
    fmt::print("# -d {}: {}-byte elements, timed from their bytes (no data: --timing-only)\n",
               datatype_all ? "all" : bench_datatype_name(o.dtype),
               datatype_all ? std::string("1-, 2-, 4- and 8") : std::to_string(element_size(o.dtype)));
  if (op_all)
    fmt::print(
        "# -o all: the sweep once per op: sum, prod, max, min, avg (nccl-tests' order; its premulsum is not "
        "offered)\n");
  if (average_given)
    fmt::print("# -a {}: {}\n", average,
               o.backend == "mpi"
                   ? "each time is the slowest rank's (nccl-tests' -a 3), whatever -a asks"
                   : "each time is the whole collective's, from the earliest rank's start to the latest "
                     "rank's end: one number, whatever -a asks");
  for (const std::string& note : host_notes) fmt::print("# {}\n", note);
  for (const Placement placement : {Placement::kOutOfPlace, Placement::kInPlace})
    if (o.only && *o.only != placement)
      fmt::print("# {}: not run (--placement {}); its columns print -\n", to_string(placement),
                 to_string(*o.only));
    else if (!bench_offers(o, placement))
      fmt::print(
          "# {}: not offered: --backend mpi runs our {} schedule in place only; its columns print -\n",
          to_string(placement),
          to_string(o.algorithm != Algorithm::kDefault ? o.algorithm : parse_algorithm(env, "DPSCOPE_ALGO")));
  if (o.backend == "sim" && !o.only)
    fmt::print(
        "# out-of-place and in-place: the same schedule and cost model, so the same simulated time "
        "(docs/collectives.md)\n");
  fmt::print("#\n");
  // nccl-tests' src/common.cu header: the size columns, then out-of-place and in-place groups.
  // Each line without trailing blanks (the labels are centred over their groups).
  const auto print_line = [](const std::string& line) {
    fmt::print("{}\n", line.substr(0, line.find_last_not_of(' ') + 1));
  };
  print_line(fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>4}  {:^38}  {:^38}", "", "", "", "", "",
                         "out-of-place", "in-place"));
  const auto group = [](const char* time, const char* algbw, const char* busbw, const char* wrong) {
    return fmt::format("{:>10}  {:>8}  {:>8}  {:>6}", time, algbw, busbw, wrong);
  };
  fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>4}  {}  {}  {:>10}  {}\n", "size", "count", "type", "redop",
             "root", group("time", "algbw", "busbw", "#wrong"), group("time", "algbw", "busbw", "#wrong"),
             "wall", "algo/proto");
  print_line(fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>4}  {}  {}  {:>10}", "(B)", "(elements)", "", "",
                         "", group("(us)", "(GB/s)", "(GB/s)", ""), group("(us)", "(GB/s)", "(GB/s)", ""),
                         "(us)"));
}

// One column group of a row: time, algbw, busbw, #wrong ("-" where the form did not run).
std::string format_column(const BenchColumn& c) {
  if (!c.ran) return fmt::format("{:>10}  {:>8}  {:>8}  {:>6}", "-", "-", "-", "-");
  return fmt::format("{:>10.2f}  {:>8.2f}  {:>8.2f}  {:>6}", c.sim_us, c.algbw_gbps, c.busbw_gbps,
                     c.wrong < 0 ? std::string("N/A") : std::to_string(c.wrong));
}

// The row's measured host time per collective, over the groups that ran (dpscope's column, not
// nccl-tests': its `time` is the device's).
double row_wall_us(const BenchRow& r) {
  double sum = 0.0;
  int groups = 0;
  for (const BenchColumn* c : {&r.out_of_place, &r.in_place})
    if (c->ran) {
      sum += c->wall_us;
      ++groups;
    }
  return groups > 0 ? sum / groups : 0.0;
}

}  // namespace

void register_bench(CLI::App& app, Registration registration) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "benchmark a collective nccl-tests style on simulated GPUs");
  cmd->add_option("collective", args->collective,
                  "all_reduce, all_gather, reduce_scatter, broadcast, reduce or alltoall")
      ->required();
  cmd->add_option("--backend", args->backend,
                  "sim (simulated GPUs) | cuda (logical GPUs, our schedules) | nccl | mpi (under mpirun)")
      ->capture_default_str();
  cmd->add_option("--devices", args->devices,
                  "number of (simulated) GPUs, a rank thread each, as DDP's process per GPU (nccl-tests' "
                  "-t N -g 1); with --nodes, GPUs per node")
      ->capture_default_str();
  cmd->add_option("-g,--ngpus", args->gpus,
                  "nccl-tests' -g: GPUs one thread drives, a rank each, their kernels launched in turn "
                  "(not with --devices; neither given: --devices 4); with --nodes, GPUs per node");
  cmd->add_option("-t,--nthreads", args->threads, "nccl-tests' -t: threads of -g GPUs each (one node)")
      ->capture_default_str();
  cmd->add_option("--nodes", args->nodes,
                  "nodes of --devices (or -g) GPUs joined by the preset's [cluster] network (timing-only)")
      ->capture_default_str();
  cmd->add_option("--proto", args->proto,
                  "NCCL protocol: LL, LL128 or Simple (default: the cost model's tuner)");
  cmd->add_option("--preset", args->preset, "hardware preset (dpscope presets)")->capture_default_str();
  cmd->add_option("-b,--minbytes", args->min_bytes, "smallest size (8, 1K, 16M, 1G)")->capture_default_str();
  cmd->add_option("-e,--maxbytes", args->max_bytes, "largest size")->capture_default_str();
  cmd->add_option("-f,--stepfactor", args->factor, "multiply the size by this between rows")
      ->capture_default_str();
  cmd->add_option("-i,--stepbytes", args->step_bytes,
                  "add this many bytes between rows instead (not with -f)");
  cmd->add_option("-N,--run_cycles", args->cycles, "run the whole sweep this many times, every row printed")
      ->capture_default_str();
  cmd->add_option(
      "--algo", args->algo,
      "ring, tree, naive, auto (DPSCOPE_ALGO when not given) or nvls (all_reduce: NCCL_ALGO=NVLS)");
  cmd->add_option("-o,--op", args->op, "reduce op: sum, avg, prod, min, max or all (the sweep once per op)")
      ->capture_default_str();
  cmd->add_option("-r,--root", args->root, "root rank of broadcast/reduce")->capture_default_str();
  cmd->add_option("--slices", args->slices, "pipeline slices per chunk (0: by size, 1: not pipelined)")
      ->capture_default_str();
  cmd->add_option("-n,--iters", args->iterations, "timed iterations per size")->capture_default_str();
  cmd->add_option("-w,--warmup_iters", args->warmup, "warm-up iterations per size")->capture_default_str();
  cmd->add_option("-c,--check", args->check, "0: do not check the results; 1 or more: check them exactly")
      ->capture_default_str();
  cmd->add_option("-d,--datatype", args->datatype,
                  "element type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or "
                  "all (the sweep once per type); all but float with --timing-only (timed from its bytes)")
      ->capture_default_str();
  cmd->add_option("-a,--average", args->average,
                  "nccl-tests' 0 rank 0 | 1 avg | 2 min | 3 max: accepted; a simulated time is one number")
      ->capture_default_str();
  cmd->add_option("--placement", args->placement,
                  "both (nccl-tests' out-of-place then in-place columns), out-of-place or in-place only")
      ->capture_default_str();
  cmd->add_flag("--timing-only", args->timing_only, "no data: time and trace only (any size, any GPU count)");
  cmd->add_option("--trace", args->trace, "write a dpscope trace (JSON Lines)");
  for (const HostFlag& f : kHostFlags)
    cmd->add_option(fmt::format("{},{}", f.flag, f.name), (*args).*f.value,
                    fmt::format("nccl-tests' {}: {}", f.flag, f.note));
  cmd->add_option("-T,--timeout", args->timeout_s,
                  "seconds a collective may wait for the other ranks before failing (default 600; mpi 1800)");
  if (registration == Registration::kParseOnly) {
    cmd->callback([args] {});  // keeps what the options write into alive
    return;
  }
  cmd->callback([args, cmd] {
    DPS_CHECK(cmd->count("--timeout") == 0 || args->timeout_s != 0.0, ErrorKind::kUsage,
              "--timeout must be a number of seconds from 0.001 to 86400, got 0");
    DPS_CHECK(cmd->count("-f") == 0 || cmd->count("-i") == 0, ErrorKind::kUsage,
              "-f and -i both given: sizes grow by a factor (-f) or by a fixed step (-i), not both");
    args->gpus_given = cmd->count("-g") > 0 || cmd->count("-t") > 0;
    DPS_CHECK(!args->gpus_given || cmd->count("--devices") == 0, ErrorKind::kUsage,
              "--devices and {} both given: --devices N gives every GPU a thread of its own; -t threads "
              "of -g GPUs count them nccl-tests' way",
              cmd->count("-g") > 0 ? "-g" : "-t");
    const HardwarePreset hw = find_preset(args->preset);
    BenchOptions options = to_options(*args, hw);
    if (cmd->count("--algo") == 0) options.algorithm = Algorithm::kDefault;  // DPSCOPE_ALGO or auto
    validate_bench_options(options);
    // nccl-tests' -d all and -o all: the whole sweep of each type, and for each type of each op, in
    // turn (its RunTest loops), under one header and one footer.
    const std::vector<DType> types =
        args->datatype == "all" ? std::vector<DType>(std::begin(kBenchDatatypes), std::end(kBenchDatatypes))
                                : std::vector<DType>{options.dtype};
    const std::vector<ReduceOp> ops = args->op == "all"
                                          ? std::vector<ReduceOp>(std::begin(kAllOps), std::end(kAllOps))
                                          : std::vector<ReduceOp>{options.op};
    const uint64_t sweeps = types.size() * ops.size();
    const uint64_t sweep_rows = bench_sizes(options).size();  // at most kMaxBenchRows: validated
    DPS_CHECK(sweep_rows <= kMaxBenchRows / sweeps, ErrorKind::kUsage,
              "-d {} -o {}: {} sweeps of {} rows, more than {} rows", args->datatype, args->op, sweeps,
              sweep_rows, kMaxBenchRows);
    // Under dpscope launch (or torchrun) every copy ran the whole simulated bench and printed the
    // same table once per process, without a word; train refuses the same (train/world.cpp).
    if (const std::optional<EnvRendezvous> env = read_env_rendezvous();
        env && env->world_size > 1 && options.backend != "mpi")
      throw Error(
          ErrorKind::kUsage,
          fmt::format("this process is rank {} of {} (RANK and WORLD_SIZE are set, as dpscope launch and "
                      "torchrun do), but bench --backend {} runs all {} devices in one process: start "
                      "one process, or --backend mpi for one process per rank",
                      env->rank, env->world_size, options.backend, options.devices));
    if (options.backend == "mpi" && options.devices > 1)  // a rank of mpirun's job (checked above)
      say_why_when_terminated(mpi::launch_from_environment()->rank);
    // --backend mpi: every process is a rank; rank 0 prints the table.
    const bool speaks = options.backend != "mpi" || mpi::launch_from_environment()->rank == 0;
    std::vector<std::string> host_notes;
    for (const HostFlag& f : kHostFlags) {
      if (cmd->count(f.flag) == 0) continue;
      const int value = (*args).*f.value;
      DPS_CHECK(value >= 0, ErrorKind::kUsage, "{} must be at least 0, got {}", f.flag, value);
      host_notes.push_back(fmt::format("{} {}: {}", f.flag, value, f.note));
    }
    if (speaks)
      print_header(options, hw, cmd->count("-a") > 0, args->average, args->datatype == "all",
                   args->op == "all", host_notes);
    std::fflush(stdout);
    double busbw_sum = 0.0;
    int64_t columns = 0, wrong = 0;
    const bool rooted = bench_rooted(options.collective);
    // Its own error, if any, is the line this process prints (not the SIGTERM note).
    struct QuietOnError {
      ~QuietOnError() {
        if (std::uncaught_exceptions() > 0) keep_quiet_when_terminated();
      }
    } quiet_on_error;
    const auto print_row = [&](const BenchRow& r) {
      check_scenario_deadline();  // (a lesson's scenario only)
      fmt::print("  {:>10}  {:>12}  {:>8}  {:>6}  {:>4}  {}  {}  {:>10.1f}{}\n", r.bytes, r.count,
                 bench_datatype_name(options.dtype),
                 bench_reduces(options.collective) ? to_string(options.op) : "none",
                 rooted ? options.root : -1, format_column(r.out_of_place), format_column(r.in_place),
                 row_wall_us(r), r.algo.empty() ? std::string() : "  " + r.algo);
      std::fflush(stdout);
      // nccl-tests' footer averages busbw over every column it printed, out-of-place and in-place
      // alike (src/common.cu: BenchTime adds each one's busbw to bw[0] and counts it in bw_count).
      for (const BenchColumn* c : {&r.out_of_place, &r.in_place}) {
        if (!c->ran) continue;
        busbw_sum += c->busbw_gbps;
        wrong += std::max<int64_t>(c->wrong, 0);
        ++columns;
      }
    };
    for (const DType type : types)
      for (const ReduceOp op : ops) {
        options.dtype = type;
        options.op = op;
        run_collective_bench(options, print_row);
      }
    if (!speaks) return;
    const std::string verdict = options.timing_only ? "(not checked: timing-only)"
                                : !options.check    ? "(not checked: -c 0)"
                                : wrong == 0        ? "OK"
                                                    : "FAILED";
    fmt::print("# Wrong values         : {} {}\n", wrong, verdict);
    // nccl-tests' own footer line, for scripts that parse its output.
    fmt::print("# Out of bounds values : {} {}\n", wrong, verdict);
    fmt::print("# Avg bus bandwidth    : {:.3f}\n",
               columns > 0 ? busbw_sum / static_cast<double>(columns) : 0.0);
    std::fflush(stdout);
    DPS_CHECK(wrong == 0, ErrorKind::kInternal, "{} wrong values in the results", wrong);
  });
}

}  // namespace dpscope::cli
