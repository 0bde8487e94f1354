// run_collective_bench(): the one harness of `dpscope bench` (dpscope_bench/collective_bench.hpp),
// as in nccl-tests: options checked once, then sizes, warm-up and timed iterations, the exact check
// and the rates, the same for every collective. What differs between collectives (buffers, inputs,
// expected values, the call) is in each one's descriptor (collectives.hpp). Three drivers run it:
// rank threads (sim, cuda, nccl), one process per rank (mpi), and the cost model alone (--nodes > 1).
#include "dpscope_bench/collective_bench.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/comm/gpu_backends.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/nccl_fidelity.hpp"
#include "dpscope/comm/network.hpp"
#include "dpscope/comm/process_group.hpp"
#include "dpscope/comm/rank_agreement.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/trace/recorder.hpp"

#include "collectives.hpp"

namespace dpscope {
namespace {

using bench::Buffers;
using bench::CollectiveDescriptor;
using bench::Counts;
using bench::counts_for;
using bench::descriptor;
using bench::input_value;
using bench::make_buffers;

constexpr uint64_t kMaxDataBytes = 16ull << 30;  // host memory a data-mode run may use
constexpr int kMaxBenchSlices = 4096;            // pipeline slices per chunk
constexpr int kMaxBenchIterations = 1'000'000;   // warm-up + timed iterations per size

bool on_gpu(const BenchOptions& o) { return o.backend == "cuda" || o.backend == "nccl"; }

constexpr Placement kPlacements[] = {Placement::kOutOfPlace, Placement::kInPlace};

// The algorithm the collectives run with: --algo, else DPSCOPE_ALGO, else auto.
Algorithm effective_algorithm(const BenchOptions& o) {
  return o.algorithm != Algorithm::kDefault ? o.algorithm : algorithm_from_env();
}

}  // namespace

const char* to_string(Placement placement) {
  return placement == Placement::kInPlace ? "in-place" : "out-of-place";
}

bool bench_offers(const BenchOptions& o, Placement placement) {
  if (o.backend != "mpi" || placement == Placement::kInPlace) return true;
  // Our schedules over MPI point-to-point run in place (the mpi backend's *_into: MPI's own only).
  const bool own_schedule = effective_algorithm(o) != Algorithm::kAuto;
  const OpType op = o.collective;
  return !(own_schedule && (op == OpType::kAllReduce || op == OpType::kBroadcast || op == OpType::kReduce));
}

bool bench_runs(const BenchOptions& o, Placement placement) {
  return (!o.only || *o.only == placement) && bench_offers(o, placement);
}

std::optional<Placement> parse_bench_placement(std::string_view text) {
  if (text == "both") return std::nullopt;
  if (text == "out-of-place") return Placement::kOutOfPlace;
  if (text == "in-place") return Placement::kInPlace;
  throw Error(ErrorKind::kUsage,
              fmt::format("--placement '{}': expected both, out-of-place or in-place", text));
}

namespace {

// Fills the send buffer with input_value() (in place it is the receive buffer or a block of it;
// the rest of that buffer is zeroed, as nccl-tests' InitData memsets recvbuff first).
void fill_inputs(const BenchOptions& o, Buffers& b, int rank) {
  std::vector<float> values(static_cast<size_t>(b.send.numel()));
  for (int64_t i = 0; i < b.send.numel(); ++i) values[static_cast<size_t>(i)] = input_value(o.op, rank, i);
  if (on_gpu(o)) {
    // Device memory is filled from the host, into the buffer's own storage (views share it).
    if (b.placement == Placement::kOutOfPlace || b.recv.numel() > b.send.numel()) b.recv.fill(0.0f);
    if (b.send.numel() > 0) b.send.copy_from(Tensor::from_floats(values, b.send.shape(), Device::cpu()));
    return;
  }
  // Out of place the receive buffer is zeroed too: a collective that left it alone is caught.
  if (b.placement == Placement::kOutOfPlace || b.recv.numel() > b.send.numel()) b.recv.fill(0.0f);
  float* p = b.send.f32();
  for (int64_t i = 0; i < b.send.numel(); ++i) p[i] = values[static_cast<size_t>(i)];
}

std::vector<float> host_values(const BenchOptions& o, const Tensor& t) {
  if (on_gpu(o)) return t.to_vector();  // device memory is checked through a copy to the host
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

// Elements of this rank's receive buffer that differ from the expected result; out of place also
// the elements of its send buffer the collective changed (NCCL leaves sendbuff intact).
int64_t count_wrong(const BenchOptions& o, const CollectiveDescriptor& d, const Buffers& b, int rank, int n) {
  int64_t wrong = 0;
  const std::vector<float> recv = host_values(o, b.recv);
  for (int64_t i = 0; i < b.recv.numel(); ++i)
    wrong += recv[static_cast<size_t>(i)] != d.expected(o, b, rank, n, i) ? 1 : 0;
  if (b.placement == Placement::kOutOfPlace) {
    const std::vector<float> send = host_values(o, b.send);
    for (int64_t i = 0; i < b.send.numel(); ++i)
      wrong += send[static_cast<size_t>(i)] != input_value(o.op, rank, i) ? 1 : 0;
  }
  return wrong;
}

// A column's rates for one collective of `time_ns` over `n` ranks (nccl-tests' algbw and busbw,
// its doc/PERFORMANCE.md) on `bytes`.
BenchColumn make_column(const CollectiveDescriptor& d, uint64_t bytes, double time_ns, int n) {
  BenchColumn c;
  c.sim_us = time_ns / 1e3;
  c.algbw_gbps = time_ns > 0 ? static_cast<double>(bytes) / time_ns : 0.0;
  c.busbw_gbps = c.algbw_gbps * bus_bandwidth_factor(d.op, n);
  return c;
}

// A row's size columns (both columns still to fill).
BenchRow make_row(Counts c, DType dtype) {
  BenchRow r;
  r.bytes = static_cast<uint64_t>(c.total) * element_size(dtype);
  r.count = c.param;
  return r;
}

BenchColumn& column_of(BenchRow& r, Placement p) {
  return p == Placement::kOutOfPlace ? r.out_of_place : r.in_place;
}

}  // namespace

std::vector<uint64_t> bench_sizes(const BenchOptions& o) {
  std::vector<uint64_t> sweep;
  for (uint64_t s = o.min_bytes; s <= o.max_bytes;) {
    sweep.push_back(s);
    if (o.step_bytes > 0) {
      if (s > o.max_bytes - o.step_bytes) break;
      s += o.step_bytes;
    } else {
      if (s == 0 || s > o.max_bytes / o.factor) break;
      s *= o.factor;
    }
  }
  std::vector<uint64_t> sizes;
  for (int cycle = 0; cycle < o.cycles; ++cycle) sizes.insert(sizes.end(), sweep.begin(), sweep.end());
  return sizes;
}

void validate_bench_options(const BenchOptions& o) {
  DPS_CHECK(o.backend == "sim" || o.backend == "cuda" || o.backend == "nccl" || o.backend == "mpi",
            ErrorKind::kUsage, "--backend {}: expected sim, cuda, nccl or mpi", o.backend);
  if (o.backend == "mpi") {
    // One process per rank under mpirun: checked here, before anything runs.
    DPS_CHECK(mpi::built(), ErrorKind::kUsage, "--backend mpi is not built in this version (no MPI found)");
    mpi::require_mpirun_launch(o.devices, "bench");
    DPS_CHECK(!o.timing_only && o.trace.empty(), ErrorKind::kUsage,
              "--backend mpi measures real processes: --timing-only and --trace are for --backend sim");
  }
  // All-gather and reduce-scatter are rings (every backend's schedules; refused here, in one line,
  // rather than by each rank once it runs).
  const CollectiveDescriptor& d = descriptor(o.collective);
  DPS_CHECK(!d.ring_only || o.algorithm == Algorithm::kDefault || o.algorithm == Algorithm::kAuto ||
                o.algorithm == Algorithm::kRing,
            ErrorKind::kUsage, "--algo {}: {} runs ring or auto only", to_string(o.algorithm),
            api_name(o.collective));
  DPS_CHECK(!d.one_schedule || o.algorithm == Algorithm::kDefault || o.algorithm == Algorithm::kAuto,
            ErrorKind::kUsage, "--algo {}: {} has one schedule (pairwise exchange): auto only",
            to_string(o.algorithm), api_name(o.collective));
  DPS_CHECK(!d.one_schedule || !o.proto || *o.proto == NcclProto::kSimple, ErrorKind::kUsage,
            "--proto {}: {} runs as NCCL point-to-point sends, Simple only",
            o.proto ? to_string(*o.proto) : "", api_name(o.collective));
  DPS_CHECK(bench_runs(o, Placement::kOutOfPlace) || bench_runs(o, Placement::kInPlace), ErrorKind::kUsage,
            "--placement out-of-place: --backend mpi runs our {} schedule in place only (MPI's own "
            "collectives, --algo auto, run both)",
            to_string(effective_algorithm(o)));
  DPS_CHECK(o.devices >= 1, ErrorKind::kUsage, "--devices must be at least 1, got {}", o.devices);
  DPS_CHECK(o.gpus_per_thread >= 1 && o.devices % o.gpus_per_thread == 0, ErrorKind::kUsage,
            "{} GPUs per thread do not divide {} GPUs into threads", o.gpus_per_thread, o.devices);
  DPS_CHECK(o.agg_iters >= 1 && o.agg_iters <= kMaxBenchIterations, ErrorKind::kUsage,
            "-m must be from 1 to {}, got {}", kMaxBenchIterations, o.agg_iters);
  DPS_CHECK(o.gpus_per_thread == 1 || (o.backend == "sim" && o.nodes == 1), ErrorKind::kUsage,
            "{} GPUs per thread: only the sim backend on one node models a thread that launches on "
            "several GPUs",
            o.gpus_per_thread);
  // One machine's GPUs (a server holds up to 16). The simulated machine's cost grows faster than the
  // square of its GPUs: --preset t4 --devices 512 took 39 s for one size, 1024 did not end in a minute,
  // 2147483647 died of a raw "vector::_M_default_append". More GPUs are more nodes (--nodes).
  constexpr int kMaxDevicesPerMachine = 64;
  DPS_CHECK(o.devices <= kMaxDevicesPerMachine, ErrorKind::kUsage,
            "--devices {}: at most {} GPUs in one machine; more are nodes: --devices 8 --nodes N with a "
            "preset that has a [cluster] table (a100-sxm, h100-sxm, h200)",
            o.devices, kMaxDevicesPerMachine);
  DPS_CHECK(o.nodes >= 1 && o.nodes <= 65536, ErrorKind::kUsage, "--nodes must be from 1 to 65536, got {}",
            o.nodes);
  {
    // A preset with a [cluster] describes nodes of a fixed size: more GPUs are more nodes, never a
    // larger switch (`-g 16` used to model one 16-port NVSwitch silently).
    const HardwarePreset hw = find_preset(o.preset);
    const int per_node = hw.cluster.gpus_per_node;
    DPS_CHECK(per_node == 0 || o.devices <= per_node, ErrorKind::kUsage,
              "--devices {}: a node of preset {} holds {} GPUs; for {} GPUs use --devices {} --nodes {}",
              o.devices, o.preset, per_node, o.devices, per_node,
              (int64_t{o.devices} + per_node - 1) / per_node);  // int64: no overflow near INT_MAX
    if (o.nodes > 1) {
      DPS_CHECK(
          per_node > 0, ErrorKind::kUsage,
          "--nodes {}: preset {} describes one machine (it has no [cluster] table); use a100-sxm, h100-sxm "
          "or h200",
          o.nodes, o.preset);
      DPS_CHECK(o.backend == "sim" && o.timing_only, ErrorKind::kUsage,
                "--nodes {}: nodes are simulated without data; add --timing-only (--backend sim)", o.nodes);
      DPS_CHECK(hw.nccl.present, ErrorKind::kUsage, "--nodes {}: preset {} has no [nccl] table", o.nodes,
                o.preset);
      DPS_CHECK(o.trace.empty(), ErrorKind::kUsage,
                "--nodes {}: --trace is not written across nodes (the cost model has no per-rank events)",
                o.nodes);
    }
    if (o.nccl_algo) {
      DPS_CHECK(o.backend == "sim" && o.collective == OpType::kAllReduce, ErrorKind::kUsage,
                "--algo {}: NVLink SHARP is a simulated all_reduce's algorithm (--backend sim, all_reduce)",
                to_string(*o.nccl_algo));
      // A preset without NVLS says so here, in predict_nccl's words, before anything runs.
      const int n = o.devices * o.nodes;
      if (const std::optional<NcclFabric> fabric = nccl_fabric(hw, n, o.nodes); fabric && n > 1)
        predict_nccl(*fabric, OpType::kAllReduce, 1u << 20, {.algo = o.nccl_algo, .proto = o.proto});
      else
        throw Error(ErrorKind::kUsage, fmt::format("--algo {}: preset {} on {} GPU{} has no NVLS",
                                                   to_string(*o.nccl_algo), o.preset, n, n == 1 ? "" : "s"));
    }
    DPS_CHECK(!o.proto || (o.backend == "sim" && hw.nccl.present), ErrorKind::kUsage,
              "--proto {}: only the sim backend on a preset with an [nccl] table models NCCL's protocols",
              o.proto ? to_string(*o.proto) : "");
    // A protocol the fabric lacks (LL128 over PCIe) is refused here, in the cost model's words, before
    // the table's header or a trace is written (it was said by a rank once the run had begun).
    const int ranks = o.devices * o.nodes;
    const Algorithm algorithm = effective_algorithm(o);
    if (const std::optional<NcclFabric> fabric = nccl_fabric(hw, ranks, o.nodes);
        o.proto && fabric && ranks > 1 && algorithm != Algorithm::kNaive) {
      NcclChoice choice = nccl_choice(o.collective, algorithm, o.proto);
      if (o.nccl_algo) choice.algo = o.nccl_algo;
      predict_nccl(*fabric, o.collective, 1u << 20, choice);
    }
  }
  DPS_CHECK(!o.timing_only || !on_gpu(o), ErrorKind::kUsage,
            "--timing-only simulates without data: it is for --backend sim, not {}", o.backend);
  DPS_CHECK(o.dtype == DType::kF32 || (o.backend == "sim" && o.timing_only), ErrorKind::kUsage,
            "-d {}: the collectives move float data; {} is timed from its bytes with --timing-only "
            "(--backend sim)",
            bench_datatype_name(o.dtype), bench_datatype_name(o.dtype));
  DPS_CHECK(o.min_bytes <= o.max_bytes, ErrorKind::kUsage, "-b {} is larger than -e {}", o.min_bytes,
            o.max_bytes);
  if (o.step_bytes == 0)
    DPS_CHECK(o.factor >= 2, ErrorKind::kUsage, "-f must be at least 2, got {}", o.factor);
  DPS_CHECK(o.cycles >= 1, ErrorKind::kUsage,
            "-N must be at least 1, got {} (0, nccl-tests' endless run, is not offered)", o.cycles);
  // A sweep by a factor holds at most 64 sizes; one by a fixed step may hold billions (-i 1).
  const uint64_t sweep = o.step_bytes > 0 ? (o.max_bytes - o.min_bytes) / o.step_bytes + 1 : 64;
  DPS_CHECK(static_cast<uint64_t>(o.cycles) <= kMaxBenchRows / sweep, ErrorKind::kUsage,
            "-b {} -e {}{} -N {}: more than {} rows", o.min_bytes, o.max_bytes,
            o.step_bytes > 0 ? fmt::format(" -i {}", o.step_bytes) : fmt::format(" -f {}", o.factor),
            o.cycles, kMaxBenchRows);
  DPS_CHECK(o.iterations >= 1 && o.warmup >= 0, ErrorKind::kUsage,
            "-n must be >= 1 and -w >= 0 (got {} and {})", o.iterations, o.warmup);
  // The root is any rank of the run (every GPU of every node); a collective without one ignores -r,
  // as nccl-tests does.
  const int64_t ranks = int64_t{o.devices} * o.nodes;
  DPS_CHECK(o.root >= 0 && (!d.rooted || o.root < ranks), ErrorKind::kUsage,
            "-r {} out of range for {} ranks", o.root, ranks);
  DPS_CHECK(o.slices >= 0, ErrorKind::kUsage, "--slices must be >= 0, got {}", o.slices);
  // Past these the run cannot end in reasonable time or memory (a schedule holds an op per slice per
  // step; -n 2147483647 used to overflow warm-up + iterations and report false wrong values).
  DPS_CHECK(o.slices <= kMaxBenchSlices, ErrorKind::kUsage, "--slices {}: at most {} slices per chunk",
            o.slices, kMaxBenchSlices);
  const int total_iterations = checked_add(o.warmup, o.iterations, "-w + -n", ErrorKind::kUsage);
  DPS_CHECK(total_iterations <= kMaxBenchIterations, ErrorKind::kUsage,
            "-w {} + -n {}: at most {} iterations per size", o.warmup, o.iterations, kMaxBenchIterations);
  DPS_CHECK(d.reduces || o.op == ReduceOp::kSum, ErrorKind::kUsage, "-o {} given, but {} does not reduce",
            to_string(o.op), api_name(o.collective));
  const uint64_t data_bytes = checked_mul<uint64_t>(o.max_bytes, static_cast<uint64_t>(o.devices) * 2,
                                                    "-e * --devices", ErrorKind::kUsage);
  DPS_CHECK(o.timing_only || on_gpu(o) || data_bytes <= kMaxDataBytes, ErrorKind::kUsage,
            "-e {} on {} devices needs about {} of host memory; add --timing-only to simulate without data",
            o.max_bytes, o.devices, format_bytes(data_bytes));
  effective_algorithm(o);  // a bad DPSCOPE_ALGO is refused before any work
  const NetworkModel network(find_preset(o.preset), o.devices);  // throws if the topology is smaller
  (void)network;
  if (o.backend == "nccl") {
    // Before any GPU work: one line saying why, as init would.
    cuda::require_available("--backend nccl");
    const std::string problem = nccl_world_size_problem(o.devices, cuda::physical_device_count());
    DPS_CHECK(problem.empty(), ErrorKind::kUsage, "{}", problem);
  } else if (o.backend == "cuda") {
    cuda::require_available("--backend cuda");
  }
}

OpType parse_bench_collective(std::string_view text) {
  std::string t;
  for (char c : text)
    t.push_back(c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (t == "all_reduce" || t == "allreduce") return OpType::kAllReduce;
  if (t == "all_gather" || t == "allgather") return OpType::kAllGather;
  if (t == "reduce_scatter" || t == "reducescatter") return OpType::kReduceScatter;
  if (t == "broadcast") return OpType::kBroadcast;
  if (t == "reduce") return OpType::kReduce;
  if (t == "alltoall" || t == "all_to_all") return OpType::kAllToAll;
  throw Error(ErrorKind::kUsage, fmt::format("unknown collective '{}' (expected all_reduce, all_gather, "
                                             "reduce_scatter, broadcast, reduce or alltoall)",
                                             text));
}

bool bench_reduces(OpType op) { return descriptor(op).reduces; }
bool bench_rooted(OpType op) { return descriptor(op).rooted; }

const char* bench_datatype_name(DType dtype) {
  switch (dtype) {
    case DType::kF16: return "half";
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    default: return to_string(dtype);  // int8 ... uint64, bfloat16: the same in both
  }
}

DType parse_bench_datatype(std::string_view text) {
  for (const DType t : kBenchDatatypes)
    if (text == bench_datatype_name(t) || text == to_string(t)) return t;
  throw Error(ErrorKind::kUsage,
              fmt::format("-d '{}': expected one of nccl-tests' types: int8, uint8, int32, uint32, int64, "
                          "uint64, half, float, double, bfloat16, or all",
                          text));
}

uint64_t parse_byte_size(std::string_view text, std::string_view flag) {
  uint64_t value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, value);
  uint64_t scale = 1;
  if (ec == std::errc() && ptr + 1 == last) {
    switch (std::toupper(static_cast<unsigned char>(*ptr))) {
      case 'K':
        scale = 1ull << 10;
        ++ptr;
        break;
      case 'M':
        scale = 1ull << 20;
        ++ptr;
        break;
      case 'G':
        scale = 1ull << 30;
        ++ptr;
        break;
      default: break;
    }
  }
  DPS_CHECK(ec == std::errc() && ptr == last && ptr != first && value <= (1ull << 50) / scale,
            ErrorKind::kUsage, "{} '{}': expected a byte count like 8, 1K, 16M or 1G", flag, text);
  return value * scale;
}

namespace {

// What every rank of an mpi bench must share: every option, as the flag that sets it.
std::vector<RunSetting> bench_settings(const BenchOptions& o) {
  return {{"collective", std::string(api_name(o.collective))},
          {"-b", std::to_string(o.min_bytes)},
          {"-e", std::to_string(o.max_bytes)},
          {"-f", std::to_string(o.factor)},
          {"-i", std::to_string(o.step_bytes)},
          {"-N", std::to_string(o.cycles)},
          {"-c", o.check ? "1" : "0"},
          {"--algo", std::string(to_string(o.algorithm))},
          {"-o", std::string(to_string(o.op))},
          {"-r", std::to_string(o.root)},
          {"--slices", std::to_string(o.slices)},
          {"-n", std::to_string(o.iterations)},
          {"-w", std::to_string(o.warmup)},
          {"--timeout", o.timeout.count() > 0 ? fmt::format("{} ms", o.timeout.count()) : ""},
          {"DPSCOPE_ALGO", std::getenv("DPSCOPE_ALGO") != nullptr ? std::getenv("DPSCOPE_ALGO") : ""}};
}

std::vector<BenchRow> run_mpi_sizes(const BenchOptions& o, ProcessGroup& pg,
                                    const std::function<void(const BenchRow&)>& on_row);

// --backend mpi: this process is one rank. Each timed collective runs between two barriers; its
// time is the slowest rank's (a max all-reduce of the ranks' host times); #wrong is summed over the
// ranks. Rank 0 reports the rows.
std::vector<BenchRow> run_mpi_bench(const BenchOptions& o,
                                    const std::function<void(const BenchRow&)>& on_row) {
  const mpi::Launch launch = mpi::require_mpirun_launch(o.devices, "bench");
  std::shared_ptr<ProcessGroup> group = init_process_group(
      {.backend = "mpi", .rank = launch.rank, .world_size = launch.size, .timeout = o.timeout});
  std::vector<BenchRow> rows;
  // Every rank learns of a difference at once; after it, an error on this rank aborts the group, so
  // no peer waits for it (comm/rank_agreement.hpp).
  agree_on_settings(*group, bench_settings(o));
  run_as_rank(*group, [&] { rows = run_mpi_sizes(o, *group, on_row); });
  return rows;
}

// The sizes of run_mpi_bench on this rank's group.
std::vector<BenchRow> run_mpi_sizes(const BenchOptions& o, ProcessGroup& pg,
                                    const std::function<void(const BenchRow&)>& on_row) {
  const int n = pg.size();
  const Device& device = pg.device();
  auto across_ranks = [&](double value, ReduceOp op) {
    Tensor t = Tensor::from_floats(std::vector<float>{static_cast<float>(value)}, {1}, device);
    pg.all_reduce(t, {.op = op})->wait();
    return static_cast<double>(t.item());
  };
  const CollectiveDescriptor& d = descriptor(o.collective);
  std::vector<BenchRow> rows;
  for (const uint64_t size : bench_sizes(o)) {
    const Counts c = counts_for(d, size, n, o.dtype);
    BenchRow r = make_row(c, o.dtype);
    bool warm = false;
    for (const Placement placement : kPlacements) {
      BenchColumn& column = column_of(r, placement);
      column.ran = bench_runs(o, placement);
      if (!column.ran) continue;
      Buffers b = make_buffers(d, c, placement, pg.rank(), device, false, o.dtype);
      double seconds = 0.0;
      // Warm-up once per size, before the first column (nccl-tests warms up once per sweep).
      const int warmup = warm ? 0 : o.warmup;
      warm = true;
      for (int it = 0; it < warmup + o.iterations; ++it) {
        fill_inputs(o, b, pg.rank());
        pg.barrier()->wait();
        const auto started = std::chrono::steady_clock::now();
        d.run(o, pg, b)->wait();
        const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        const double slowest = across_ranks(mine * 1e6, ReduceOp::kMax) / 1e6;
        if (it >= warmup) seconds += slowest;
      }
      column = make_column(d, r.bytes, seconds / o.iterations * 1e9, n);
      column.wall_us = column.sim_us;
      if (o.check)
        column.wrong = static_cast<int64_t>(
            across_ranks(static_cast<double>(count_wrong(o, d, b, pg.rank(), n)), ReduceOp::kSum));
    }
    rows.push_back(r);
    if (on_row && pg.rank() == 0) on_row(r);
  }
  return rows;
}

}  // namespace

namespace {

// The cost model's algorithm/protocol for `bytes` on the simulated fabric (what the sim backend's
// schedules are timed to), or "" where the preset keeps the flow timing.
std::string model_choice(const BenchOptions& o, const HardwarePreset& hw, uint64_t bytes) {
  const int n = o.devices * o.nodes;
  const std::optional<NcclFabric> fabric = nccl_fabric(hw, n, o.nodes);
  const Algorithm algorithm = effective_algorithm(o);  // --algo, else DPSCOPE_ALGO, as the sim world
  // An empty collective runs no algorithm (NCCL discards it before choosing one).
  if (!fabric || n < 2 || algorithm == Algorithm::kNaive || bytes == 0) return "";
  NcclChoice choice = nccl_choice(o.collective, algorithm, o.proto);
  if (o.nccl_algo) choice.algo = o.nccl_algo;
  return predict_nccl(*fabric, o.collective, bytes, choice).label();
}

// --nodes > 1: every size timed by NCCL's cost model over the preset's cluster (as the analytic
// timing-only backend does), no rank threads.
std::vector<BenchRow> run_across_nodes(const BenchOptions& o, const HardwarePreset& hw,
                                       const std::function<void(const BenchRow&)>& on_row) {
  const int n = o.devices * o.nodes;
  const NcclFabric fabric = *nccl_fabric(hw, n, o.nodes);
  const Algorithm algorithm = effective_algorithm(o);
  NcclChoice choice = nccl_choice(o.collective, algorithm, o.proto);
  if (o.nccl_algo) choice.algo = o.nccl_algo;
  DPS_CHECK(algorithm != Algorithm::kNaive, ErrorKind::kUsage,
            "--algo naive is not modelled across nodes: use ring, tree or auto");
  const CollectiveDescriptor& d = descriptor(o.collective);
  std::vector<BenchRow> rows;
  for (const uint64_t size : bench_sizes(o)) {
    const Counts c = counts_for(d, size, n, o.dtype);
    BenchRow r = make_row(c, o.dtype);
    const NcclPrediction p = predict_nccl(fabric, o.collective, r.bytes, choice);
    // NCCL's cost model has one time for both forms (the data moves the same way): both columns
    // print it.
    for (const Placement placement : kPlacements) {
      BenchColumn& column = column_of(r, placement);
      column = make_column(d, r.bytes, static_cast<double>(p.time_ns), n);
      column.ran = bench_runs(o, placement);
    }
    if (r.bytes > 0) r.algo = p.label();  // an empty collective runs none (model_choice)
    rows.push_back(r);
    if (on_row) on_row(r);
  }
  return rows;
}

}  // namespace

int64_t bench_late_start_ns(const BenchOptions& o, const HardwarePreset& preset, int rank) {
  return grouped_launch_offset_ns(preset, rank % o.gpus_per_thread) / o.agg_iters;
}

std::vector<BenchRow> run_collective_bench(const BenchOptions& o,
                                           const std::function<void(const BenchRow&)>& on_row) {
  validate_bench_options(o);
  if (o.backend == "mpi") return run_mpi_bench(o, on_row);
  if (o.nodes > 1) return run_across_nodes(o, find_preset(o.preset), on_row);
  const int n = o.devices;
  const CollectiveDescriptor& d = descriptor(o.collective);
  SimWorldOptions world_options{.preset = o.preset,
                                .timeout = o.timeout.count() > 0 ? o.timeout : Milliseconds(10 * 60 * 1000)};
  if (o.algorithm != Algorithm::kDefault) world_options.algorithm = o.algorithm;
  world_options.proto = o.proto;
  world_options.nccl_algo = o.nccl_algo;
  const HardwarePreset hardware = find_preset(o.preset);
  world_options.hardware = hardware;
  std::unique_ptr<TraceRecorder> recorder;
  if (on_gpu(o)) world_options.devices = cuda::make_devices({.count = n});
  if (!o.trace.empty()) {
    TraceHeader header;
    if (on_gpu(o)) header.clock = "measured";
    header.run_json = fmt::format(
        R"({{"command":"bench","collective":"{}","backend":"{}","devices":{},"preset":"{}","algo":"{}",)"
        R"("redop":"{}","timing_only":{},"min_bytes":{},"max_bytes":{},"factor":{}{}{}{}{}{}{}}})",
        api_name(o.collective), o.backend, n, o.preset, to_string(o.algorithm), to_string(o.op),
        o.timing_only, o.min_bytes, o.max_bytes, o.factor,
        o.step_bytes > 0 ? fmt::format(R"(,"step_bytes":{})", o.step_bytes) : std::string(),
        o.cycles > 1 ? fmt::format(R"(,"cycles":{})", o.cycles) : std::string(),
        o.gpus_per_thread > 1 ? fmt::format(R"(,"gpus_per_thread":{})", o.gpus_per_thread) : std::string(),
        o.nccl_algo ? fmt::format(R"(,"nccl_algo":"{}")", to_string(*o.nccl_algo)) : std::string(),
        o.only ? fmt::format(R"(,"placement":"{}")", to_string(*o.only)) : std::string(),
        o.dtype != DType::kF32 ? fmt::format(R"(,"dtype":"{}")", to_string(o.dtype)) : std::string());
    if (!on_gpu(o))
      for (int r = 0; r < n; ++r) world_options.devices.push_back(Device::sim(r, hardware));
    std::vector<int> trace_ids;
    for (const Device& device : world_options.devices) trace_ids.push_back(add_trace_device(header, device));
    add_network_links(header, hardware, trace_ids);  // the simulated machine's links, not a full mesh
    recorder = TraceRecorder::open(o.trace, header, world_options.devices);  // attaches every device
  }
  std::shared_ptr<SimWorld> world = SimWorld::create(n, std::move(world_options));

  const std::vector<uint64_t> sizes = bench_sizes(o);
  std::vector<BenchRow> rows(sizes.size());
  std::barrier sync(n);
  std::atomic<int64_t> clock_ns{0};  // latest stream time of any rank: where the next run starts
  std::vector<int64_t> start_ns(n, 0), end_ns(n, 0);
  std::atomic<int64_t> wrong{0};
  std::chrono::steady_clock::time_point started;
  const RankFunction rank_fn = [&](ProcessGroup& pg) {
    const int rank = pg.rank();
    const Device& device = pg.device();
    // When this GPU's kernel starts after its thread's first (nccl-tests' -g: threads drive GPUs
    // rank / g, each launching on its GPUs in order).
    const int64_t launch_offset_ns = bench_late_start_ns(o, hardware, rank);
    for (size_t row = 0; row < sizes.size(); ++row) {
      device.set_step(static_cast<int64_t>(row));
      const Counts c = counts_for(d, sizes[row], n, o.dtype);
      if (rank == 0) rows[row] = make_row(c, o.dtype);
      bool warm = false;
      for (const Placement placement : kPlacements) {
        if (!bench_runs(o, placement)) {
          if (rank == 0) column_of(rows[row], placement).ran = false;
          continue;
        }
        Buffers b = make_buffers(d, c, placement, rank, device, o.timing_only, o.dtype);
        // Warm-up once per size, before the first column (nccl-tests warms up once per sweep, at
        // its largest and smallest size).
        const int warmup = warm ? 0 : o.warmup;
        warm = true;
        double wall_s = 0.0;
        int64_t sim_ns = 0;
        int64_t measured_ns = 0;  // cuda, nccl: summed over the timed iterations
        for (int it = 0; it < warmup + o.iterations; ++it) {
          if (!o.timing_only) fill_inputs(o, b, rank);
          sync.arrive_and_wait();  // every rank has published its clock and filled its inputs
          const int64_t t0 = clock_ns.load();
          if (!on_gpu(o)) {  // measured clocks cannot be moved
            device.wait_until(StreamKind::kComm, t0);
            // NCCL discards an empty collective before planning a kernel (src/enqueue.cc,
            // taskAppend), so a row of no elements starts late on no GPU.
            device.wait_until(StreamKind::kCompute, t0 + (c.param > 0 ? launch_offset_ns : 0));
          }
          sync.arrive_and_wait();  // no rank reads clock_ns after this until the next round
          if (rank == 0) started = std::chrono::steady_clock::now();
          std::shared_ptr<Work> work = d.run(o, pg, b);
          work->wait();
          start_ns[rank] = work->start_ns();
          end_ns[rank] = work->end_ns();
          sync.arrive_and_wait();  // every rank is done
          if (rank == 0) {
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            if (it >= warmup) wall_s += seconds;
            const int64_t latest = *std::max_element(end_ns.begin(), end_ns.end());
            sim_ns = latest - t0;
            if (it >= warmup) measured_ns += latest - *std::min_element(start_ns.begin(), start_ns.end());
            clock_ns.store(latest);
          }
        }
        if (o.check && !o.timing_only) wrong.fetch_add(count_wrong(o, d, b, rank, n));
        sync.arrive_and_wait();
        if (rank == 0) {
          const int64_t time_ns = on_gpu(o) ? measured_ns / o.iterations : sim_ns;
          BenchColumn& column = column_of(rows[row], placement);
          column = make_column(d, rows[row].bytes, static_cast<double>(time_ns), n);
          column.wall_us = wall_s / o.iterations * 1e6;
          column.wrong = o.timing_only || !o.check ? -1 : wrong.exchange(0);
        }
      }
      if (rank == 0) {
        BenchRow& r = rows[row];
        if (!on_gpu(o)) r.algo = model_choice(o, hardware, r.bytes);
        if (recorder) recorder->flush_soon();
        if (on_row) on_row(r);
      }
      sync.arrive_and_wait();
    }
  };
  if (on_gpu(o)) {
    spawn_ranks({.backend = o.backend,
                 .store = std::make_shared<InMemoryStore>(world->timeout()),
                 .world_size = n,
                 .world = world},
                rank_fn);
  } else {
    spawn(world, rank_fn);
  }
  if (recorder) recorder->close();
  return rows;
}

}  // namespace dpscope
