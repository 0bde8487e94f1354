// The `cuda` and `nccl` process-group backends (comm/gpu_backends.hpp) on any machine: they are
// registered exactly when the build has CUDA, init without a GPU fails at once with one line,
// nccl's rank-count check and its ReduceOp/DType names. On a GPU: the cuda backend's results are
// bit-identical to sim's for the same schedule and traced with the same events, and nccl runs a
// world of one rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <random>
#include <set>
#include <sstream>

#include "comm_test_util.hpp"
#include "dpscope/comm/backend_registry.hpp"
#include "dpscope/comm/gpu_backends.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/core/cuda.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope_bench/collective_bench.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using testing::error_of;
using testing::Outcome;

bool has_gpu() { return cuda::physical_device_count() > 0; }

TEST(GpuBackends, RegisteredExactlyWhenTheBuildHasCuda) {
  std::vector<std::string> names = registered_backends();
  std::erase(names, "mpi");  // tests/mpi checks it (built with MPI)
  if (cuda::built()) {
    EXPECT_EQ(names, (std::vector<std::string>{"analytic", "cuda", "nccl", "sim"}));
  } else {
    EXPECT_EQ(names, (std::vector<std::string>{"analytic", "sim"}));
  }
}

TEST(GpuBackends, InitWithoutAGpuFailsAtOnceWithOneLine) {
  if (!cuda::built()) GTEST_SKIP() << "built without CUDA: init_test.cpp checks 'not built'";
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  for (const char* name : {"cuda", "nccl"}) {
    const auto begun = std::chrono::steady_clock::now();
    const Outcome e = error_of([&] { init_process_group(name, 0, 1, {}); });
    EXPECT_EQ(e.kind, ErrorKind::kDevice) << name;
    EXPECT_EQ(e.message, fmt::format("init_process_group(\"{}\"): {}", name, cuda::unavailable_reason()));
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
    // Every rank of a spawned world fails the same way, after the store's rendezvous, promptly.
    const Outcome spawned =
        error_of([&] { spawn_ranks({.backend = name, .world_size = 3}, [](ProcessGroup&) {}); });
    EXPECT_EQ(spawned.kind, ErrorKind::kDevice) << name;
    EXPECT_THAT(spawned.message, ::testing::MatchesRegex(fmt::format(
                                     "rank [0-2] failed: init_process_group\\(\"{}\"\\): .+", name)));
    EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(10)) << name;
  }
}

TEST(GpuBackends, MakeCudaWorldWithoutAGpuSaysWhy) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  const Outcome e = error_of([] { make_cuda_world(2); });
  EXPECT_EQ(e.kind, ErrorKind::kDevice);
  EXPECT_EQ(e.message, fmt::format("make_cuda_world: {}", cuda::unavailable_reason()));
  EXPECT_EQ(error_of([] { make_cuda_world(0); }).message,
            "make_cuda_world: world size must be at least 1, got 0");
}

TEST(GpuBackends, NcclNeedsOnePhysicalGpuPerRank) {
  EXPECT_EQ(
      nccl_world_size_problem(2, 1),
      "nccl: 2 ranks need 2 GPUs, this machine has 1 (NCCL refuses two ranks on one GPU); use --backend "
      "cuda to run logical GPUs on one");
  EXPECT_EQ(
      nccl_world_size_problem(8, 4),
      "nccl: 8 ranks need 8 GPUs, this machine has 4 (NCCL refuses two ranks on one GPU); use --backend "
      "cuda to run logical GPUs on one");
  EXPECT_EQ(nccl_world_size_problem(1, 0), "nccl: 1 rank needs a CUDA GPU, this machine has none");
  EXPECT_EQ(nccl_world_size_problem(4, 0), "nccl: 4 ranks need a CUDA GPU, this machine has none");
  EXPECT_EQ(nccl_world_size_problem(1, 1), "");
  EXPECT_EQ(nccl_world_size_problem(4, 8), "");
  EXPECT_EQ(nccl_world_size_problem(8, 8), "");
}

TEST(GpuBackends, NcclWithTooManyRanksFailsBeforeTouchingNccl) {
  if (!cuda::built() || !has_gpu()) GTEST_SKIP() << "needs a CUDA GPU: " << cuda::unavailable_reason();
  const int ranks = cuda::physical_device_count() + 1;
  const Outcome e = error_of([&] { init_process_group("nccl", 0, ranks, {}); });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message, nccl_world_size_problem(ranks, cuda::physical_device_count()));
}

