// dpscope's commands as mpirun's processes: `mpirun -np N dpscope train --mode ddp --device cpu
// --backend mpi` trains to the same weights as the simulated DDP run of the same configuration;
// `mpirun -np N dpscope bench COLLECTIVE --backend mpi` checks every collective's result exactly;
// the launcher's mistakes get one clear line. This binary is not itself run under mpirun: it starts
// mpirun (DPSCOPE_MPIRUN).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <sstream>
#include <string>

#include "dpscope/io/safetensors.hpp"
#include "dpscope/trace_tools/compressed.hpp"
#include "support/cli.hpp"
#include "support/ports.hpp"

namespace dpscope {
namespace {

using ::testing::HasSubstr;
using testing::run_command;
using testing::run_dpscope;
using testing::TempDir;

const std::string kRun =
    "train --mode ddp --dataset spirals:512 --model 2-32-32-3 --batch 16 --steps 12 --optim adam --lr 0.01 ";

std::string mpirun(int ranks, const std::string& args) {
  return fmt::format("{} -np {} {} {}", DPSCOPE_MPIRUN, ranks, DPSCOPE_CLI, args);
}

// The largest absolute difference between two weight files' tensors (same names and shapes).
float max_difference(const std::string& a, const std::string& b) {
  const NamedTensors x = load_safetensors(a);
  const NamedTensors y = load_safetensors(b);
  EXPECT_EQ(x.size(), y.size());
  float worst = 0.0f;
  for (size_t k = 0; k < std::min(x.size(), y.size()); ++k) {
    const auto& [name, tensor] = x[k];
    EXPECT_EQ(name, y[k].first);
    const std::vector<float> u = tensor.to_vector(), v = y[k].second.to_vector();
    EXPECT_EQ(u.size(), v.size()) << name;
    for (size_t i = 0; i < std::min(u.size(), v.size()); ++i) worst = std::max(worst, std::fabs(u[i] - v[i]));
  }
  return worst;
}

TEST(MpiTrain, ProcessesEndWithTheSimulatedDdpWeights) {
  for (int ranks : {2, 4}) {
    TempDir dir("mpi_train");
    const auto sim =
        run_dpscope(kRun + fmt::format("--devices {} --save {}", ranks, dir / "sim.safetensors"));
    ASSERT_EQ(sim.exit_code, 0) << sim.output;
    const auto procs =
        run_command(mpirun(ranks, kRun + fmt::format("--device cpu --backend mpi --devices {} --save {}",
                                                     ranks, dir / "mpi.safetensors")));
    ASSERT_EQ(procs.exit_code, 0) << procs.output;
    // One summary (rank 0's), with the loss averaged over the ranks as the simulated run reports it.
    EXPECT_THAT(procs.output,
                HasSubstr(fmt::format("{} processes on the CPU (rank 0 of {}, mpi)", ranks, ranks)));
    EXPECT_EQ(procs.output.find("rank 1 of"), std::string::npos) << procs.output;
    const auto final_loss = [](const std::string& out) {
      return out.substr(out.find("mean loss over ranks"));
    };
    EXPECT_EQ(final_loss(procs.output).substr(0, 60), final_loss(sim.output).substr(0, 60));
    // The same arithmetic in the same order (the mpi backend's sum of two or four floats is
    // associative only up to rounding): equal to float precision.
    EXPECT_LE(max_difference(dir / "sim.safetensors", dir / "mpi.safetensors"), 1e-5f) << ranks << " ranks";
  }
}

// Regression test: ranks that are processes resumed without saying so (the summary's "resumed after
// step N" line was missing, while rank threads printed it).
TEST(MpiTrain, AResumedRunOfProcessesSaysWhichStepItResumedAfter) {
  TempDir dir("mpi_resume");
  const std::string run = fmt::format(
      "train --mode ddp --dataset spirals:512 --model 2-8-3 --batch 16 --device cpu --backend mpi --devices "
      "2 "
      "--checkpoint-every 6 --checkpoint-dir {} ",
      dir / "checkpoints");
  const auto first = run_command(mpirun(2, run + "--steps 12"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("resumed after step"), std::string::npos) << first.output;
  const auto second = run_command(mpirun(2, run + "--steps 18 --resume"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr(fmt::format("resumed after step 12 from {}", dir / "checkpoints")));
}

// The same runs started by dpscope launch instead of mpirun: each process is an MPI singleton,
// and they join one world through the launcher's env:// store (comm/mpi/mpi_singletons.hpp).
TEST(MpiTrain, ProcessesOfDpscopeLaunchEndWithTheSimulatedDdpWeights) {
  for (int ranks : {2, 4}) {
    TempDir dir("mpi_launch");
    const auto sim =
        run_dpscope(kRun + fmt::format("--devices {} --save {}", ranks, dir / "sim.safetensors"));
    ASSERT_EQ(sim.exit_code, 0) << sim.output;
    const auto procs = run_dpscope(fmt::format(
        "launch --nproc {} --master-port {} -- {} {} --device cpu --backend mpi --devices {} --save {} "
        "--trace {}",
        ranks, testing::free_port(), DPSCOPE_CLI, kRun, ranks, dir / "launched.safetensors", dir / "traces"));
    ASSERT_EQ(procs.exit_code, 0) << procs.output;
    EXPECT_THAT(procs.output,
                HasSubstr(fmt::format("[rank 0] == dpscope train: ddp on {} processes on the CPU "
                                      "(rank 0 of {}, mpi, started by a launcher)",
                                      ranks, ranks)));
    EXPECT_LE(max_difference(dir / "sim.safetensors", dir / "launched.safetensors"), 1e-5f)
        << ranks << " ranks";
    for (int k = 0; k < ranks; ++k)
      EXPECT_TRUE(std::filesystem::exists(dir / fmt::format("traces/rank-{}.jsonl", k))) << procs.output;
  }
}

// Rank 0 of singleton processes needs OpenMPI's ompi-server: one line when it is missing or
// broken, and the launcher stops the rank waiting for it.
TEST(MpiTrain, LaunchedProcessesWithoutAWorkingOmpiServerStopInOneLine) {
  const std::string train = fmt::format(" {} {} --device cpu --backend mpi --devices 2", DPSCOPE_CLI, kRun);
  const auto missing =
      run_command(fmt::format("DPSCOPE_OMPI_SERVER=/nonexistent/ompi-server {} launch --nproc 2 "
                              "--master-port {} --{}",
                              DPSCOPE_CLI, testing::free_port(), train));
  EXPECT_NE(missing.exit_code, 0) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("[rank 0] dpscope: error: init_process_group(\"mpi\"): "
                                        "DPSCOPE_OMPI_SERVER=/nonexistent/ompi-server is not an executable"));
  // Rank 1 may end first (its store's server, rank 0, went away): the launcher names whichever did.
  EXPECT_THAT(missing.output, HasSubstr("dpscope: error: launch: rank "));
  const auto broken =
      run_command(fmt::format("DPSCOPE_OMPI_SERVER=/bin/false {} launch --nproc 2 --master-port {} --{}",
                              DPSCOPE_CLI, testing::free_port(), train));
  EXPECT_NE(broken.exit_code, 0) << broken.output;
  // Rank 0 says how the server ended, even when the launcher stops it while it unwinds (it read
  // "timed out after 1800000 ms" on rank 1 once).
  EXPECT_THAT(broken.output, HasSubstr("[rank 0] dpscope: error: init_process_group(\"mpi\"): OpenMPI's "
                                       "ompi-server (/bin/false) could not start: it exited with status 1"));
  // Rank 1 says what rank 0 failed with, unless the launcher, reaping rank 0, stopped it before it
  // heard (then it says so); never a timeout.
  EXPECT_THAT(
      broken.output,
      ::testing::AnyOf(HasSubstr("[rank 1] dpscope: error: rank 0 failed: init_process_group(\"mpi\"): "
                                 "OpenMPI's ompi-server (/bin/false) could not start"),
                       HasSubstr("[rank 1] dpscope: error: rank 1 was stopped by SIGTERM: its launcher")));
  EXPECT_THAT(broken.output, ::testing::Not(HasSubstr("timed out")));
}

// A rank killed mid-run (SIGKILL: no chance to say anything) under dpscope launch: the launcher
// names it, stops the other rank instead of letting it wait, and the traces written so far read.
TEST(MpiTrain, ARankKilledMidRunUnderLaunchIsNamedAndTheTracesStayReadable) {
  TempDir dir("mpi_killed");
  const std::string train = fmt::format(
      "{} train --mode ddp --device cpu --backend mpi --devices 2 --model 2-64-64-3 --dataset spirals:4096 "
      "--batch 16 --epochs 1000 --trace {}",
      DPSCOPE_CLI, dir / "traces");
  // Rank 1's shell becomes dpscope (exec keeps its pid); a sibling kills that pid once rank 1 has
  // trained a while (its trace file exists, then one more second).
  const std::string rank1 = dir / "traces/rank-1.jsonl";
  const auto r = run_dpscope(fmt::format(
      "launch --nproc 2 --master-port {} -- sh -c 'if [ \"$RANK\" = 1 ]; then (while [ ! -s {} ]; "
      "do sleep 0.1; done; sleep 1; kill -9 $$) & fi; exec {}'",
      testing::free_port(), rank1, train));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::MatchesRegex(
                            "(.|\n)*dpscope: error: launch: rank 1 \\(pid [0-9]+\\) was killed by signal 9 "
                            "\\(Killed\\); stopped the other 1 rank(.|\n)*"));
  const auto stats = run_dpscope("trace stats --lenient " + dir / "traces");
  EXPECT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_THAT(stats.output, HasSubstr("cpu:1"));
}

// Every rank runs rank 0's configuration, or every rank stops; the one that differs names the flag.
TEST(MpiTrain, ARankStartedWithOtherFlagsStopsEveryRankNamingTheFlag) {
  std::string common = kRun + "--device cpu --backend mpi --devices 2 ";
  common.erase(common.find("--batch 16 "), std::string("--batch 16 ").size());
  const auto r = run_command(fmt::format("{} -np 1 {} {} --batch 16 : -np 1 {} {} --batch 8", DPSCOPE_MPIRUN,
                                         DPSCOPE_CLI, common, DPSCOPE_CLI, common));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("rank 1 of 2 runs another configuration than rank 0: --batch is 8 here but 16 "
                        "on rank 0 (every rank must be started with the same flags)"));
  EXPECT_THAT(r.output,
              HasSubstr("rank 1 runs another configuration than rank 0 (its error names the flag)"));
}

TEST(MpiTrain, AlgoRingRunsOurScheduleToTheSimulatedRunsExactWeights) {
  // --algo ring: DDP's bucket all-reduces run the sim's ring over MPI point-to-point, adding the
  // same numbers in the same order: the weights are the simulated run's, bit for bit. The layers
  // are wide enough for OpenBLAS to multiply on several threads, whose count changes the last bits:
  // a process gets the share a rank thread gets (kernels/cpu_threads.hpp).
  TempDir dir("mpi_train_ring");
  const std::string run =
      "train --mode ddp --dataset spirals:512 --model 2-256-256-3 --batch 16 --steps 12 "
      "--optim adam --lr 0.01 --devices 3 --algo ring ";
  const auto sim = run_dpscope(run + fmt::format("--save {}", dir / "sim.safetensors"));
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  const auto procs =
      run_command(mpirun(3, run + fmt::format("--device cpu --backend mpi --save {} --trace {}",
                                              dir / "mpi.safetensors", dir / "tr")));
  ASSERT_EQ(procs.exit_code, 0) << procs.output;
  EXPECT_EQ(testing::read_file(dir / "sim.safetensors"), testing::read_file(dir / "mpi.safetensors"));
  // Each rank traced its ring steps: transfers to its right-hand neighbour, named by process rank.
  EXPECT_THAT(testing::read_file(dir / "tr/rank-1.jsonl"),
              HasSubstr(R"("algo":"ring","algo_step":0,"chunk":1,"src_rank":1,"dst_rank":2})"));
  // The same under dpscope launch, where each process is an MPI singleton of its own: process
  // ranks are the world group's, not MPI_COMM_WORLD's.
  const auto launched = run_dpscope(
      fmt::format("launch --nproc 3 --master-port {} -- {} {} --device cpu "
                  "--backend mpi --save {} --trace {}",
                  testing::free_port(), DPSCOPE_CLI, run, dir / "launched.safetensors", dir / "tl"));
  ASSERT_EQ(launched.exit_code, 0) << launched.output;
  EXPECT_EQ(testing::read_file(dir / "sim.safetensors"), testing::read_file(dir / "launched.safetensors"));
  EXPECT_THAT(testing::read_file(dir / "tl/rank-2.jsonl"),
              HasSubstr(R"("algo":"ring","algo_step":0,"chunk":2,"src_rank":2,"dst_rank":0})"));
}

TEST(MpiTrain, LaunchMistakesAreOneLine) {
  const auto outside = run_dpscope(kRun + "--device cpu --backend mpi --devices 2");
  EXPECT_EQ(outside.exit_code, 2) << outside.output;
  EXPECT_THAT(outside.output,
              HasSubstr("--backend mpi: this process was not started by mpirun; run mpirun -np 2 "
                        "dpscope train ... --backend mpi"));
  const auto wrong_size = run_command(mpirun(2, kRun + "--device cpu --backend mpi --devices 3"));
  EXPECT_NE(wrong_size.exit_code, 0);
  EXPECT_THAT(wrong_size.output,
              HasSubstr("--devices 3 but mpirun started 2 processes (-np 2): give the same number"));
  const auto on_sim = run_dpscope(kRun + "--backend mpi --devices 2");
  EXPECT_EQ(on_sim.exit_code, 2);
  EXPECT_THAT(on_sim.output,
              HasSubstr("--backend mpi runs each rank as a process on its CPU, started by mpirun -np "
                        "N: use --mode ddp --device cpu"));
}

TEST(MpiTrain, EachRankTracesItsOwnFileAndTheMergeIsOneTimeline) {
  TempDir dir("mpi_trace");
  const std::string traces = dir / "traces";
  const auto r = run_command(mpirun(2, kRun + "--device cpu --backend mpi --devices 2 --trace " + traces));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(fmt::format("traces: {}/rank-K.jsonl, one per rank", traces)));
  for (int rank : {0, 1}) {
    const std::string header = testing::read_file(fmt::format("{}/rank-{}.jsonl", traces, rank));
    EXPECT_THAT(header,
                HasSubstr(fmt::format(R"("process":{{"rank":{},"world_size":2,"clock_offset_ns":)", rank)));
  }
  const auto merged = run_dpscope(fmt::format("trace merge {} {}", traces, dir / "merged.jsonl"));
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_THAT(merged.output, HasSubstr("(2 ranks, "));
  EXPECT_THAT(merged.output, HasSubstr("rank 1: clock offset "));
  const auto stats = run_dpscope("trace stats " + (dir / "merged.jsonl"));
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_THAT(stats.output, HasSubstr("measured clock, 2 devices"));
  EXPECT_THAT(stats.output, HasSubstr("cpu:1"));
}

