// Our schedules over MPI point-to-point (the mpi backend with ring, tree or naive): every algorithm
// x collective x size on world sizes 1 .. mpirun's -np (ctest mpi_schedules_np2/3/4), each rank's
// result bit for bit the sim backend's for the same schedule — computed in this process by a
// SimWorld of the same size (rank threads), as tests/runtime/comm compares cuda with sim — and
// within float tolerance of MPI's own collective; the group's default from $DPSCOPE_ALGO; the
// transfer events each rank traces are the sim's for that rank, with src_rank/dst_rank set.
// Failures of schedules (a skipped collective, ranks on different algorithms) are in
// mpi_failures_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <tuple>

#include "dpscope/comm/network.hpp"
#include "dpscope/comm/sim_world.hpp"
#include "dpscope/comm/spawn.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/trace/recorder.hpp"
#include "mpi_world.hpp"
#include "support/temp_files.hpp"

namespace dpscope {
namespace {

using test::join;
using test::mpi_rank;
using test::mpi_size;
using test::world_sizes;
using ::testing::HasSubstr;

// Sizes not divisible by 2, 3 or 4 among them (13, 10007: primes), and 0.
constexpr int64_t kSizes[] = {0, 1, 13, 1000, 10007};
constexpr Algorithm kAlgorithms[] = {Algorithm::kRing, Algorithm::kTree, Algorithm::kNaive};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kProduct,
                             ReduceOp::kMin};
// The preset of the SimWorlds compared with: NVSwitch, so the sim's ring is the ranks in order, as
// the mpi backend's (checked in RingOrderIsTheRanksInOrder).
constexpr const char* kPreset = "h100-sxm";

enum class Coll { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kScatter, kGather };

const char* name_of(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "all_reduce";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kReduce: return "reduce";
    case Coll::kAllGather: return "all_gather";
    case Coll::kReduceScatter: return "reduce_scatter";
    case Coll::kScatter: return "scatter";
    case Coll::kGather: return "gather";
  }
  return "?";
}

struct Case {
  Coll coll = Coll::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;  // what the call asks for (kDefault: the group's default)
  int64_t count = 0;  // elements per rank (all_gather: the input; reduce_scatter: the output)
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  int slices = 0;
  std::string describe() const {
    return fmt::format("{} {} count={} op={} root={} slices={}", name_of(coll), to_string(algorithm), count,
                       to_string(op), root, slices);
  }
};

// Random floats, whose sums depend on the order of additions: equal bits mean the same order.
// Products of them stay away from 0 and infinity ([0.5, 2) in magnitude).
std::vector<float> random_values(int rank, int64_t count, int salt, ReduceOp op) {
  std::mt19937 gen(static_cast<uint32_t>(7919 * rank + 104729 * salt + 1));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) {
    x = dist(gen);
    if (op == ReduceOp::kProduct) x = x < 0.0f ? x - 1.0f : 0.5f + x;
  }
  return v;
}

Tensor tensor_of(const std::vector<float>& values, const Device& device) {
  return Tensor::from_floats(values, {static_cast<int64_t>(values.size())}, device);
}

std::vector<float> joined(const std::vector<Tensor>& tensors) {
  std::vector<float> all;
  for (const Tensor& t : tensors)
    for (float v : t.to_vector()) all.push_back(v);
  return all;
}

