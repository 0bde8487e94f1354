// `dpscope bench`: the nccl-tests style table, its exact check, and exit code 2 for bad flags.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/analytic_collectives.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/comm/nccl_cost_model.hpp"
#include "dpscope/comm/nccl_fidelity.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope_bench/collective_bench.hpp"
#include "support/temp_files.hpp"

namespace dpscope {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int exit_code = -1;
  std::string output;
};

Result run_bench(const std::string& args, const std::string& env = "") {
  const std::string command = env + " " + std::string(DPSCOPE_CLI) + " bench " + args + " 2>&1";
  Result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.output.append(buffer, got);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The data rows of a bench table, split into columns.
std::vector<std::vector<std::string>> rows_of(const std::string& output) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream cols(line);
    std::vector<std::string> row;
    std::string col;
    while (cols >> col) row.push_back(col);
    rows.push_back(row);
  }
  return rows;
}

TEST(BenchCli, PrintsOneCheckedRowPerSizeAndTheAverageBusBandwidth) {
  const Result r = run_bench("all_reduce --devices 4 -b 1K -e 16K -f 4 -n 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("# dpscope bench all_reduce: backend sim, 4 x NVIDIA H100 SXM5 80GB"));
  EXPECT_THAT(r.output,
              HasSubstr("size         count      type   redop  root        time     algbw     busbw"
                        "  #wrong        time     algbw     busbw  #wrong        wall  algo/proto"));
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 3u) << r.output;
  const char* sizes[] = {"1024", "4096", "16384"};
  const NcclFabric h100x4 = *nccl_fabric(find_preset("h100-sxm"), 4, 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 15u);
    // The cost model's choice for the size, as NCCL_DEBUG=TUNING would name it.
    EXPECT_EQ(rows[i][14], predict_nccl(h100x4, OpType::kAllReduce, std::stoull(rows[i][0])).label());
    EXPECT_EQ(rows[i][0], sizes[i]);
    EXPECT_EQ(std::stoll(rows[i][1]), std::stoll(rows[i][0]) / 4);
    EXPECT_EQ(rows[i][2], "float");
    EXPECT_EQ(rows[i][3], "sum");
    EXPECT_EQ(rows[i][4], "-1");
    EXPECT_EQ(rows[i][8], "0") << "out-of-place #wrong";
    EXPECT_EQ(rows[i][12], "0") << "in-place #wrong";
    // busbw = algbw * 2(n-1)/n
    EXPECT_NEAR(std::stod(rows[i][7]), std::stod(rows[i][6]) * 1.5, 0.011);
    EXPECT_NEAR(std::stod(rows[i][11]), std::stod(rows[i][10]) * 1.5, 0.011);
  }
  EXPECT_THAT(r.output, HasSubstr("# Wrong values         : 0 OK"));
  EXPECT_THAT(r.output, HasSubstr("# Out of bounds values : 0 OK"));  // nccl-tests' footer
  EXPECT_THAT(r.output, HasSubstr("# Avg bus bandwidth    : "));
}

// nccl-tests' flags with its meanings: -i steps by a fixed number of bytes, -N repeats the sweep
// (each row printed again), -c 0 leaves the results unchecked, -a is accepted and said once, and
// the iterations default to nccl-tests' 20 timed after 5 warm-up.
TEST(BenchCli, NcclTestsFlagsStepRepeatSkipTheCheckAndDefaultToTwentyIterations) {
  const Result r = run_bench("all_reduce --devices 2 -b 1K -e 3K -i 1K -N 2 -c 0 -a 2 -d float");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 6u) << r.output;
  const char* sizes[] = {"1024", "2048", "3072", "1024", "2048", "3072"};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], sizes[i]);
    EXPECT_EQ(rows[i][8], "N/A") << "#wrong without a check";
    EXPECT_EQ(rows[i][12], "N/A") << "in-place #wrong without a check";
    EXPECT_EQ(rows[i][5], rows[i % 3][5]) << "a simulated cycle repeats the same time";
  }
  EXPECT_THAT(r.output, HasSubstr("iterations: 20 (+5 warm-up)"));
  EXPECT_THAT(r.output, HasSubstr("# sizes: 1024 to 3072 B, +1024 B a row (-i), the sweep 2 times (-N)"));
  EXPECT_THAT(r.output, HasSubstr("# -a 2: each time is the whole collective's"));
  EXPECT_THAT(r.output, HasSubstr("# Out of bounds values : 0 (not checked: -c 0)"));
  // Without -a the note is not printed; with the check on, every row is checked.
  const Result checked = run_bench("all_reduce --devices 2 -b 1K -e 2K -i 512 -n 1 -w 0");
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_THAT(checked.output, ::testing::Not(HasSubstr("# -a")));
  const auto checked_rows = rows_of(checked.output);
  ASSERT_EQ(checked_rows.size(), 3u) << checked.output;  // 1024, 1536, 2048
  EXPECT_EQ(checked_rows[1][0], "1536");
  for (const auto& row : checked_rows) {
    EXPECT_EQ(row[8], "0");
    EXPECT_EQ(row[12], "0");
  }
}