TEST(MpiTrain, TraceZstdMakesEachLaunchedRankWriteACompressedFile) {
  TempDir dir("mpi_trace_zst");
  const std::string traces = dir / "traces";
  const auto r =
      run_dpscope(fmt::format("launch --nproc 2 --master-port {} -- {} {} --device cpu --backend mpi "
                              "--devices 2 --trace {} --trace-zstd",
                              testing::free_port(), DPSCOPE_CLI, kRun, traces));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(fmt::format("traces: {}/rank-K.jsonl.zst, one per rank", traces)));
  for (int rank : {0, 1}) {
    const std::string file = fmt::format("{}/rank-{}.jsonl.zst", traces, rank);
    EXPECT_TRUE(trace::starts_with_zstd_magic(testing::read_file(file))) << file;
    EXPECT_FALSE(std::filesystem::exists(fmt::format("{}/rank-{}.jsonl", traces, rank)));
  }
  const auto stats = run_dpscope("trace stats " + traces);
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_THAT(stats.output, HasSubstr("measured clock, 2 devices"));
}

TEST(MpiBench, EveryCollectiveIsExactOnProcesses) {
  for (const char* collective :
       {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall"}) {
    const auto r = run_command(
        mpirun(3, fmt::format("bench {} --backend mpi --devices 3 -b 8 -e 64K -f 32 -n 2 -w 1", collective)));
    ASSERT_EQ(r.exit_code, 0) << collective << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("backend mpi, 3 processes on this machine's CPUs")) << collective;
    EXPECT_THAT(r.output, HasSubstr("# Wrong values         : 0 OK")) << collective;
    // One table: rank 0 prints it, the other ranks nothing.
    EXPECT_EQ(r.output.find("# Wrong values"), r.output.rfind("# Wrong values")) << r.output;
  }
  const auto avg = run_command(mpirun(2, "bench all_reduce --backend mpi --devices 2 -b 1K -e 1K -o avg"));
  EXPECT_EQ(avg.exit_code, 0) << avg.output;
  EXPECT_THAT(avg.output, HasSubstr("# Wrong values         : 0 OK"));
}

