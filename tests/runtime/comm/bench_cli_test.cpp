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
#include "dpscope/comm/bench.hpp"
#include "dpscope/comm/mpi_backend.hpp"
#include "dpscope/core/preset.hpp"
#include "support/temp_files.hpp"

namespace dpscope {
namespace {

using ::testing::HasSubstr;

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
              HasSubstr("size         count    type   redop  root        time     algbw     busbw"));
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 3u) << r.output;
  const char* sizes[] = {"1024", "4096", "16384"};
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 10u);
    EXPECT_EQ(rows[i][0], sizes[i]);
    EXPECT_EQ(std::stoll(rows[i][1]), std::stoll(rows[i][0]) / 4);
    EXPECT_EQ(rows[i][2], "float");
    EXPECT_EQ(rows[i][3], "sum");
    EXPECT_EQ(rows[i][4], "-1");
    EXPECT_EQ(rows[i][9], "0") << "#wrong";
    // busbw = algbw * 2(n-1)/n
    EXPECT_NEAR(std::stod(rows[i][7]), std::stod(rows[i][6]) * 1.5, 0.011);
  }
  EXPECT_THAT(r.output, HasSubstr("# Wrong values         : 0 OK"));
  EXPECT_THAT(r.output, HasSubstr("# Avg bus bandwidth    : "));
}

TEST(BenchCli, SimulatedTimeOfANonPipelinedRingMatchesTheClosedForm) {
  const Result r =
      run_bench("all_reduce --devices 4 --algo ring --slices 1 -b 4M -e 4M --timing-only -n 1 -w 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u);
  const HardwarePreset h100 = find_preset("h100-sxm");
  const double chunk = 1 << 20;
  const int64_t transfer =
      936 +
      std::llround(chunk / (h100.peer_link.bandwidth_bytes_per_s * h100.network.protocol_efficiency) * 1e9);
  const int64_t reduce = std::llround(3 * chunk / h100.mem_bandwidth_bytes_per_s * 1e9);
  EXPECT_EQ(rows[0][5], fmt::format("{:.2f}", (6 * transfer + 3 * reduce) / 1e3));
  EXPECT_EQ(rows[0][9], "N/A");
}

TEST(BenchCli, EveryCollectiveAndReduceOpPassesTheExactCheck) {
  for (const char* args :
       {"all_gather --devices 3 -b 96 -e 96K -f 32", "reduce_scatter --devices 5 -b 1K -e 64K -f 8 -o max",
        "broadcast --devices 4 -r 2 -b 1K -e 16K -f 4 --algo ring",
        "reduce --devices 3 -r 1 -o prod -b 1K -e 16K -f 4",
        "all_reduce --devices 5 -o avg -b 1K -e 64K -f 8 --algo tree",
        "all_reduce --devices 3 -o min -b 100 -e 1K -f 10 --algo naive"}) {
    SCOPED_TRACE(args);
    const Result r = run_bench(std::string(args) + " -n 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const auto& row : rows_of(r.output)) EXPECT_EQ(row.back(), "0") << r.output;
  }
}

TEST(BenchCli, AllGatherSizesCountEveryRanksShare) {
  const Result r = run_bench("all_gather --devices 4 -b 1000 -e 1000 -n 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = rows_of(r.output);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "992");  // 62 floats per rank x 4 ranks, as nccl-tests rounds down
  EXPECT_EQ(rows[0][1], "248");
  EXPECT_EQ(rows[0][3], "none");
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
  for (const Case& c : {Case{"all_reduce -b 1X", "-b '1X': expected a byte count like 8, 1K, 16M or 1G"},
                        Case{"all_reduce -b 1M -e 1K", "-b 1048576 is larger than -e 1024"},
                        Case{"all_reduce --devices 0", "--devices must be at least 1, got 0"},
                        Case{"all_reduce --algo hypercube", "--algo: unknown algorithm 'hypercube'"},
                        Case{"all_reduce --backend gloo", "--backend gloo: expected sim, cuda, nccl or mpi"},
                        Case{"alltoall", "unknown collective 'alltoall'"},
                        Case{"broadcast -o max", "-o max given, but broadcast does not reduce"},
                        Case{"all_reduce -f 1", "-f must be at least 2, got 1"},
                        Case{"all_reduce -o median", "unknown reduce op 'median'"},
                        Case{"all_reduce --devices 9 --preset v100-sxm2", "holds 8 GPUs; 9 requested"},
                        Case{"all_reduce --devices 64 -e 1G", "add --timing-only"},
                        Case{"reduce_scatter --algo tree", "--algo tree: reduce_scatter runs ring"}}) {
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