// The sim backend's schedule lasts exactly NCCL's cost model's time (comm/nccl_cost_model.hpp); a
// forced ring picks its best protocol, forced LL moves half the payload per line and is slower.
TEST(BenchCli, SimulatedTimeIsTheCostModelsTimeForTheForcedAlgorithmAndProtocol) {
  const NcclFabric h100x4 = *nccl_fabric(find_preset("h100-sxm"), 4, 1);
  const Result r =
      run_bench("all_reduce --devices 4 --algo ring --slices 1 -b 4M -e 4M --timing-only -n 1 -w 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u);
  const NcclPrediction ring = predict_nccl(h100x4, OpType::kAllReduce, 4u << 20, {.algo = NcclAlgo::kRing});
  EXPECT_EQ(rows[0][5], fmt::format("{:.2f}", ring.time_ns / 1e3));
  EXPECT_EQ(rows[0][8], "N/A");
  EXPECT_EQ(rows[0][14], ring.label());
  const Result ll =
      run_bench("all_reduce --devices 4 --algo ring --proto ll -b 4M -e 4M --timing-only -n 1 -w 0");
  ASSERT_EQ(ll.exit_code, 0) << ll.output;
  const NcclPrediction forced =
      predict_nccl(h100x4, OpType::kAllReduce, 4u << 20, {.algo = NcclAlgo::kRing, .proto = NcclProto::kLL});
  EXPECT_EQ(rows_of(ll.output)[0][5], fmt::format("{:.2f}", forced.time_ns / 1e3));
  EXPECT_EQ(rows_of(ll.output)[0][14], "ring/LL");
  EXPECT_GT(forced.time_ns, ring.time_ns);
}

// NCCL has no naive algorithm; the review of lesson 6 found naive priced at 2.1 us for 4 KiB on
// eight H100s, 7x below the ring, because the links' flow timing knew no launch or protocol
// latency. Each of its rounds (to the root, back from it) now pays one, as NCCL's point-to-point
// would: at small sizes the three algorithms are within a few microseconds of each other.
TEST(BenchCli, NaivePaysALaunchAndAHopPerRoundLikeNcclPointToPoint) {
  const NcclFabric h100x8 = *nccl_fabric(find_preset("h100-sxm"), 8, 1);
  auto time_us = [](const std::string& algo) {
    const Result r =
        run_bench("all_reduce --devices 8 --algo " + algo + " -b 4096 -e 4096 --timing-only -n 1 -w 0");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto rows = rows_of(r.output);
    return rows.size() == 1 ? std::stod(rows[0][5]) : -1.0;
  };
  const double naive = time_us("naive");
  const double ring = time_us("ring");
  EXPECT_GE(naive, 2 * nccl_round_latency_ns(h100x8) / 1e3) << "two rounds, each a launch and a hop";
  EXPECT_LT(std::fabs(naive - ring), 0.25 * ring) << "naive " << naive << " us, ring " << ring << " us";
  EXPECT_NEAR(nccl_round_latency_ns(h100x8) / 1e3, 6.6 + 0.6, 1e-9) << "NCCL's ring LL base + one NVLink hop";
}

// nccl-tests' -g: one thread launches the collective's kernel on its GPUs in turn, so its last GPU
// starts g - 1 kernel launches after its first. Every published table run so (the fidelity check's
// gpus_per_thread) is what `bench -g G` prints, size by size (with --algo for one that forced
// NCCL_ALGO); -t T -g 1 starts every GPU together.
TEST(BenchCli, OneThreadsGpusStartOneLaunchApartAsInTheFidelityTables) {
  int compared = 0;
  for (const MeasuredSystem& s :
       load_measured_systems(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "tests/data/nccl-tests")) {
    if (s.gpus_per_thread < 2 || s.nodes > 1) continue;
    SCOPED_TRACE(s.id);
    // A command that forces NCCL_ALGO (the H100 and H200 tables: NVLS) runs with bench's --algo.
    std::string algo;
    if (const size_t at = s.command.find("NCCL_ALGO="); at != std::string::npos)
      algo = " --algo " + s.command.substr(at + 10, s.command.find(' ', at) - at - 10);
    const FidelityResult expected = evaluate_fidelity(s);
    const Result r = run_bench(fmt::format("{} --preset {} -g {} -b {} -e {} -f 2 --timing-only -n 1 -w 0{}",
                                           api_name(s.op), s.preset, s.gpus_per_thread, s.rows.front().bytes,
                                           s.rows.back().bytes, algo));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(fmt::format("# launches: 1 thread of {} GPUs (nccl-tests -t 1 -g {})",
                                                s.gpus_per_thread, s.gpus_per_thread)));
    const auto rows = rows_of(r.output);
    ASSERT_EQ(rows.size(), expected.rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(std::stoull(rows[i][0]), expected.rows[i].bytes);
      EXPECT_NEAR(std::stod(rows[i][5]), expected.rows[i].simulated_us, 0.006) << rows[i][0] << " B";
      EXPECT_EQ(rows[i][14], expected.rows[i].choice) << rows[i][0] << " B";
    }
    ++compared;
  }
  EXPECT_GE(compared, 5)
      << "the PCIe, A100, H100, H200 and V100 tables were run with one thread driving every GPU";

  // The same GPUs, a thread each (--devices 8, -t 8 -g 1) or two threads of four: 0 or 3 launches late.
  const HardwarePreset h100 = find_preset("h100-sxm");
  const AnalyticCollectives node(h100, 8);
  const double alone_us = node.estimate({.op = OpType::kAllReduce, .count = 2}).duration_ns / 1e3;
  for (const auto& [args, late] : {std::pair{"--devices 8", 0}, std::pair{"-t 8 -g 1", 0},
                                   std::pair{"-t 2 -g 4", 3}, std::pair{"-g 8", 7}}) {
    const Result r = run_bench(fmt::format("all_reduce {} -b 8 -e 8 --timing-only -n 1 -w 0", args));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto rows = rows_of(r.output);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0][5], fmt::format("{:.2f}", alone_us + late * h100.launch_latency_ns / 1e3)) << args;
  }
  // -m 4: NCCL runs a group's four collectives in one launch, so the late starts are paid once per four.
  const Result aggregated = run_bench("all_reduce -g 8 -m 4 -b 8 -e 8 --timing-only -n 1 -w 0");
  ASSERT_EQ(aggregated.exit_code, 0) << aggregated.output;
  EXPECT_EQ(rows_of(aggregated.output)[0][5],
            fmt::format("{:.2f}",
                        alone_us + static_cast<double>(std::llround(7 * h100.launch_latency_ns) / 4) / 1e3));
  EXPECT_THAT(aggregated.output, HasSubstr("late start, paid once per -m 4 collectives: 5.86 us each;"));
  EXPECT_THAT(
      run_bench("all_reduce -t 8 -g 1 -b 8 -e 8 --timing-only -n 1 -w 0").output,
      HasSubstr(
          "# launches: a rank thread per GPU (nccl-tests -t 8 -g 1): every GPU's kernel starts together"));
  EXPECT_THAT(run_bench("all_reduce -g 8 --nodes 2 -b 8 -e 8 --timing-only").output,
              HasSubstr("# launches: a process per GPU (as mpirun -np 16 runs nccl-tests with -g 1)"));
}

// A size under one element per GPU is an empty collective, which NCCL discards before it plans a
// kernel (src/enqueue.cc, taskAppend): nothing is launched, so -g's late starts do not apply and the
// row takes no time, where published all_gather tables print well under a microsecond for it.
TEST(BenchCli, EmptyRowsLaunchNothingSoNoGpuStartsLate) {
  const Result r = run_bench("all_gather -g 8 -b 8 -e 128 -f 2 --timing-only -n 1 -w 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rows[i][0], "0");
    EXPECT_EQ(rows[i][5], "0.00") << "out of place, row " << i;
    EXPECT_EQ(rows[i][9], "0.00") << "in place, row " << i;
    EXPECT_EQ(rows[i].size(), 14u) << "no algorithm/protocol: NCCL chooses none for it";
  }
  const HardwarePreset h100 = find_preset("h100-sxm");
  EXPECT_EQ(rows[4][0], "128");
  EXPECT_GE(std::stod(rows[4][5]), 7 * h100.launch_latency_ns / 1e3)
      << "one element each: seven launches late";
  EXPECT_EQ(rows[4].at(14), "ring/LL");
  // Across nodes too, where the cost model times every row.
  const auto across = rows_of(run_bench("all_gather -g 8 --nodes 2 -b 8 -e 64 --timing-only").output);
  ASSERT_FALSE(across.empty());
  EXPECT_EQ(across[0][5], "0.00");
  EXPECT_EQ(across[0].size(), 14u);
}