TEST(GpuBackends, ReduceOpsAndDtypesMapToNcclsNames) {
  EXPECT_STREQ(nccl_reduce_op_name(ReduceOp::kSum), "ncclSum");
  EXPECT_STREQ(nccl_reduce_op_name(ReduceOp::kAvg), "ncclAvg");
  EXPECT_STREQ(nccl_reduce_op_name(ReduceOp::kProduct), "ncclProd");
  EXPECT_STREQ(nccl_reduce_op_name(ReduceOp::kMin), "ncclMin");
  EXPECT_STREQ(nccl_reduce_op_name(ReduceOp::kMax), "ncclMax");
  EXPECT_STREQ(nccl_dtype_name(DType::kF32), "ncclFloat32");
  EXPECT_STREQ(nccl_dtype_name(DType::kI64), "ncclInt64");
}

// Random floats (whose sums depend on the order of additions): equal bits mean the same order.
std::vector<float> random_values(int rank, int64_t count) {
  std::mt19937 gen(static_cast<uint32_t>(1234 + rank));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(gen);
  return v;
}

// Every rank's all_reduce result on `backend` with `algo`.
std::vector<std::vector<float>> all_reduce_on(const std::string& backend, Algorithm algo, ReduceOp op, int n,
                                              int64_t count) {
  std::vector<std::vector<float>> got(static_cast<size_t>(n));
  SimWorldOptions machine = test::round_options();
  machine.algorithm = algo;
  InitOptions options{.backend = backend, .world_size = n};
  options.world = backend == "sim" ? SimWorld::create(n, machine) : make_cuda_world(n, machine);
  spawn_ranks(options, [&](ProcessGroup& pg) {
    Tensor t = Tensor::from_floats(random_values(pg.rank(), count), {count}, pg.device());
    pg.all_reduce(t, {.op = op, .slices = 3})->wait();
    got[static_cast<size_t>(pg.rank())] = t.to_vector();
  });
  return got;
}

TEST(GpuBackends, CudaResultsAreBitIdenticalToSimForTheSameSchedule) {
  if (!cuda::built() || !has_gpu()) GTEST_SKIP() << "needs a CUDA GPU: " << cuda::unavailable_reason();
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kNaive}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      SCOPED_TRACE(fmt::format("algo={} op={}", to_string(algo), to_string(op)));
      const auto sim = all_reduce_on("sim", algo, op, 4, 10007);
      const auto gpu = all_reduce_on("cuda", algo, op, 4, 10007);
      for (int r = 0; r < 4; ++r) EXPECT_TRUE(sim[r] == gpu[r]) << "rank " << r;
    }
  }
}