TEST(MpiBench, MisuseIsOneLine) {
  const auto outside = run_dpscope("bench all_reduce --backend mpi --devices 2");
  EXPECT_EQ(outside.exit_code, 2) << outside.output;
  EXPECT_THAT(outside.output,
              HasSubstr("--backend mpi: this process was not started by mpirun; run mpirun -np 2 "
                        "dpscope bench ... --backend mpi"));
  const auto tree = run_command(mpirun(2, "bench all_gather --backend mpi --devices 2 --algo tree"));
  EXPECT_EQ(tree.exit_code, 2) << tree.output;
  EXPECT_THAT(tree.output, HasSubstr("dpscope: error: --algo tree: all_gather runs ring or auto only"));
}

TEST(MpiBench, OurSchedulesAreExactOnProcesses) {
  // --algo ring|tree|naive: the sim backend's schedules over MPI point-to-point (all-gather and
  // reduce-scatter offer ring only), sizes not divisible by the 3 ranks included.
  for (const char* algo : {"ring", "tree", "naive"}) {
    for (const char* collective : {"all_reduce", "broadcast", "reduce"}) {
      const auto r = run_command(mpirun(
          3, fmt::format("bench {} --backend mpi --devices 3 --algo {} -b 4 -e 40K -f 10 -n 2 -w 1 -r 1",
                         collective, algo)));
      ASSERT_EQ(r.exit_code, 0) << collective << " " << algo << "\n" << r.output;
      EXPECT_THAT(r.output, HasSubstr(fmt::format("(our {} schedule over MPI point-to-point)", algo)));
      EXPECT_THAT(r.output, HasSubstr("# Wrong values         : 0 OK")) << collective << " " << algo;
    }
  }
  for (const char* collective : {"all_gather", "reduce_scatter"}) {
    const auto r = run_command(mpirun(
        3, fmt::format("bench {} --backend mpi --devices 3 --algo ring -b 12 -e 120K -f 10", collective)));
    ASSERT_EQ(r.exit_code, 0) << collective << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("# Wrong values         : 0 OK")) << collective;
  }
  const auto avg =
      run_command(mpirun(2, "bench all_reduce --backend mpi --devices 2 --algo tree -b 1K -e 1K -o avg"));
  EXPECT_EQ(avg.exit_code, 0) << avg.output;
  EXPECT_THAT(avg.output, HasSubstr("# Wrong values         : 0 OK"));
  // Without --algo, DPSCOPE_ALGO picks the group's default, as for the sim backend.
  const auto env =
      run_command("DPSCOPE_ALGO=naive " + mpirun(2, "bench all_reduce --backend mpi --devices 2 -e 1K"));
  EXPECT_EQ(env.exit_code, 0) << env.output;
  EXPECT_THAT(env.output, HasSubstr("(our naive schedule over MPI point-to-point)"));
  EXPECT_THAT(env.output, HasSubstr("# algorithm: naive (DPSCOPE_ALGO)"));
  EXPECT_THAT(env.output, HasSubstr("# Wrong values         : 0 OK"));
  const auto own = run_command(mpirun(2, "bench all_reduce --backend mpi --devices 2 -e 1K"));
  EXPECT_THAT(own.output, HasSubstr("(MPI's own algorithms)"));
}