// nccl-tests' flags of how its host drives the GPUs run as they are, each said once; -T is its
// timeout, --timeout's short name.
TEST(BenchCli, NcclTestsHostFlagsAreAcceptedAndSaidOnce) {
  const Result r = run_bench("all_reduce -b 8 -e 64 -f 8 -g 2 -m 4 -p 1 -z 1 -y 0 -G 2 -C 1 -T 30 -n 1 -w 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* note :
       {"# -m 4: NCCL runs a group's collectives in one launch, so one thread's late starts on its -g GPUs "
        "are "
        "paid once per that many collectives\n",
        "# -p 1: accepted; setting up the ranks is not timed\n",
        "# -z 1: accepted; each collective is waited for before the next either way\n",
        "# -y 0: accepted; every GPU runs its collectives on its comm stream\n",
        "# -G 2: accepted; no CUDA graph is captured: every collective is launched on its own\n",
        "# -C 1: accepted; the time columns are the collectives' own time (the wall column is this "
        "host's)\n"}) {
    const size_t at = r.output.find(note);
    EXPECT_NE(at, std::string::npos) << note;
    EXPECT_EQ(r.output.find(note, at + 1), std::string::npos) << "said twice: " << note;
  }
  EXPECT_EQ(rows_of(r.output).size(), 2u);
  EXPECT_THAT(run_bench("all_reduce -b 8 -e 8 -n 1 -w 0").output, Not(HasSubstr("# -m")));
}

// The preset `id` (assets/presets/ID.toml) as a user's own cluster would be written
// (docs/scaling.md): its [cluster.nic] set to `table`'s NIC figures, Simple only where they say.
std::string preset_with_nic(const std::string& id, const HardwarePreset& table) {
  std::stringstream in(
      testing::read_file(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "assets/presets" / (id + ".toml")));
  std::string out, line, section;
  while (std::getline(in, line)) {
    if (line.starts_with("[")) section = line;
    if (section == "[cluster.nic]" && line.starts_with("bandwidth_gbps"))
      line = fmt::format("bandwidth_gbps = {}", table.cluster.nic.bandwidth_bytes_per_s / 1e9);
    if (section == "[cluster.nic]" && line.starts_with("latency_us"))
      line = fmt::format("latency_us = {}", table.cluster.nic.latency_ns / 1e3);
    out += line + "\n";
    if (line == "[cluster]" && table.cluster.simple_only) out += "simple_only = true\n";
  }
  return out;
}

// Across nodes, every published table (one process per GPU) is what `bench --nodes N -g G` prints,
// size by size, on a preset whose [cluster.nic] holds the table's NIC figures: the preset's own
// for the InfiniBand clusters, a user's preset for the clouds' networks (DPSCOPE_ASSETS).
TEST(BenchCli, NodesReproduceEveryMultiNodeFidelityTable) {
  const std::filesystem::path dir = std::filesystem::path(DPSCOPE_SOURCE_DIR) / "tests/data/nccl-tests";
  const std::filesystem::path assets = testing::unique_temp_path("bench-nic-presets");
  std::filesystem::create_directories(assets / "presets");
  testing::remove_at_exit_if_passed(assets);
  std::vector<MeasuredSystem> systems = load_measured_systems(dir);
  for (MeasuredSystem& s : load_not_compared_systems(dir)) systems.push_back(std::move(s));
  int compared = 0, own_cluster = 0;
  for (const MeasuredSystem& s : systems) {
    if (s.nodes < 2) continue;
    SCOPED_TRACE(s.id);
    ASSERT_EQ(s.gpus_per_thread, 1) << "published multi-node tables run a process per GPU";
    const HardwarePreset stock = find_preset(s.preset), table = fidelity_preset(s);
    const bool own = table.cluster.nic.bandwidth_bytes_per_s == stock.cluster.nic.bandwidth_bytes_per_s &&
                     table.cluster.nic.latency_ns == stock.cluster.nic.latency_ns &&
                     !table.cluster.simple_only;
    std::string env;
    std::string preset = s.preset;
    if (!own) {
      preset = s.id;
      std::ofstream(assets / "presets" / (preset + ".toml")) << preset_with_nic(s.preset, table);
      env = "DPSCOPE_ASSETS=" + assets.string();
    }
    const FidelityResult expected = evaluate_fidelity(s);
    const Result r = run_bench(
        fmt::format("{} --preset {} -g {} --nodes {} -b {} -e {} -f 2 --timing-only", api_name(s.op), preset,
                    s.gpus_per_node, s.nodes, s.rows.front().bytes, s.rows.back().bytes),
        env);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto rows = rows_of(r.output);
    ASSERT_EQ(rows.size(), expected.rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_NEAR(std::stod(rows[i][5]), expected.rows[i].simulated_us, 0.006) << rows[i][0] << " B";
      EXPECT_EQ(rows[i][14], expected.rows[i].choice) << rows[i][0] << " B";
    }
    if (s.id == "aws-p5-2nodes") {  // docs/scaling.md quotes its 8 B row, run so
      std::ifstream in(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "docs/scaling.md");
      const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(rows[0][0], "8");
      EXPECT_THAT(
          doc, HasSubstr(fmt::format("prints {} µs ({}), the simulated 8 B row", rows[0][5], rows[0][14])));
    }
    ++compared;
    own_cluster += own ? 1 : 0;
  }
  EXPECT_GE(compared, 9) << "six multi-node tables in fidelity.md, three outside its size range";
  EXPECT_GE(own_cluster, 4) << "the Dell and NVIDIA/nccl-tests#309 InfiniBand H100 clusters";
}