// What rank pg.rank() holds after `c` (asking for `algorithm`) with this test's inputs. Gathering
// and scattering collectives run in both their list and flat forms, one after the other.
std::vector<float> run_case(ProcessGroup& pg, const Case& c, Algorithm algorithm) {
  const int n = pg.size();
  const int r = pg.rank();
  const Device& d = pg.device();
  auto rank_values = [&](int salt) { return random_values(r, c.count, salt, c.op); };
  switch (c.coll) {
    case Coll::kAllReduce: {
      Tensor t = tensor_of(rank_values(0), d);
      pg.all_reduce(t, {.op = c.op, .algorithm = algorithm, .slices = c.slices})->wait();
      return t.to_vector();
    }
    case Coll::kBroadcast: {
      Tensor t = tensor_of(rank_values(0), d);
      pg.broadcast(t, {.root = c.root, .algorithm = algorithm, .slices = c.slices})->wait();
      return t.to_vector();
    }
    case Coll::kReduce: {
      Tensor t = tensor_of(rank_values(0), d);
      pg.reduce(t, {.root = c.root, .op = c.op, .algorithm = algorithm, .slices = c.slices})->wait();
      return t.to_vector();  // non-roots: unchanged
    }
    case Coll::kAllGather: {
      const Tensor input = tensor_of(rank_values(0), d);
      std::vector<Tensor> outputs;
      for (int k = 0; k < n; ++k) outputs.push_back(Tensor::zeros({c.count}, d));
      pg.all_gather(outputs, input, {.algorithm = algorithm, .slices = c.slices})->wait();
      Tensor flat = Tensor::zeros({c.count * n}, d);
      pg.all_gather_into_tensor(flat, input, {.algorithm = algorithm, .slices = c.slices})->wait();
      std::vector<float> got = joined(outputs);
      for (float v : flat.to_vector()) got.push_back(v);
      return got;
    }
    case Coll::kReduceScatter: {
      std::vector<Tensor> inputs;
      std::vector<float> flat_values;
      for (int k = 0; k < n; ++k) {
        inputs.push_back(tensor_of(rank_values(k), d));
        for (float v : inputs.back().to_vector()) flat_values.push_back(v);
      }
      Tensor output = Tensor::zeros({c.count}, d);
      pg.reduce_scatter(output, inputs, {.op = c.op, .algorithm = algorithm, .slices = c.slices})->wait();
      Tensor flat_output = Tensor::zeros({c.count}, d);
      const Tensor flat = tensor_of(flat_values, d);
      pg.reduce_scatter_tensor(flat_output, flat, {.op = c.op, .algorithm = algorithm, .slices = c.slices})
          ->wait();
      std::vector<float> got = output.to_vector();
      for (float v : flat_output.to_vector()) got.push_back(v);
      return got;
    }
    case Coll::kScatter: {
      std::vector<Tensor> inputs;
      if (r == c.root)
        for (int k = 0; k < n; ++k) inputs.push_back(tensor_of(rank_values(k), d));
      Tensor output = Tensor::zeros({c.count}, d);
      pg.scatter(output, inputs, {.root = c.root})->wait();
      return output.to_vector();
    }
    case Coll::kGather: {
      const Tensor input = tensor_of(rank_values(0), d);
      std::vector<Tensor> outputs;
      if (r == c.root)
        for (int k = 0; k < n; ++k) outputs.push_back(Tensor::zeros({c.count}, d));
      pg.gather(input, outputs, {.root = c.root})->wait();
      return joined(outputs);
    }
  }
  return {};
}

// Every rank's result of `c` on a SimWorld of n rank threads whose default algorithm is `algorithm`
// (what calls of c.algorithm kDefault run).
std::vector<std::vector<float>> on_sim(int n, const Case& c, Algorithm algorithm) {
  std::vector<std::vector<float>> got(static_cast<size_t>(n));
  spawn(n, [&](ProcessGroup& pg) { got[static_cast<size_t>(pg.rank())] = run_case(pg, c, c.algorithm); },
        {.preset = kPreset, .timeout = Milliseconds(60000), .algorithm = algorithm});
  return got;
}

// Equal bits (EXPECT_EQ on floats would let -0.0 equal 0.0).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The cases of one world size: every collective with every algorithm it offers, every size.
std::vector<Case> cases_for(int n) {
  std::vector<Case> cases;
  int index = 0;
  for (int64_t count : kSizes) {
    for (int slices : {0, 3}) {
      const ReduceOp op = kOps[index++ % std::size(kOps)];
      const int root = static_cast<int>(count + slices) % n;
      for (Algorithm algo : kAlgorithms) {
        for (Coll coll : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce})
          cases.push_back({coll, algo, count, op, root, slices});
      }
      for (Coll coll : {Coll::kAllGather, Coll::kReduceScatter})
        cases.push_back({coll, Algorithm::kRing, count, op, root, slices});
    }
  }
  return cases;
}

class MpiSchedules : public ::testing::Test {
 protected:
  void SetUp() override { DPS_REQUIRE_MPIRUN(); }
};

TEST_F(MpiSchedules, RingOrderIsTheRanksInOrder) {
  // The mpi backend's rings visit the ranks in order; so do the sim's on this preset's NVSwitch,
  // which is what makes their schedules, and results, the same.
  const NetworkModel net(find_preset(kPreset), 8);
  for (int n : world_sizes()) {
    std::vector<int> gpus(static_cast<size_t>(n));
    std::iota(gpus.begin(), gpus.end(), 0);
    EXPECT_EQ(net.ring_order(gpus), gpus) << "n=" << n;
  }
}

