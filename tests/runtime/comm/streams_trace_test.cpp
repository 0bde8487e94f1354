// Simulated time and traces: collectives run on the comm stream from max(comm, compute) and
// Work::wait() makes compute wait; the exact ring formula through the whole stack; results and
// traces bit-identical across runs; timing-only runs time and trace exactly like data runs, and
// simulate a 1 GiB all-reduce over 64 GPUs in seconds.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "comm_test_util.hpp"
#include "dpscope/comm/nccl_cost_model.hpp"

namespace dpscope {
namespace {

using test::round_options;

TEST(Streams, ACollectiveStartsWhenTheInputIsReadyAndWaitMovesCompute) {
  std::vector<std::array<int64_t, 4>> seen(2);
  spawn(
      2,
      [&](ProcessGroup& pg) {
        if (pg.rank() == 1) pg.device().advance(StreamKind::kCompute, 5000);  // rank 1's input is ready later
        Tensor t = Tensor::zeros({500}, pg.device());                         // 2000 bytes, chunks of 1000
        std::shared_ptr<Work> w = pg.all_reduce(t, {.algorithm = Algorithm::kRing, .slices = 1});
        const int64_t compute_before_wait = pg.device().clock_ns(StreamKind::kCompute);
        w->wait();
        seen[pg.rank()] = {w->start_ns(), w->end_ns(), compute_before_wait,
                           pg.device().clock_ns(StreamKind::kCompute)};
      },
      round_options());
  // Both ranks' transfers start at 5000: 2 steps of (1000 alpha + 1000 bytes) + one reduction of 1000 bytes.
  const int64_t end = 5000 + 2 * 2000 + 1000;
  EXPECT_EQ(seen[0], (std::array<int64_t, 4>{0, end, 0, end}));
  EXPECT_EQ(seen[1], (std::array<int64_t, 4>{5000, end, 5000, end}));
}

TEST(Streams, BackToBackCollectivesQueueOnTheCommStreamWhileComputeRunsOn) {
  std::vector<std::array<int64_t, 4>> seen(2);
  spawn(
      2,
      [&](ProcessGroup& pg) {
        Tensor a = Tensor::zeros({500}, pg.device()), b = Tensor::zeros({500}, pg.device());
        auto first = pg.all_reduce(a, {.algorithm = Algorithm::kRing, .slices = 1});
        pg.device().advance(StreamKind::kCompute, 100);  // compute continues (like the rest of backward)
        auto second = pg.all_reduce(b, {.algorithm = Algorithm::kRing, .slices = 1});
        const int64_t compute = pg.device().clock_ns(StreamKind::kCompute);
        first->wait();
        second->wait();
        seen[pg.rank()] = {first->end_ns(), second->start_ns(), second->end_ns(), compute};
      },
      round_options());
  const int64_t one = 2 * 2000 + 1000;
  for (const auto& s : seen) EXPECT_EQ(s, (std::array<int64_t, 4>{one, one, 2 * one, 100}));
}

TEST(Streams, RingAllReduceThroughTheStackMatchesTheClosedForm) {
  for (int n : {2, 3, 4, 5, 8}) {
    const int64_t count = 1024 * n;  // S = 4096 n bytes
    std::vector<int64_t> ends(n);
    spawn(
        n,
        [&](ProcessGroup& pg) {
          Tensor t = Tensor::meta({count}, pg.device());
          auto w = pg.all_reduce(t, {.algorithm = Algorithm::kRing, .slices = 1});
          ends[pg.rank()] = w->end_ns();
        },
        round_options());
    const int64_t s_bytes = 4 * count;
    const int64_t expected = 2 * (n - 1) * 1000 + 2 * (n - 1) * s_bytes / n + (n - 1) * s_bytes / n;
    for (int64_t e : ends) EXPECT_EQ(e, expected) << "n=" << n;
  }
}

TEST(Streams, AvgAddsOneScalingPassAtTheEnd) {
  std::vector<int64_t> ends(2);
  spawn(
      2,
      [&](ProcessGroup& pg) {
        Tensor t =
            Tensor::full({750}, 1.0f, pg.device());  // 3000 bytes: scaling reads + writes them at 3 B/ns
        ends[pg.rank()] =
            pg.all_reduce(t, {.op = ReduceOp::kAvg, .algorithm = Algorithm::kRing, .slices = 1})->end_ns();
      },
      round_options());
  const int64_t ring = 2 * (1000 + 1500) + 1500;
  EXPECT_EQ(ends[0], ring + 2000);
  EXPECT_EQ(ends[1], ring + 2000);
}

// Runs a mixed sequence of collectives on 5 ranks with random floats (sums are not exact, so
// the order of additions shows), writing a trace; returns every rank's results.
std::vector<std::vector<float>> traced_run(const std::filesystem::path& path, bool meta) {
  const int n = 5;
  test::TracedWorld tw = test::traced_world(n, path, round_options());
  std::vector<std::vector<float>> results(n);
  spawn(tw.world, [&](ProcessGroup& pg) {
    std::mt19937 gen(1234 + pg.rank());
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> values(1001);
    for (float& v : values) v = dist(gen);
    auto make = [&](int64_t count) {
      return meta ? Tensor::meta({count}, pg.device())
                  : Tensor::from_floats(std::span(values).first(count), {count}, pg.device());
    };
    pg.device().set_step(0);
    Tensor a = make(1001), b = make(1001), c = make(1000);
    pg.all_reduce(a, {.algorithm = Algorithm::kRing, .slices = 3})->wait();
    pg.all_reduce(b, {.algorithm = Algorithm::kTree, .slices = 2})->wait();
    pg.device().advance(StreamKind::kCompute, 1000 * pg.rank());
    pg.all_reduce(c, {.op = ReduceOp::kAvg, .algorithm = Algorithm::kAuto})->wait();
    Tensor gathered = meta ? Tensor::meta({n * 1000}, pg.device()) : Tensor::zeros({n * 1000}, pg.device());
    pg.all_gather_into_tensor(gathered, c)->wait();
    pg.broadcast(b, {.root = 3})->wait();
    pg.reduce(a, {.root = 1, .algorithm = Algorithm::kNaive})->wait();
    pg.barrier()->wait();
    if (!meta)
      for (const Tensor& t : {a, b, c}) {
        const std::vector<float> v = t.to_vector();
        results[pg.rank()].insert(results[pg.rank()].end(), v.begin(), v.end());
      }
  });
  tw.recorder->close();
  return results;
}

TEST(Determinism, ResultsAndTracesAreBitIdenticalAcrossRuns) {
  const auto first = traced_run(test::temp_path("a.jsonl"), false);
  const auto second = traced_run(test::temp_path("b.jsonl"), false);
  EXPECT_EQ(first, second);
  // b (tree all-reduce, then broadcast) and c (all-reduce avg) agree bit for bit on every rank.
  for (int r = 1; r < 5; ++r) {
    EXPECT_TRUE(std::equal(first[r].begin() + 1001, first[r].end(), first[0].begin() + 1001));
  }
  const std::string trace = test::read_file(test::temp_path("a.jsonl"));
  EXPECT_GT(trace.size(), 10000u);
  EXPECT_EQ(trace, test::read_file(test::temp_path("b.jsonl")));
}

TEST(Determinism, ATimingOnlyRunTracesExactlyLikeADataRun) {
  traced_run(test::temp_path("data.jsonl"), false);
  traced_run(test::temp_path("meta.jsonl"), true);
  EXPECT_EQ(test::read_file(test::temp_path("data.jsonl")), test::read_file(test::temp_path("meta.jsonl")));
}

std::vector<nlohmann::json> read_events(const std::filesystem::path& path) {
  std::stringstream lines(test::read_file(path));
  std::vector<nlohmann::json> events;
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) events.push_back(nlohmann::json::parse(line));
  return events;
}

TEST(Trace, EveryChunkReductionAndCollectiveIsAnEvent) {
  const int n = 4;
  const auto path = test::temp_path("ring.jsonl");
  test::TracedWorld tw = test::traced_world(n, path, round_options());
  spawn(tw.world, [](ProcessGroup& pg) {
    Tensor t = Tensor::full({4096}, 1.0f, pg.device());  // 16 KiB
    pg.all_reduce(t, {.algorithm = Algorithm::kRing, .slices = 2})->wait();
  });
  tw.recorder->close();
  const std::vector<nlohmann::json> events = read_events(path);
  int collectives = 0, transfers = 0, reductions = 0, completions = 0;
  std::set<int64_t> flows;
  for (const nlohmann::json& e : events) {
    if (e["type"] == "span" && e["cat"] == "collective") {
      ++collectives;
      EXPECT_EQ(e["name"], "all_reduce ring 16.00 KiB");
      EXPECT_EQ(e["stream"], "comm");
      EXPECT_EQ(e["args"]["coll"], 0);
      EXPECT_EQ(e["args"]["slices"], 2);
    } else if (e["type"] == "transfer") {
      ++transfers;
      EXPECT_EQ(e["coll"], 0);
      EXPECT_EQ(e["algo"], "ring");
      EXPECT_EQ(e["bytes"], 2048);
      EXPECT_EQ(e["src"], e["dev"]);
      const int step = e["algo_step"];
      EXPECT_EQ(e["name"], step < n - 1 ? "ring reduce-scatter" : "ring all-gather");
      flows.insert(e["flow"].get<int64_t>());
    } else if (e["type"] == "span" && e["cat"] == "reduce") {
      ++reductions;
      EXPECT_EQ(e["name"], "reduce sum");
    } else if (e["type"] == "instant" && e["name"] == "work_completed") {
      ++completions;
    }
  }
  EXPECT_EQ(collectives, n);
  EXPECT_EQ(transfers, 2 * (n - 1) * n * 2);
  EXPECT_EQ(flows.size(), static_cast<size_t>(transfers)) << "each transfer has its own flow id";
  EXPECT_EQ(reductions, (n - 1) * n * 2);
  EXPECT_EQ(completions, n);
}

TEST(Trace, TransferDeviceIdsMatchTheHeader) {
  const auto path = test::temp_path("ids.jsonl");
  test::TracedWorld tw = test::traced_world(3, path, round_options());
  spawn(tw.world, [](ProcessGroup& pg) {
    Tensor t = Tensor::full({3}, 1.0f, pg.device());
    pg.all_reduce(t, {.algorithm = Algorithm::kRing})->wait();
  });
  tw.recorder->close();
  std::stringstream lines(test::read_file(path));
  std::string header_line;
  std::getline(lines, header_line);
  const nlohmann::json header = nlohmann::json::parse(header_line);
  std::map<int, std::string> names;
  for (const auto& d : header["devices"]) names[d["id"]] = d["name"];
  for (const nlohmann::json& e : read_events(path)) {
    if (e["type"] != "transfer") continue;
    EXPECT_EQ(names[e["src"]].rfind("sim:", 0), 0u);
    EXPECT_EQ(names[e["dst"]].rfind("sim:", 0), 0u);
    EXPECT_EQ(names[e["dev"]], fmt::format("sim:{}", e["rank"].get<int>()));
  }
}

TEST(Trace, ValuesBeforeAndAfterTheAllReduceOnRequest) {
  const auto path = test::temp_path("values.jsonl");
  test::TracedWorld tw = test::traced_world(2, path, round_options());
  spawn(tw.world, [](ProcessGroup& pg) {
    Tensor t =
        Tensor::from_floats(std::vector<float>{pg.rank() + 1.0f, 2.0f, 0.0f, 4.0f, 5.0f}, {5}, pg.device());
    pg.all_reduce(t, {.op = ReduceOp::kAvg, .trace_values = true})->wait();
  });
  tw.recorder->close();
  std::map<std::pair<int, std::string>, nlohmann::json> values;
  for (const nlohmann::json& e : read_events(path))
    if (e["type"] == "values") values[{e["rank"].get<int>(), e["when"].get<std::string>()}] = e;
  ASSERT_EQ(values.size(), 4u);
  const nlohmann::json before = values[std::pair{1, std::string("before_reduce")}];
  const nlohmann::json after = values[std::pair{0, std::string("after_reduce")}];
  EXPECT_EQ(before["values"], nlohmann::json::parse("[2, 2, 0, 4]"));
  EXPECT_EQ(before["norm"], 7.0);  // of all 5 elements: sqrt(4 + 4 + 0 + 16 + 25)
  EXPECT_EQ(after["values"], nlohmann::json::parse("[1.5, 2, 0, 4]"));
  EXPECT_EQ(after["param"], -1);
}

TEST(TimingOnly, AGibibyteAllReduceOver64GpusSimulatesInSeconds) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> ends(64);
  SimWorldOptions o;
  o.preset = "h100-sxm";
  o.algorithm = Algorithm::kRing;
  spawn(
      64,
      [&](ProcessGroup& pg) {
        Tensor t = Tensor::meta({(1ll << 30) / 4}, pg.device());
        ends[pg.rank()] = pg.all_reduce(t)->end_ns();
      },
      o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 30.0);  // typically well under a second; generous for sanitizers and busy machines
  // NCCL's cost model's ring time, above the bandwidth bound 2 (n-1)/n S / B at 360 GB/s usable.
  const double bound_ns = 2.0 * 63 / 64 * (1ull << 30) / 360e9 * 1e9;
  const int64_t model = predict_nccl(*nccl_fabric(find_preset("h100-sxm"), 64, 1), OpType::kAllReduce,
                                     1ull << 30, {.algo = NcclAlgo::kRing})
                            .time_ns;
  for (int64_t e : ends) {
    EXPECT_GE(static_cast<double>(e), bound_ns);
    EXPECT_EQ(e, model);
  }
}

}  // namespace
}  // namespace dpscope