// --nodes: nodes of --devices GPUs over the preset's [cluster], timed by the same model as the
// analytic timing-only backend.
TEST(BenchCli, NodesRunTheClusterThroughTheCostModel) {
  const Result r = run_bench("all_reduce --devices 8 --nodes 4 -b 1M -e 1G -f 32 --timing-only");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("# nodes: 4 x 8 GPUs, ib-ndr 50 GB/s per GPU (rail-optimized)"));
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 3u);
  const AnalyticCollectives cluster(find_preset("h100-sxm"), 32);
  const NcclFabric fabric = *nccl_fabric(find_preset("h100-sxm"), 32, 4);
  for (const auto& row : rows) {
    const uint64_t bytes = std::stoull(row[0]);
    const CollectiveEstimate e =
        cluster.estimate({.op = OpType::kAllReduce, .count = static_cast<int64_t>(bytes / 4)});
    EXPECT_EQ(row[5], fmt::format("{:.2f}", e.duration_ns / 1e3)) << bytes;
    EXPECT_EQ(row[14], predict_nccl(fabric, OpType::kAllReduce, bytes).label());
    // busbw = algbw * 2(n-1)/n with n = 32
    EXPECT_NEAR(std::stod(row[7]), std::stod(row[6]) * 62.0 / 32.0, 0.02);  // both printed to 0.01
  }
}

TEST(BenchCli, EveryCollectiveAndReduceOpPassesTheExactCheck) {
  for (const char* args :
       {"all_gather --devices 3 -b 96 -e 96K -f 32", "reduce_scatter --devices 5 -b 1K -e 64K -f 8 -o max",
        "broadcast --devices 4 -r 2 -b 1K -e 16K -f 4 --algo ring",
        "reduce --devices 3 -r 1 -o prod -b 1K -e 16K -f 4",
        "all_reduce --devices 5 -o avg -b 1K -e 64K -f 8 --algo tree",
        "all_reduce --devices 3 -o min -b 100 -e 1K -f 10 --algo naive",
        "alltoall --devices 3 -b 96 -e 96K -f 32", "all_to_all --devices 8 -b 1K -e 64K -f 8"}) {
    SCOPED_TRACE(args);
    const Result r = run_bench(std::string(args) + " -n 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const auto& row : rows_of(r.output)) {
      EXPECT_EQ(row[8], "0") << r.output;
      EXPECT_EQ(row[12], "0") << r.output;
    }
  }
}