TEST(GpuBackends, NcclRunsAWorldOfOneRank) {
  if (!cuda::built() || !has_gpu()) GTEST_SKIP() << "needs a CUDA GPU: " << cuda::unavailable_reason();
  std::vector<float> got;
  spawn_ranks({.backend = "nccl", .world_size = 1, .world = make_cuda_world(1)}, [&](ProcessGroup& pg) {
    Tensor t = Tensor::from_floats(std::vector<float>{1.0f, 2.0f, 3.0f}, {3}, pg.device());
    pg.all_reduce(t, {.op = ReduceOp::kSum})->wait();
    pg.barrier()->wait();
    got = t.to_vector();
  });
  EXPECT_EQ(got, (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

}  // namespace
}  // namespace dpscope

namespace dpscope {
namespace {

TEST(GpuBench, BackendsAreCheckedBeforeAnythingRuns) {
  EXPECT_EQ(error_of([] { validate_bench_options({.backend = "gloo"}); }).message,
            "--backend gloo: expected sim, cuda, nccl or mpi");
  const Outcome timing = error_of([] { validate_bench_options({.backend = "cuda", .timing_only = true}); });
  EXPECT_EQ(timing.kind, ErrorKind::kUsage);
  EXPECT_EQ(timing.message, "--timing-only simulates without data: it is for --backend sim, not cuda");
  if (has_gpu()) return;
  for (const char* backend : {"cuda", "nccl"}) {
    const Outcome e = error_of([&] { validate_bench_options({.backend = backend, .devices = 2}); });
    EXPECT_EQ(e.kind, ErrorKind::kDevice) << backend;
    EXPECT_EQ(e.message, fmt::format("--backend {}: {}", backend, cuda::unavailable_reason()));
  }
}

TEST(GpuBench, NcclWithMoreDevicesThanGpusIsAUsageError) {
  if (!cuda::built() || !has_gpu()) GTEST_SKIP() << "needs a CUDA GPU: " << cuda::unavailable_reason();
  const int devices = cuda::physical_device_count() + 1;
  const Outcome e = error_of([&] { validate_bench_options({.backend = "nccl", .devices = devices}); });
  EXPECT_EQ(e.kind, ErrorKind::kUsage);
  EXPECT_EQ(e.message, nccl_world_size_problem(devices, cuda::physical_device_count()));
}

TEST(GpuBench, CudaRowsAreMeasuredAndExact) {
  if (!cuda::built() || !has_gpu()) GTEST_SKIP() << "needs a CUDA GPU: " << cuda::unavailable_reason();
  for (OpType op : {OpType::kAllReduce, OpType::kAllGather, OpType::kReduceScatter, OpType::kBroadcast,
                    OpType::kReduce}) {
    const std::vector<BenchRow> rows = run_collective_bench({.collective = op,
                                                             .backend = "cuda",
                                                             .devices = 4,
                                                             .min_bytes = 1024,
                                                             .max_bytes = 1 << 20,
                                                             .factor = 32,
                                                             .only = std::nullopt});
    ASSERT_EQ(rows.size(), 3u) << api_name(op);
    for (const BenchRow& r : rows) {
      for (const BenchColumn* c : {&r.out_of_place, &r.in_place}) {
        EXPECT_EQ(c->wrong, 0) << api_name(op) << " " << r.bytes;
        EXPECT_GT(c->sim_us, 0.0) << api_name(op) << " " << r.bytes;
      }
    }
  }
}

}  // namespace
}  // namespace dpscope

namespace dpscope {
namespace {

// (type, category, name, device) of every comm event in a trace, counted: what the visualizer
// keys on, without the times.
std::multiset<std::string> comm_events(const std::filesystem::path& path) {
  std::stringstream lines(test::read_file(path));
  std::multiset<std::string> seen;
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    const nlohmann::json e = nlohmann::json::parse(line);
    if (e.value("stream", "") != "comm" && e.value("type", "") != "instant") continue;
    seen.insert(fmt::format("{} {} {} dev{}", e.value("type", ""), e.value("cat", ""), e.value("name", ""),
                            e.value("dev", -1)));
  }
  return seen;
}

// A traced 3-rank world on `backend`: ring all-reduce (avg) then tree broadcast.
void traced_collectives(const std::string& backend, const std::filesystem::path& path) {
  SimWorldOptions machine = test::round_options();
  const int n = 3;
  if (backend == "sim") {
    for (int r = 0; r < n; ++r) machine.devices.push_back(Device::sim(r, *machine.hardware));
  } else {
    machine.devices = cuda::make_devices({.count = n});
  }
  TraceHeader header;
  if (backend != "sim") header.clock = "measured";
  for (const Device& d : machine.devices) add_trace_device(header, d);
  std::unique_ptr<TraceRecorder> recorder = TraceRecorder::open(path, header, machine.devices);
  spawn_ranks({.backend = backend, .world_size = n, .world = SimWorld::create(n, machine)},
              [](ProcessGroup& pg) {
                Tensor t = Tensor::full({4096}, static_cast<float>(pg.rank()), pg.device());
                pg.all_reduce(t, {.op = ReduceOp::kAvg, .algorithm = Algorithm::kRing, .slices = 2})->wait();
                pg.broadcast(t, {.root = 1, .algorithm = Algorithm::kTree})->wait();
              });
  recorder->close();
}

TEST(GpuBackends, CudaTracesTheSameEventsAsSim) {
  if (!cuda::built() || !has_gpu()) GTEST_SKIP() << "needs a CUDA GPU: " << cuda::unavailable_reason();
  traced_collectives("sim", test::temp_path("sim.jsonl"));
  traced_collectives("cuda", test::temp_path("cuda.jsonl"));
  const std::multiset<std::string> sim = comm_events(test::temp_path("sim.jsonl"));
  EXPECT_GT(sim.size(), 20u);
  EXPECT_EQ(comm_events(test::temp_path("cuda.jsonl")), sim);
}

}  // namespace
}  // namespace dpscope