TEST_F(MpiSchedules, EveryAlgorithmAndCollectiveIsBitIdenticalToTheSimBackend) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    for (const Case& c : cases_for(n)) {
      SCOPED_TRACE(fmt::format("n={} {}", n, c.describe()));
      const std::vector<float> mine = run_case(*pg, c, c.algorithm);
      const std::vector<float> sim = on_sim(n, c, c.algorithm)[static_cast<size_t>(pg->rank())];
      EXPECT_TRUE(same_bits(mine, sim)) << "rank " << pg->rank();
      // MPI's own collective: the same sums, perhaps in another order.
      const std::vector<float> own = run_case(*pg, c, Algorithm::kAuto);
      ASSERT_EQ(mine.size(), own.size());
      for (size_t i = 0; i < mine.size(); ++i) EXPECT_NEAR(mine[i], own[i], 2e-6f * n) << "element " << i;
    }
  }
}

TEST_F(MpiSchedules, Int64TensorsAreExactOnEverySchedule) {
  for (int n : world_sizes()) {
    const auto pg = join(n);
    if (!pg) continue;
    for (Algorithm algo : kAlgorithms) {
      const std::vector<int64_t> values = {int64_t{1} << 40, pg->rank(), -3 * pg->rank(), 7};
      Tensor t = Tensor::from_ints(values, {4}, pg->device());
      pg->all_reduce(t, {.op = ReduceOp::kSum, .algorithm = algo})->wait();
      const int64_t s = int64_t{n} * (n - 1) / 2;
      EXPECT_EQ(t.to_ints(), (std::vector<int64_t>{n * (int64_t{1} << 40), s, -3 * s, 7 * n}))
          << "n=" << n << " " << to_string(algo);
    }
  }
}

// Sets $DPSCOPE_ALGO while in scope (init_process_group reads it).
class ScopedAlgoEnv {
 public:
  explicit ScopedAlgoEnv(const char* value) { setenv("DPSCOPE_ALGO", value, 1); }
  ~ScopedAlgoEnv() { unsetenv("DPSCOPE_ALGO"); }
  ScopedAlgoEnv(const ScopedAlgoEnv&) = delete;
  ScopedAlgoEnv& operator=(const ScopedAlgoEnv&) = delete;
};

// The group's default, from $DPSCOPE_ALGO at init.
std::shared_ptr<ProcessGroup> join_with_default(int n, const char* algo) {
  ScopedAlgoEnv env(algo);
  return join(n);
}

// The `algo` of each `collective` span in the trace at `path`, in order.
std::vector<std::string> traced_algorithms(const std::filesystem::path& path) {
  std::vector<std::string> algos;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    const nlohmann::json e = nlohmann::json::parse(line);
    if (e.value("cat", "") == "collective") algos.push_back(e["args"]["algo"].get<std::string>());
  }
  return algos;
}

TEST_F(MpiSchedules, DpscopeAlgoIsTheGroupsDefault) {
  // As on the sim backend: calls that name no algorithm run $DPSCOPE_ALGO's where the op offers
  // it (else MPI's own: all_gather under tree); scatter and gather then run their naive schedule;
  // a call naming one (auto included) overrides it.
  for (int n : world_sizes()) {
    for (Algorithm algo : kAlgorithms) {
      const auto pg = join_with_default(n, to_string(algo));
      if (!pg) continue;
      testing::TempDir dir("default_algo");
      TraceHeader header;
      add_trace_device(header, pg->device());
      auto recorder = TraceRecorder::open(dir / "rank.jsonl", header, {&pg->device(), 1});
      const int root = n - 1;
      for (Coll coll : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kScatter,
                        Coll::kGather}) {
        const Case c{coll, Algorithm::kDefault, 13, ReduceOp::kAvg, root, 2};
        SCOPED_TRACE(fmt::format("n={} default {}: {}", n, to_string(algo), c.describe()));
        const std::vector<float> mine = run_case(*pg, c, Algorithm::kDefault);
        EXPECT_TRUE(same_bits(mine, on_sim(n, c, algo)[static_cast<size_t>(pg->rank())]));
      }
      Tensor t = Tensor::zeros({5}, pg->device());
      pg->all_reduce(t, {.algorithm = Algorithm::kAuto})->wait();
      recorder->close();
      const char* mine = to_string(algo);
      const std::string gathers = algo == Algorithm::kRing ? "ring" : "auto";
      EXPECT_EQ(traced_algorithms(dir / "rank.jsonl"),
                (std::vector<std::string>{mine, mine, mine, gathers, gathers, "naive", "naive", "auto"}));
    }
  }
}