TEST(BenchCli, AllGatherSizesCountEveryRanksShare) {
  const Result r = run_bench("all_gather --devices 4 -b 1000 -e 1000 -n 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "960");  // 60 floats per rank x 4 ranks: nccl-tests rounds each block down
                                 // to a multiple of 4 elements (all_gather.cu's ALIGN)
  EXPECT_EQ(rows[0][1], "60");   // the count all_gather is called with: one rank's block
  EXPECT_EQ(rows[0][3], "none");
}

// reduce_scatter's size is the whole send buffer, its count each rank's block of the result.
TEST(BenchCli, ReduceScatterCountIsOneRanksBlockAllReduceTheWholeBuffer) {
  const Result rs = run_bench("reduce_scatter --devices 4 -b 1000 -e 1000 -n 1");
  ASSERT_EQ(rs.exit_code, 0) << rs.output;
  ASSERT_EQ(rows_of(rs.output).size(), 1u);
  EXPECT_EQ(rows_of(rs.output)[0][0], "960");  // reduce_scatter.cu's ALIGN of 4 elements too
  EXPECT_EQ(rows_of(rs.output)[0][1], "60");
  const Result ar = run_bench("all_reduce --devices 4 -b 1000 -e 1000 -n 1");
  ASSERT_EQ(ar.exit_code, 0) << ar.output;
  ASSERT_EQ(rows_of(ar.output).size(), 1u);
  EXPECT_EQ(rows_of(ar.output)[0][0], "1000");
  EXPECT_EQ(rows_of(ar.output)[0][1], "250");
}

// nccl-tests' alltoall.cu: the size is each rank's whole send (and receive) buffer, rounded down to
// a multiple of the ranks; busbw = algbw x (n-1)/n; the time is NCCL's point-to-point cost.
TEST(BenchCli, AllToAllSizeIsEachRanksWholeBufferAndItsTimeIsPointToPoint) {
  const Result r = run_bench("alltoall --devices 4 -b 1000 -e 1000 -n 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "992");  // 250 floats rounded down to 248 = 62 per peer x 4
  EXPECT_EQ(rows[0][1], "62");   // nccl-tests' count: the block for one peer (alltoall.cu's paramcount)
  EXPECT_EQ(rows[0][3], "none");
  EXPECT_EQ(rows[0][8], "0");
  const NcclFabric h100x8 = *nccl_fabric(find_preset("h100-sxm"), 8, 1);
  const Result big = run_bench("alltoall --devices 8 -b 64M -e 64M --timing-only -n 1 -w 0");
  ASSERT_EQ(big.exit_code, 0) << big.output;
  const auto row = rows_of(big.output).at(0);
  const NcclPrediction p = predict_nccl(h100x8, OpType::kAllToAll, 64u << 20);
  EXPECT_EQ(row[5], fmt::format("{:.2f}", p.time_ns / 1e3));
  EXPECT_EQ(row[14], "p2p/Simple");
  EXPECT_NEAR(std::stod(row[7]), std::stod(row[6]) * 7.0 / 8.0, 0.02);  // busbw factor (n-1)/n
  const Result nodes = run_bench("alltoall --devices 8 --nodes 4 -b 1M -e 1M --timing-only");
  ASSERT_EQ(nodes.exit_code, 0) << nodes.output;
  const NcclFabric cluster = *nccl_fabric(find_preset("h100-sxm"), 32, 4);
  EXPECT_EQ(rows_of(nodes.output).at(0)[5],
            fmt::format("{:.2f}", predict_nccl(cluster, OpType::kAllToAll, 1u << 20).time_ns / 1e3));
}

// docs/collectives.md quotes these two runs row by row; a change to the model fails here until the
// doc says the new numbers.
TEST(BenchCli, TheAllToAllNumbersInDocsCollectivesAreTodaysRuns) {
  std::ifstream in(std::string(DPSCOPE_SOURCE_DIR) + "/docs/collectives.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Result one = run_bench("alltoall --devices 8 -b 8K -e 1G -f 32 --timing-only");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto rows = rows_of(one.output);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_THAT(doc, HasSubstr(fmt::format("8 KiB {} µs", rows[0][5])));
  EXPECT_THAT(doc, HasSubstr(fmt::format("8 MiB {} µs (busbw {} GB/s)", rows[2][5], rows[2][7])));
  EXPECT_THAT(doc, HasSubstr(fmt::format("256 MiB {} µs\n  (busbw {} GB/s", rows[3][5], rows[3][7])));
  const Result four = run_bench("alltoall --devices 8 --nodes 4 -b 8K -e 1G -f 32 --timing-only");
  ASSERT_EQ(four.exit_code, 0) << four.output;
  const auto across = rows_of(four.output);
  ASSERT_EQ(across.size(), 4u);
  EXPECT_THAT(doc, HasSubstr(fmt::format("8 KiB {} µs (3 network messages", across[0][5])));
  EXPECT_THAT(doc, HasSubstr(fmt::format("256 MiB {} µs (busbw {} GB/s)", across[3][5], across[3][7])));
}

// docs/collectives.md pastes this run's table; every line but the measured `wall` columns must be
// today's output.
TEST(BenchCli, TheOutOfPlaceTableInDocsCollectivesIsTodaysRun) {
  std::ifstream in(std::string(DPSCOPE_SOURCE_DIR) + "/docs/collectives.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string first_line = "# dpscope bench all_reduce: backend sim, 8 x";
  const size_t begin = doc.find(first_line);
  ASSERT_NE(begin, std::string::npos) << "the pasted table is gone from docs/collectives.md";
  const std::string pasted = doc.substr(begin, doc.find("```", begin) - begin);
  const Result r = run_bench("all_reduce -g 8 -b 8 -e 2M -f 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto without_wall = [](std::vector<std::vector<std::string>> rows) {
    for (auto& row : rows)
      for (const size_t wall : {13u})
        if (row.size() > wall) row[wall] = "<measured>";
    return rows;
  };
  EXPECT_EQ(without_wall(rows_of(pasted)), without_wall(rows_of(r.output)));
  auto comments = [](const std::string& text) {
    std::vector<std::string> found;
    std::stringstream text_lines(text);
    for (std::string line; std::getline(text_lines, line);)
      if (!line.empty() && line[0] == '#') found.push_back(line);
    return found;
  };
  EXPECT_EQ(comments(pasted), comments(r.output));
}

// nccl-tests' -d: each type's count is the size over its element size (all_gather: each rank's
// block rounded down to 4 elements, as for float), the time that of its bytes, the same as float's
// for the same bytes; -d all runs the sweep of every type in nccl-tests' order under one footer.
TEST(BenchCli, EveryNcclTestsDatatypeIsTimedFromItsBytes) {
  const Result all = run_bench("all_gather -g 8 --timing-only -b 1K -e 2K -d all");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_THAT(all.output, HasSubstr("# -d all: 1-, 2-, 4- and 8-byte elements, timed from their bytes"));
  const auto rows = rows_of(all.output);
  ASSERT_EQ(rows.size(), 20u) << all.output;
  const std::vector<std::pair<std::string, int>> types = {
      {"int8", 1},   {"uint8", 1}, {"int32", 4}, {"uint32", 4}, {"int64", 8},
      {"uint64", 8}, {"half", 2},  {"float", 4}, {"double", 8}, {"bfloat16", 2}};
  for (size_t t = 0; t < types.size(); ++t)
    for (size_t s = 0; s < 2; ++s) {
      const std::vector<std::string>& row = rows[t * 2 + s];
      const int64_t bytes = 1024 << s;
      SCOPED_TRACE(row[2] + " " + row[0]);
      ASSERT_GE(row.size(), 12u);
      EXPECT_EQ(row[2], types[t].first);
      EXPECT_EQ(row[0], std::to_string(bytes));
      // Each of 8 ranks' blocks: bytes / 8 / element size, a multiple of 4 elements.
      EXPECT_EQ(row[1], std::to_string(bytes / 8 / types[t].second / 4 * 4));
      EXPECT_EQ(row[5], rows[s][5]);  // the same bytes, the same time
    }
  // A size that is not a whole number of 8-byte elements: nccl-tests' count rounds down, and the
  // row is the bytes of that count.
  const Result d = run_bench("all_reduce --devices 4 --timing-only -b 12 -e 12 -d double");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  ASSERT_EQ(rows_of(d.output).size(), 1u);
  EXPECT_EQ(rows_of(d.output)[0][0], "8");
  EXPECT_EQ(rows_of(d.output)[0][1], "1");
  // Half the bytes of a float row of the same count; across nodes too; the trace names the type.
  const std::string path = testing::unique_temp_path("bench_bf16.jsonl").string();
  const Result bf16 =
      run_bench("reduce_scatter --devices 4 --timing-only -b 1K -e 1K -d bfloat16 -o avg --trace " + path);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  std::ifstream in(path);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(trace, HasSubstr(R"("dtype":"bfloat16"})"));  // the header's run
  EXPECT_THAT(trace, HasSubstr(R"("count":128,"dtype":"bfloat16","redop":"avg")"));
  const Result nodes = run_bench("all_reduce -g 8 --nodes 2 --timing-only -b 1M -e 1M -d half");
  const Result nodes_float = run_bench("all_reduce -g 8 --nodes 2 --timing-only -b 1M -e 1M");
  ASSERT_EQ(nodes.exit_code, 0) << nodes.output;
  ASSERT_EQ(rows_of(nodes.output).size(), 1u);
  EXPECT_EQ(rows_of(nodes.output)[0][1], "524288");
  EXPECT_EQ(rows_of(nodes.output)[0][5], rows_of(nodes_float.output)[0][5]);
}

// nccl-tests' -o all: the sweep once per op in its order, each checked exactly; types outer, ops
// inner, as its RunTest loops.
TEST(BenchCli, OpAllRunsEveryReduceOpInNcclTestsOrder) {
  const Result r = run_bench("all_reduce --devices 4 -b 1K -e 2K -n 2 -w 0 -o all");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("# -o all: the sweep once per op: sum, prod, max, min, avg"));
  EXPECT_THAT(r.output, HasSubstr("# Wrong values         : 0 OK"));
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 10u) << r.output;
  const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][3], ops[i / 2]);
    EXPECT_EQ(rows[i][8], "0");   // out of place, checked
    EXPECT_EQ(rows[i][12], "0");  // in place
  }
  const Result both = run_bench("reduce_scatter --devices 2 --timing-only -b 64 -e 64 -o all -d all");
  ASSERT_EQ(both.exit_code, 0) << both.output;
  const auto cases = rows_of(both.output);
  ASSERT_EQ(cases.size(), 50u);
  EXPECT_EQ(cases[0][2] + " " + cases[0][3], "int8 sum");
  EXPECT_EQ(cases[4][2] + " " + cases[4][3], "int8 avg");
  EXPECT_EQ(cases[5][2] + " " + cases[5][3], "uint8 sum");
  EXPECT_EQ(cases[49][2] + " " + cases[49][3], "bfloat16 avg");
  const std::string trace = testing::unique_temp_path("bench_all.jsonl").string();
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"all_gather -o all", "-o all given, but all_gather does not reduce"},
           {"all_reduce -o all --trace " + trace,
            "--trace " + trace +
                ": -d all and -o all run one sweep per type and op, and a trace holds one sweep; give one -d "
                "and one -o with --trace"},
           {"all_reduce -d all --timing-only --trace " + trace, "a trace holds one sweep"},
           {"all_reduce -b 8 -e 8G -i 1M --timing-only -d all -o all",
            "-d all -o all: 50 sweeps of 8192 rows, more than 100000 rows"}}) {
    SCOPED_TRACE(args);
    const Result refused = run_bench(args);
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_THAT(refused.output, HasSubstr(message));
  }
  EXPECT_FALSE(std::filesystem::exists(trace));
}