// The data rows of a bench table, split into fields (size count type redop root, the out-of-place
// group: time algbw busbw #wrong, the in-place group alike, wall).
std::vector<std::vector<std::string>> bench_rows(const std::string& output) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#' || line.find_first_not_of(' ') == std::string::npos) continue;
    if (!std::isdigit(static_cast<unsigned char>(line[line.find_first_not_of(' ')]))) continue;
    std::stringstream fields(line);
    std::vector<std::string> row;
    std::string field;
    while (fields >> field) row.push_back(field);
    rows.push_back(row);
  }
  return rows;
}

// nccl-tests' two columns on processes: MPI's own collectives run both forms (MPI_Iallreduce with a
// send and a receive buffer; MPI_IN_PLACE for all_gather in place), each checked exactly; our
// schedules run in place only, so their out-of-place column prints "-" and says so once.
TEST(MpiBench, OutOfPlaceAndInPlaceColumnsAreBothChecked) {
  for (const char* collective :
       {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall"}) {
    const auto r = run_command(mpirun(
        3, fmt::format("bench {} --backend mpi --devices 3 -b 96 -e 96K -f 32 -n 1 -w 0 -r 2", collective)));
    ASSERT_EQ(r.exit_code, 0) << collective << "\n" << r.output;
    const auto rows = bench_rows(r.output);
    ASSERT_EQ(rows.size(), 3u) << r.output;
    for (const auto& row : rows) {
      ASSERT_EQ(row.size(), 14u) << r.output;
      EXPECT_EQ(row[8], "0") << "out-of-place #wrong, " << collective;
      EXPECT_EQ(row[12], "0") << "in-place #wrong, " << collective;
    }
  }
  const auto ring =
      run_command(mpirun(2, "bench all_reduce --backend mpi --devices 2 --algo ring -b 1K -e 1K"));
  ASSERT_EQ(ring.exit_code, 0) << ring.output;
  EXPECT_THAT(ring.output,
              HasSubstr("# out-of-place: not offered: --backend mpi runs our ring schedule in place "
                        "only; its columns print -"));
  const auto rows = bench_rows(ring.output);
  ASSERT_EQ(rows.size(), 1u) << ring.output;
  ASSERT_EQ(rows[0].size(), 14u) << ring.output;
  for (size_t i = 5; i < 9; ++i) EXPECT_EQ(rows[0][i], "-") << ring.output;
  EXPECT_EQ(rows[0][12], "0");
  EXPECT_THAT(ring.output, HasSubstr("# Out of bounds values : 0 OK"));
  // Asking for the one group that cannot run is refused in one line.
  const auto refused = run_command(
      mpirun(2, "bench all_reduce --backend mpi --devices 2 --algo tree --placement out-of-place -e 1K"));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr("dpscope: error: --placement out-of-place: --backend mpi runs our tree "
                        "schedule in place only (MPI's own collectives, --algo auto, run both)"));
}

}  // namespace
}  // namespace dpscope