TEST_F(MpiSchedules, ABadDpscopeAlgoFailsInit) {
  ScopedAlgoEnv env("spiral");
  try {
    join(mpi_size());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_STREQ(e.what(), "DPSCOPE_ALGO: unknown algorithm 'spiral' (expected ring, tree, naive or auto)");
  }
}

// ---- traces ----

// The fields of a `transfer` event that do not depend on time or on whose file it is in.
struct Transfer {
  std::string name;
  uint64_t bytes = 0;
  int64_t coll = 0;
  std::string algo;
  int algo_step = 0;
  int chunk = 0;
  int dst_rank = 0;
  bool operator==(const Transfer&) const = default;
};

void PrintTo(const Transfer& t, std::ostream* os) {
  *os << fmt::format("{{{} bytes={} coll={} {} step={} chunk={} to rank {}}}", t.name, t.bytes, t.coll,
                     t.algo, t.algo_step, t.chunk, t.dst_rank);
}

struct RankEvents {
  std::vector<Transfer> transfers;  // sent by the rank, in file order
  int reductions = 0;               // `reduce <op>` spans of the rank (not avg_scale)
  std::vector<nlohmann::json> raw;  // its transfer events as written
};

// The events of `rank` in the trace at `path`; `rank_of_device` maps the trace's device ids to
// ranks (sim traces), or is empty when dst_rank says it (mpi traces).
RankEvents events_of(const std::filesystem::path& path, int rank, const std::map<int, int>& rank_of_device) {
  RankEvents out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const nlohmann::json e = nlohmann::json::parse(line);
    if (e["rank"].get<int>() != rank) continue;
    if (e["type"] == "transfer") {
      const int dst =
          rank_of_device.empty() ? e["dst_rank"].get<int>() : rank_of_device.at(e["dst"].get<int>());
      out.transfers.push_back({e["name"].get<std::string>(), e["bytes"].get<uint64_t>(),
                               e["coll"].get<int64_t>(), e["algo"].get<std::string>(),
                               e["algo_step"].get<int>(), e["chunk"].get<int>(), dst});
      out.raw.push_back(e);
    } else if (e.value("cat", "") == "reduce" && e.value("name", "") != "avg_scale") {
      ++out.reductions;
    }
  }
  return out;
}

// Runs `fn` on every rank of a traced SimWorld of n ranks (algorithm `algo`), writing `path`;
// returns the device-id -> rank map of its trace.
std::map<int, int> traced_sim_run(int n, Algorithm algo, const std::filesystem::path& path,
                                  const RankFunction& fn) {
  const HardwarePreset hw = find_preset(kPreset);
  SimWorldOptions options{.preset = kPreset, .timeout = Milliseconds(60000), .algorithm = algo};
  TraceHeader header;
  std::map<int, int> rank_of_device;
  for (int r = 0; r < n; ++r) {
    options.devices.push_back(Device::sim(r, hw));
    rank_of_device[add_trace_device(header, options.devices.back())] = r;
  }
  auto recorder = TraceRecorder::open(path, header, options.devices);
  spawn(SimWorld::create(n, options), fn);
  recorder->close();
  return rank_of_device;
}