TEST(BenchCli, WritesATrace) {
  const std::string path = testing::unique_temp_path("bench_trace.jsonl").string();
  const Result r = run_bench("all_reduce --devices 2 -b 1K -e 1K -n 1 -w 0 --trace " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  EXPECT_THAT(header, HasSubstr(R"("run":{"command":"bench","collective":"all_reduce")"));
  std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(rest, HasSubstr(R"("cat":"collective")"));
  EXPECT_THAT(rest, HasSubstr(R"("type":"transfer")"));
}

TEST(BenchCli, BadFlagsExitWithCodeTwo) {
  struct Case {
    const char* args;
    const char* message;
  };
  for (const Case& c :
       {Case{"all_reduce -b 1X", "-b '1X': expected a byte count like 8, 1K, 16M or 1G"},
        Case{"all_reduce -b 1M -e 1K", "-b 1048576 is larger than -e 1024"},
        Case{"all_reduce --devices 0", "--devices must be at least 1, got 0"},
        Case{"all_reduce --algo hypercube", "--algo: unknown algorithm 'hypercube'"},
        Case{"all_reduce --backend gloo", "--backend gloo: expected sim, cuda, nccl or mpi"},
        Case{"alltoallv",
             "unknown collective 'alltoallv' (expected all_reduce, all_gather, reduce_scatter, "
             "broadcast, reduce or alltoall)"},
        Case{"alltoall --algo ring",
             "--algo ring: all_to_all has one schedule (pairwise exchange): auto only"},
        Case{"alltoall --proto LL --timing-only",
             "--proto LL: all_to_all runs as NCCL point-to-point sends, Simple only"},
        Case{"alltoall -o max", "-o max given, but all_to_all does not reduce"},
        Case{"broadcast -o max", "-o max given, but broadcast does not reduce"},
        Case{"all_reduce -f 1", "-f must be at least 2, got 1"},
        Case{"all_reduce -o median",
             "-o 'median': expected one of nccl-tests' ops: sum, prod, max, min, avg, or all"},
        Case{"all_reduce --devices 9 --preset v100-sxm2", "holds 8 GPUs; 9 requested"},
        Case{"all_reduce --devices 8 -e 2G", "add --timing-only"},
        Case{"all_reduce --devices 16",
             "--devices 16: a node of preset h100-sxm holds 8 GPUs; for 16 GPUs use --devices 8 "
             "--nodes 2"},
        Case{"all_reduce --devices 8 --nodes 2",
             "--nodes 2: nodes are simulated without data; add --timing-only (--backend sim)"},
        Case{"all_reduce --devices 8 --nodes 2 --timing-only --preset v100-sxm2",
             "--nodes 2: preset v100-sxm2 describes one machine (it has no [cluster] table)"},
        Case{"all_reduce --nodes 0", "--nodes must be from 1 to 65536, got 0"},
        Case{"all_reduce -t 0", "-t must be from 1 to 64 threads, got 0"},
        Case{"all_reduce -t 2 -g 8",
             "-t 2 -g 8: 16 GPUs, but a node of preset h100-sxm holds 8; across nodes use -g 8 --nodes 2"},
        Case{"all_reduce -g 0", "-g must be at least 1 GPU, got 0"},
        Case{"all_reduce -m 0", "-m must be from 1 to 1000000, got 0"},
        Case{"all_gather --algo nvls --timing-only",
             "--algo nvls: NVLink SHARP is a simulated all_reduce's algorithm (--backend sim, all_reduce)"},
        Case{"all_reduce --algo nvls --preset a100-sxm --timing-only",
             "nvls is not available for all_reduce on this fabric (4 GPUs, 1 node)"},
        Case{"all_reduce -G -1", "-G must be at least 0, got -1"},
        Case{"all_reduce -t 2 -g 4 --nodes 2 --timing-only",
             "-t 2 with --nodes 2: across nodes every GPU is a process of its own (as mpirun -np N runs "
             "nccl-tests with -g 1); give the GPUs of a node with -g"},
        Case{"all_reduce -t 64 -g 2147483647", "-t * -g: 2147483647 * 64 overflows"},
        Case{"all_reduce --devices 4 -g 2",
             "--devices and -g both given: --devices N gives every GPU a thread of its own; -t threads of -g "
             "GPUs count them nccl-tests' way"},
        Case{"all_reduce --devices 4 -t 2", "--devices and -t both given"},
        Case{"all_reduce --proto fast", "--proto 'fast': expected LL, LL128 or Simple"},
        Case{"all_reduce --devices 4 --preset t4 --proto LL128 --timing-only",
             "LL128 is not available for all_reduce on this fabric (4 GPUs, 1 node, PCIe)"},
        Case{"reduce_scatter --algo tree", "--algo tree: reduce_scatter runs ring"},
        Case{"all_reduce -f 4 -i 1M",
             "-f and -i both given: sizes grow by a factor (-f) or by a fixed step (-i), not both"},
        Case{"all_reduce -i 0", "-i must be at least 1 byte, got 0"},
        Case{"all_reduce -b 8 -e 8G -i 1 --timing-only",
             "-b 8 -e 8589934592 -i 1 -N 1: more than 100000 rows"},
        Case{"all_reduce -N 0", "-N must be at least 1, got 0"},
        Case{"all_reduce -c -1", "-c must be 0 (no check) or a count of checks, got -1"},
        Case{"all_reduce -d half",
             "-d half: the collectives move float data; half is timed from its bytes with --timing-only "
             "(--backend sim)"},
        Case{"all_reduce -d all",
             "-d all: the collectives move float data; the other types are timed from their bytes with "
             "--timing-only (--backend sim)"},
        Case{"all_reduce -d fp8 --timing-only",
             "-d 'fp8': expected one of nccl-tests' types: int8, uint8, int32, uint32, int64, uint64, half, "
             "float, double, bfloat16, or all"},
        Case{"all_reduce -a 4", "-a must be 0 (rank 0), 1 (average), 2 (min) or 3 (max), got 4"}}) {
    SCOPED_TRACE(c.args);
    const Result r = run_bench(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message));
  }
  // Outside mpirun (tests/mpi runs it under mpirun), or in a build without MPI.
  const Result mpi_run = run_bench("all_reduce --backend mpi --devices 2");
  EXPECT_EQ(mpi_run.exit_code, 2) << mpi_run.output;
  EXPECT_THAT(mpi_run.output, HasSubstr(mpi::built() ? "--backend mpi: this process was not started by mpirun"
                                                     : "--backend mpi is not built in this version"));
}

// `--proto LL128 --preset t4` (a PCIe machine: no LL128) was said by a rank once the run had begun:
// after the table's header, with the trace already written over (a partial one in its place).
TEST(BenchCli, AProtocolTheFabricLacksIsRefusedBeforeTheHeaderOrTheTrace) {
  const testing::TempDir dir("bench_proto");
  const std::string trace = (dir.path() / "keep.jsonl").string();
  std::ofstream(trace) << "KEEP";
  const Result r = run_bench("all_reduce -b 8 -e 64 --proto LL128 --preset t4 --trace " + trace);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output,
            "dpscope: error: LL128 is not available for all_reduce on this fabric (4 GPUs, 1 node, PCIe)\n");
  EXPECT_EQ(testing::read_file(trace), "KEEP");
}

TEST(BenchCli, TheAlgorithmComesFromDpscopeAlgoWhenNotGiven) {
  const Result naive = run_bench("all_reduce --devices 3 -b 1K -e 1K -n 1", "DPSCOPE_ALGO=naive");
  ASSERT_EQ(naive.exit_code, 0) << naive.output;
  EXPECT_THAT(naive.output, HasSubstr("# algorithm: naive (DPSCOPE_ALGO), slices: by size"));
  const Result flag = run_bench("all_reduce --devices 3 -b 1K -e 1K -n 1 --algo ring", "DPSCOPE_ALGO=naive");
  EXPECT_THAT(flag.output, HasSubstr("# algorithm: ring, slices: by size"));
  const Result bogus = run_bench("all_reduce --devices 3 -b 1K -e 1K -n 1", "DPSCOPE_ALGO=bogus");
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_EQ(bogus.output,
            "dpscope: error: DPSCOPE_ALGO: unknown algorithm 'bogus' (expected ring, tree, naive or auto)\n");
}

// The algo/proto column names what the row ran: DPSCOPE_ALGO forces it as --algo does (the column
// once named the tuner's auto choice while the schedule ran the variable's tree).
TEST(BenchCli, TheAlgoProtoColumnFollowsDpscopeAlgoAsItFollowsTheFlag) {
  const Result env = run_bench("all_reduce --devices 4 -b 1M -e 1M -n 1", "DPSCOPE_ALGO=tree");
  const Result flag = run_bench("all_reduce --devices 4 -b 1M -e 1M -n 1 --algo tree");
  ASSERT_EQ(env.exit_code, 0) << env.output;
  ASSERT_EQ(flag.exit_code, 0) << flag.output;
  ASSERT_EQ(rows_of(env.output).size(), 1u);
  ASSERT_EQ(rows_of(flag.output).size(), 1u);
  EXPECT_EQ(rows_of(env.output)[0].back().rfind("tree/", 0), 0u) << env.output;
  EXPECT_EQ(rows_of(env.output)[0].back(), rows_of(flag.output)[0].back());
}