TEST_F(MpiSchedules, EachRankTracesTheSimsTransfersWithTheirProcessRanks) {
  const int n = mpi_size();
  if (n < 2) GTEST_SKIP() << "needs mpirun -np 2 or more";
  const auto pg = join(n);
  testing::TempDir dir("schedule_trace");
  // The same three collectives on both backends: a pipelined ring all-reduce of a size the ranks do
  // not divide, a tree broadcast and a naive reduce.
  auto three = [](ProcessGroup& g) {
    Tensor a = tensor_of(random_values(g.rank(), 1003, 0, ReduceOp::kSum), g.device());
    g.all_reduce(a, {.op = ReduceOp::kAvg, .algorithm = Algorithm::kRing, .slices = 2})->wait();
    Tensor b = tensor_of(random_values(g.rank(), 50, 1, ReduceOp::kSum), g.device());
    g.broadcast(b, {.root = 1, .algorithm = Algorithm::kTree})->wait();
    g.reduce(b, {.root = 0, .op = ReduceOp::kSum, .algorithm = Algorithm::kNaive})->wait();
  };
  TraceHeader header;
  header.clock = "measured";
  add_trace_device(header, pg->device());
  auto recorder = TraceRecorder::open(dir / "mpi.jsonl", header, {&pg->device(), 1});
  three(*pg);
  recorder->close();
  const std::map<int, int> sim_devices = traced_sim_run(n, Algorithm::kAuto, dir / "sim.jsonl", three);

  const int me = pg->rank();
  const RankEvents mpi = events_of(dir / "mpi.jsonl", me, {});
  const RankEvents sim = events_of(dir / "sim.jsonl", me, sim_devices);
  EXPECT_EQ(mpi.transfers, sim.transfers);
  EXPECT_EQ(mpi.reductions, sim.reductions);
  // Ring all-reduce: one chunk per rank per step per slice, 2(n-1) steps, 2 slices.
  std::map<int, int> ring_per_step;
  for (const Transfer& t : mpi.transfers)
    if (t.coll == 0) ++ring_per_step[t.algo_step];
  EXPECT_EQ(static_cast<int>(ring_per_step.size()), 2 * (n - 1));
  for (const auto& [step, count] : ring_per_step) EXPECT_EQ(count, 2) << "step " << step;
  for (const nlohmann::json& e : mpi.raw) {
    // This rank's device (id 0 in its own file) sends; the other end is the peer's, in its file.
    EXPECT_EQ(e["src_rank"].get<int>(), me) << e.dump();
    EXPECT_NE(e["dst_rank"].get<int>(), me) << e.dump();
    EXPECT_EQ(e["src"].get<int>(), 0) << e.dump();
    EXPECT_EQ(e["dst"].get<int>(), 0) << e.dump();
    EXPECT_EQ(e["stream"].get<std::string>(), "comm") << e.dump();
    EXPECT_GE(e["dur"].get<int64_t>(), 0) << e.dump();
  }
  // Sim traces, one file for every rank, carry no process ranks.
  for (const nlohmann::json& e : sim.raw) EXPECT_FALSE(e.contains("src_rank") || e.contains("dst_rank"));
  std::ifstream mpi_file(dir / "mpi.jsonl");
  const std::string all((std::istreambuf_iterator<char>(mpi_file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(all, HasSubstr(R"("name":"all_reduce ring)"));
  EXPECT_THAT(all, HasSubstr(R"("name":"avg scale")"));
}

TEST_F(MpiSchedules, SubGroupsRunThemAmongTheirMembersNamingProcessRanks) {
  // The ranks 1..n-1 of the world: group rank g is process rank g + 1, which traces name.
  const int n = mpi_size();
  if (n < 3) GTEST_SKIP() << "needs mpirun -np 3 or more";
  const auto world = join(n);
  std::vector<int> members(static_cast<size_t>(n - 1));
  std::iota(members.begin(), members.end(), 1);
  const std::shared_ptr<ProcessGroup> sub = world->new_group(members);
  if (!sub) return;  // rank 0
  testing::TempDir dir("sub_group");
  TraceHeader header;
  header.clock = "measured";
  add_trace_device(header, sub->device());
  auto recorder = TraceRecorder::open(dir / "rank.jsonl", header, {&sub->device(), 1});
  Tensor t = Tensor::full({7}, static_cast<float>(world->rank()), sub->device());
  sub->all_reduce(t, {.algorithm = Algorithm::kRing})->wait();
  recorder->close();
  const float sum = static_cast<float>(n * (n - 1) / 2);
  EXPECT_EQ(t.to_vector(), std::vector<float>(7, sum));
  const RankEvents mine = events_of(dir / "rank.jsonl", world->rank(), {});
  ASSERT_FALSE(mine.raw.empty());
  for (const nlohmann::json& e : mine.raw) {
    EXPECT_EQ(e["src_rank"].get<int>(), world->rank()) << e.dump();
    EXPECT_EQ(e["dst_rank"].get<int>(), world->rank() == n - 1 ? 1 : world->rank() + 1) << e.dump();
  }
}

}  // namespace
}  // namespace dpscope