// nccl-tests' table (src/common.cu): a header line naming the out-of-place and in-place groups,
// then per row size count type redop root, time algbw busbw (wall) #wrong twice, here the cost
// model's algo/proto last. Every collective runs both forms, each checked exactly; on the sim both
// take the same simulated time (one schedule, one cost model).
TEST(BenchCli, EveryCollectivePrintsAnOutOfPlaceAndAnInPlaceColumnGroup) {
  for (const char* collective :
       {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall"}) {
    SCOPED_TRACE(collective);
    const Result r = run_bench(fmt::format("{} --devices 4 -r 3 -b 1K -e 64K -f 8 -n 2 -w 1", collective));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The group header: only the two labels, over their column groups.
    const size_t label = r.output.find("out-of-place  ");
    ASSERT_NE(label, std::string::npos) << r.output;
    const size_t line_start = r.output.rfind('\n', label) + 1;
    std::stringstream labels(r.output.substr(line_start, r.output.find('\n', label) - line_start));
    const std::vector<std::string> words{std::istream_iterator<std::string>(labels), {}};
    EXPECT_EQ(words, (std::vector<std::string>{"#", "out-of-place", "in-place"}));
    EXPECT_THAT(r.output,
                HasSubstr("# out-of-place and in-place: the same schedule and cost model, so the same "
                          "simulated time (docs/collectives.md)"));
    const auto rows = rows_of(r.output);
    ASSERT_EQ(rows.size(), 3u) << r.output;
    for (const auto& row : rows) {
      ASSERT_EQ(row.size(), 15u) << r.output;
      EXPECT_EQ(row[8], "0") << "out-of-place #wrong";
      EXPECT_EQ(row[12], "0") << "in-place #wrong";
      EXPECT_EQ(row[9], row[5]) << "the same simulated time";
      EXPECT_EQ(row[11], row[7]) << "the same busbw";
      EXPECT_EQ(row[14].find('/') != std::string::npos, true) << "algo/proto, e.g. ring/LL";
    }
  }
}

// nccl-tests' footer averages busbw over every column group it printed (src/common.cu: each
// BenchTime, out-of-place and in-place, adds its busbw to bw[0] and counts it in bw_count[0]).
TEST(BenchCli, AvgBusBandwidthAveragesBothColumnGroups) {
  const Result r = run_bench("all_gather --devices 4 -b 1K -e 1M -f 32 -n 1 -w 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  double sum = 0.0;
  int groups = 0;
  for (const auto& row : rows_of(r.output)) {
    sum += std::stod(row[7]) + std::stod(row[11]);
    groups += 2;
  }
  ASSERT_EQ(groups, 6);
  const size_t at = r.output.find("# Avg bus bandwidth    : ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_NEAR(std::stod(r.output.substr(at + 25)), sum / groups, 0.006);  // busbw printed to 0.01
}

// Timing-only and --nodes: no data (#wrong N/A in both groups, as nccl-tests prints with -c 0),
// both forms timed, with the same time.
TEST(BenchCli, TimingOnlyAndNodesRowsHaveBothColumnGroups) {
  for (const char* args : {"reduce_scatter --devices 8 -b 1M -e 1G -f 32 --timing-only",
                           "all_reduce --devices 8 --nodes 2 -b 1M -e 1G -f 32 --timing-only"}) {
    SCOPED_TRACE(args);
    const Result r = run_bench(args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto rows = rows_of(r.output);
    ASSERT_EQ(rows.size(), 3u) << r.output;
    for (const auto& row : rows) {
      ASSERT_EQ(row.size(), 15u) << r.output;
      EXPECT_EQ(row[8], "N/A");
      EXPECT_EQ(row[12], "N/A");
      EXPECT_EQ(row[9], row[5]);
      EXPECT_GT(std::stod(row[5]), 0.0);
    }
    EXPECT_THAT(r.output, HasSubstr("# Out of bounds values : 0 (not checked: timing-only)"));
  }
}

// The bench's out-of-place check counts the send buffer too: run on the harness directly, every
// column of every collective is exact (input intact included) with -c on, and -1 (N/A) with -c 0.
TEST(CollectiveBench, BothColumnsAreCheckedAndMinusOneWithoutTheCheck) {
  for (const OpType op : {OpType::kAllReduce, OpType::kAllGather, OpType::kReduceScatter, OpType::kBroadcast,
                          OpType::kReduce, OpType::kAllToAll}) {
    SCOPED_TRACE(api_name(op));
    BenchOptions o{.collective = op, .devices = 3, .min_bytes = 120, .max_bytes = 12000, .factor = 10};
    o.iterations = 1;
    o.warmup = 0;
    o.root = 1;
    o.only = std::nullopt;  // both groups, as `dpscope bench` runs them
    for (const BenchRow& row : run_collective_bench(o)) {
      EXPECT_TRUE(row.out_of_place.ran && row.in_place.ran);
      EXPECT_EQ(row.out_of_place.wrong, 0) << row.bytes;
      EXPECT_EQ(row.in_place.wrong, 0) << row.bytes;
      EXPECT_EQ(row.out_of_place.sim_us, row.in_place.sim_us) << row.bytes;
    }
    o.check = false;
    for (const BenchRow& row : run_collective_bench(o)) {
      EXPECT_EQ(row.out_of_place.wrong, -1);
      EXPECT_EQ(row.in_place.wrong, -1);
    }
  }
}

// Our schedules over MPI run in place only (the mpi backend's out-of-place forms are MPI's own
// collectives): that column is not offered, everywhere else both are.
TEST(CollectiveBench, OffersOutOfPlaceEverywhereButOurSchedulesOverMpi) {
  BenchOptions o;
  EXPECT_TRUE(bench_offers(o, Placement::kOutOfPlace));
  o.backend = "mpi";
  o.algorithm = Algorithm::kAuto;
  EXPECT_TRUE(bench_offers(o, Placement::kOutOfPlace));
  o.algorithm = Algorithm::kRing;
  EXPECT_FALSE(bench_offers(o, Placement::kOutOfPlace));
  EXPECT_TRUE(bench_offers(o, Placement::kInPlace));
  o.collective = OpType::kAllGather;
  EXPECT_TRUE(bench_offers(o, Placement::kOutOfPlace));
}

// --placement runs one column group (lessons 5 and 6 show one in-place all-reduce per size, as
// PyTorch's dist.all_reduce(x)): the other group prints -, the trace holds one collective per run.
TEST(BenchCli, PlacementRunsOneColumnGroupAndTracesOnlyIt) {
  const std::string path = testing::unique_temp_path("bench_in_place.jsonl").string();
  const Result r =
      run_bench("all_reduce --devices 4 -b 1K -e 4K -f 4 -n 1 -w 0 --placement in-place --trace " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("# out-of-place: not run (--placement in-place); its columns print -"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("the same simulated time")));
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  for (const auto& row : rows) {
    for (size_t i = 5; i < 9; ++i) EXPECT_EQ(row[i], "-");
    EXPECT_EQ(row[12], "0");
  }
  std::ifstream in(path);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(trace, HasSubstr(R"("placement":"in-place")"));
  size_t spans = 0;
  for (size_t at = trace.find(R"("cat":"collective")"); at != std::string::npos;
       at = trace.find(R"("cat":"collective")", at + 1))
    ++spans;
  EXPECT_EQ(spans, 2u * 4u) << "one collective per size on each of 4 ranks";
  const Result out = run_bench("reduce --devices 3 -b 1K -e 1K -n 1 --placement out-of-place");
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_EQ(rows_of(out.output).at(0)[8], "0");
  EXPECT_EQ(rows_of(out.output).at(0)[12], "-");
  const Result bad = run_bench("all_reduce --placement sideways");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.output, "dpscope: error: --placement 'sideways': expected both, out-of-place or in-place\n");
}

TEST(BenchSizes, AFactorOrAFixedStepFromMinToMaxRepeatedPerCycle) {
  BenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 100;
  o.factor = 3;
  EXPECT_EQ(bench_sizes(o), (std::vector<uint64_t>{8, 24, 72}));  // 216 would pass -e
  o.step_bytes = 40;                                              // a step replaces the factor
  EXPECT_EQ(bench_sizes(o), (std::vector<uint64_t>{8, 48, 88}));
  o.cycles = 2;
  EXPECT_EQ(bench_sizes(o), (std::vector<uint64_t>{8, 48, 88, 8, 48, 88}));
  o = BenchOptions{};
  o.min_bytes = o.max_bytes = 1ull << 50;  // the largest size parse_byte_size accepts: no overflow
  o.factor = 1ull << 50;
  EXPECT_EQ(bench_sizes(o), (std::vector<uint64_t>{1ull << 50}));
  o.step_bytes = 1ull << 50;
  EXPECT_EQ(bench_sizes(o), (std::vector<uint64_t>{1ull << 50}));
}

TEST(ParseByteSize, AcceptsBinarySuffixes) {
  EXPECT_EQ(parse_byte_size("8", "-b"), 8u);
  EXPECT_EQ(parse_byte_size("1K", "-b"), 1024u);
  EXPECT_EQ(parse_byte_size("16M", "-b"), 16u << 20);
  EXPECT_EQ(parse_byte_size("2g", "-b"), 2ull << 30);
  EXPECT_THROW(parse_byte_size("", "-b"), Error);
  EXPECT_THROW(parse_byte_size("K", "-b"), Error);
  EXPECT_THROW(parse_byte_size("1KB", "-b"), Error);
}

}  // namespace
}  // namespace dpscope
