// `dpscope trace import IN OUT` (trace_tools/kineto_import.hpp, docs/pytorch-import.md), run as the
// built binary: the committed torch.profiler traces of a two-rank gloo DDP run
// (tests/data/torch-profiler, made by make_fixtures.py) become a run of two rank files whose steps,
// phases, collectives, buckets and gradient-ready instants are those the fixtures hold (computed from
// the fixtures here, not written down); the strict reader and `trace stats` read it; and every
// malformed input or refused output is one line naming it and the reason.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "dpscope/trace_tools/reader.hpp"
#include "support/cli.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using dpscope::testing::expect_usage_error_line;
using dpscope::testing::run_dpscope;
using nlohmann::json;

const std::filesystem::path kFixtures =
    std::filesystem::path(DPSCOPE_TEST_DATA_DIR) / "torch-profiler" / "ddp-gloo";

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

json load_json(const std::filesystem::path& p) { return json::parse(testing::read_file(p)); }

std::vector<json> load_lines(const std::filesystem::path& p) {
  std::vector<json> lines;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// A Kineto event's time in wall-clock ns, as the importer computes it.
int64_t wall_ns(const json& trace, double ts_us) {
  return trace["baseTimeNanoseconds"].get<int64_t>() + std::llround(ts_us * 1e3);
}

// What a fixture holds, read with a general JSON parser.
struct FixtureRank {
  json trace;
  std::vector<json> steps;            // ProfilerStep#N, by time
  std::vector<json> ddp_forwards;     // DistributedDataParallel.forward
  std::vector<json> optimizer_steps;  // Optimizer.step#...
  std::vector<uint64_t>
      allreduce_bytes;      // c10d::allreduce_ calls inside the steps, in order: Input Dims x 4 (float)
  int accumulate_grad = 0;  // the autograd engine's AccumulateGrad inside the steps
};

FixtureRank fixture_rank(int rank) {
  FixtureRank f;
  f.trace = load_json(kFixtures / ("rank-" + std::to_string(rank) + ".pt.trace.json"));
  std::vector<json> events;
  for (const json& e : f.trace["traceEvents"])
    if (e.value("ph", "") == "X") events.push_back(e);
  std::sort(events.begin(), events.end(),
            [](const json& a, const json& b) { return a["ts"].get<double>() < b["ts"].get<double>(); });
  for (const json& e : events)
    if (e["name"].get<std::string>().starts_with("ProfilerStep#")) f.steps.push_back(e);
  auto in_steps = [&](const json& e) {
    for (const json& s : f.steps)
      if (e["ts"].get<double>() >= s["ts"].get<double>() &&
          e["ts"].get<double>() < s["ts"].get<double>() + s["dur"].get<double>())
        return true;
    return false;
  };
  for (const json& e : events) {
    const std::string name = e["name"];
    if (!in_steps(e)) continue;
    if (name == "DistributedDataParallel.forward") f.ddp_forwards.push_back(e);
    if (name.starts_with("Optimizer.step#")) f.optimizer_steps.push_back(e);
    if (name == "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad") ++f.accumulate_grad;
    if (name == "c10d::allreduce_") {
      uint64_t n = 1;
      for (const json& d : e["args"]["Input Dims"][0][0]) n *= d.get<uint64_t>();
      f.allreduce_bytes.push_back(n * 4);
    }
  }
  return f;
}

// The fixtures' common origin: the earliest ProfilerStep of the run.
int64_t run_origin_ns(const std::vector<FixtureRank>& ranks) {
  int64_t origin = INT64_MAX;
  for (const FixtureRank& f : ranks) origin = std::min(origin, wall_ns(f.trace, f.steps.front()["ts"]));
  return origin;
}

class KinetoImport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::scratch_dir();
    out_ = dir_ / "imported";
    const std::string args = "trace import " + quoted(kFixtures) + " " + quoted(out_);
    result_ = run_dpscope(args);
    ASSERT_EQ(result_.exit_code, 0) << args << "\n" << result_.output;
    fixtures_ = {fixture_rank(0), fixture_rank(1)};
  }
  std::filesystem::path dir_;
  std::filesystem::path out_;
  dpscope::testing::CommandResult result_;
  std::vector<FixtureRank> fixtures_;
};

TEST_F(KinetoImport, TheFixturesAreARealTwoRankDdpRun) {
  // The facts the other tests build on, so that a regenerated fixture that lacks them fails here.
  for (const FixtureRank& f : fixtures_) {
    EXPECT_EQ(f.trace["distributedInfo"]["backend"], "gloo");
    EXPECT_EQ(f.trace["distributedInfo"]["world_size"], 2);
    EXPECT_GE(f.steps.size(), 2u);
    EXPECT_EQ(f.ddp_forwards.size(), f.steps.size());
    EXPECT_EQ(f.optimizer_steps.size(), f.steps.size());
    EXPECT_EQ(f.allreduce_bytes.size() % f.steps.size(), 0u);
    EXPECT_GE(f.allreduce_bytes.size() / f.steps.size(), 2u) << "the gradients should split into two buckets";
  }
}

TEST_F(KinetoImport, WritesOneRankFilePerRankAndSaysWhatItFound) {
  EXPECT_TRUE(std::filesystem::is_regular_file(out_ / "rank-0.jsonl"));
  EXPECT_TRUE(std::filesystem::is_regular_file(out_ / "rank-1.jsonl"));
  EXPECT_EQ(result_.output.rfind("wrote " + out_.string() + " (2 ranks, ", 0), 0u) << result_.output;
  const std::string first = fixtures_[0].steps.front()["name"].get<std::string>().substr(13);
  EXPECT_NE(result_.output.find(
                fmt::format("rank 1: {} -> {}: {} steps (ProfilerStep#{} is step 0), {} collectives",
                            (kFixtures / "rank-1.pt.trace.json").string(), (out_ / "rank-1.jsonl").string(),
                            fixtures_[1].steps.size(), first, fixtures_[1].allreduce_bytes.size())),
            std::string::npos)
      << result_.output;
}

TEST_F(KinetoImport, HeadersSayWhereTheRunComesFromAndPutTheRanksOnOneClock) {
  for (int rank = 0; rank < 2; ++rank) {
    const json header = load_lines(out_ / fmt::format("rank-{}.jsonl", rank)).front();
    EXPECT_EQ(header["clock"], "measured");
    EXPECT_EQ(header["run"]["source"], "torch.profiler");
    EXPECT_EQ(header["run"]["backend"], "gloo");
    EXPECT_EQ(header["run"]["world_size"], 2);
    EXPECT_EQ(header["run"]["clock_origin_unix_ns"], run_origin_ns(fixtures_));
    EXPECT_EQ(header["run"]["process"],
              (json{{"rank", rank}, {"world_size", 2}, {"clock_offset_ns", 0}, {"clock_uncertainty_ns", 0}}));
    ASSERT_EQ(header["devices"].size(), 1u);
    EXPECT_EQ(header["devices"][0]["kind"], "cpu");
  }
}

TEST_F(KinetoImport, PhasesTileEachStepFromTheFixturesMarkers) {
  const int64_t origin = run_origin_ns(fixtures_);
  for (int rank = 0; rank < 2; ++rank) {
    const FixtureRank& f = fixtures_[rank];
    std::map<int, std::map<std::string, json>> phases;  // step -> phase -> span
    for (const json& e : load_lines(out_ / fmt::format("rank-{}.jsonl", rank)))
      if (e.value("cat", "") == "phase") phases[e["step"]][e["name"]] = e;
    ASSERT_EQ(phases.size(), f.steps.size()) << "rank " << rank;
    for (size_t s = 0; s < f.steps.size(); ++s) {
      const auto& p = phases[static_cast<int>(s)];
      const json& step = f.steps[s];
      const int64_t step_start = wall_ns(f.trace, step["ts"]) - origin;
      const int64_t step_end = step_start + std::llround(step["dur"].get<double>() * 1e3);
      ASSERT_EQ(p.size(), 4u) << "rank " << rank << " step " << s;
      EXPECT_EQ(p.at("data")["ts"], step_start);
      EXPECT_EQ(p.at("forward")["ts"], wall_ns(f.trace, f.ddp_forwards[s]["ts"]) - origin);
      EXPECT_EQ(p.at("optimizer")["ts"], wall_ns(f.trace, f.optimizer_steps[s]["ts"]) - origin);
      // Each phase ends where the next begins; the last one where the step ends.
      for (const auto& [a, b] :
           {std::pair{"data", "forward"}, {"forward", "backward"}, {"backward", "optimizer"}})
        EXPECT_EQ(p.at(a)["ts"].get<int64_t>() + p.at(a)["dur"].get<int64_t>(), p.at(b)["ts"]) << a;
      EXPECT_EQ(p.at("optimizer")["ts"].get<int64_t>() + p.at("optimizer")["dur"].get<int64_t>(), step_end);
    }
  }
}

TEST_F(KinetoImport, CollectivesBucketsAndGradReadyAreTheFixtures) {
  for (int rank = 0; rank < 2; ++rank) {
    const FixtureRank& f = fixtures_[rank];
    std::vector<uint64_t> coll_bytes;
    std::vector<json> bucket_events;
    int launched = 0;
    int done = 0;
    int ready = 0;
    for (const json& e : load_lines(out_ / fmt::format("rank-{}.jsonl", rank))) {
      if (e.value("cat", "") == "collective") {
        EXPECT_EQ(e["stream"], "comm");
        EXPECT_EQ(e["args"]["op"], "all_reduce");
        EXPECT_EQ(e["args"]["coll"], coll_bytes.size());
        EXPECT_EQ(e["phase"], "backward");
        coll_bytes.push_back(e["args"]["bytes"]);
      }
      if (e["type"] == "buckets") bucket_events.push_back(e);
      if (e.value("name", "") == "bucket_launched") ++launched;
      if (e.value("name", "") == "bucket_done") ++done;
      if (e.value("name", "") == "grad_ready") {
        EXPECT_EQ(e["args"]["param"], -1);
        ++ready;
      }
    }
    // The work's sizes (gloo:all_reduce) are the calls' (c10d::allreduce_), in the same order.
    EXPECT_EQ(coll_bytes, f.allreduce_bytes) << "rank " << rank;
    // DDP reduces the same buckets every step: one assignment, the first step's all-reduces.
    const size_t per_step = f.allreduce_bytes.size() / f.steps.size();
    ASSERT_EQ(bucket_events.size(), 1u);
    EXPECT_EQ(bucket_events[0]["reason"], "initial");
    EXPECT_EQ(bucket_events[0]["step"], 0);
    ASSERT_EQ(bucket_events[0]["buckets"].size(), per_step);
    for (size_t b = 0; b < per_step; ++b) {
      EXPECT_EQ(bucket_events[0]["buckets"][b]["id"], b);
      EXPECT_EQ(bucket_events[0]["buckets"][b]["bytes"], f.allreduce_bytes[b]);
      EXPECT_TRUE(bucket_events[0]["buckets"][b]["params"].empty())
          << "a profile does not name the parameters";
    }
    EXPECT_EQ(launched, static_cast<int>(f.allreduce_bytes.size()));
    EXPECT_EQ(done, launched);
    EXPECT_EQ(ready, f.accumulate_grad);
  }
}

TEST_F(KinetoImport, TheStrictReaderAndTraceStatsReadTheResult) {
  const TraceData data = read_trace(out_);  // strict: the first malformed line would throw
  EXPECT_EQ(data.ranks.size(), 2u);
  EXPECT_TRUE(data.problems.empty());
  size_t lines = 0;
  for (int rank = 0; rank < 2; ++rank)
    lines += load_lines(out_ / fmt::format("rank-{}.jsonl", rank)).size() - 1;
  EXPECT_EQ(data.events.size(), lines);
  const auto r = run_dpscope("trace stats " + quoted(out_));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 process ranks (rank-K.jsonl) on rank 0's clock"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu:1"), std::string::npos) << r.output;
}

TEST_F(KinetoImport, OneTraceBecomesOneFile) {
  const auto out = dir_ / "rank1.jsonl";
  const auto r =
      run_dpscope("trace import " + quoted(kFixtures / "rank-1.pt.trace.json") + " " + quoted(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("wrote " + out.string() + " (1 rank, ", 0), 0u) << r.output;
  const TraceData data = read_trace(out);
  EXPECT_TRUE(data.ranks.empty());
  const json header = load_lines(out).front();
  EXPECT_EQ(header["run"]["rank"], 1);
  EXPECT_FALSE(header["run"].contains("process"));
  // Alone, the rank's first step starts at 0.
  EXPECT_EQ(data.min_ts_ns, 0);
}

// docs/pytorch-import.md quotes this import: the fixtures' step numbers and a collective's name.
TEST_F(KinetoImport, TheDocsQuoteWhatTheImportOfTheFixturesGives) {
  const std::string doc =
      testing::read_file(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "docs" / "pytorch-import.md");
  const std::string first = fixtures_[0].steps[0]["name"].get<std::string>().substr(13);
  const std::string second = fixtures_[0].steps[1]["name"].get<std::string>().substr(13);
  EXPECT_NE(
      doc.find(fmt::format("the fixtures record `ProfilerStep#{}` and `#{}`: steps 0 and 1", first, second)),
      std::string::npos);
  std::string collective;
  for (const json& e : load_lines(out_ / "rank-0.jsonl"))
    if (e.value("cat", "") == "collective" && collective.empty()) collective = e["name"];
  EXPECT_NE(doc.find("name `" + collective + "`"), std::string::npos) << collective;
}

// ---- synthetic traces: rules the CPU fixtures cannot show, and every error ----

// A minimal Kineto trace: one ProfilerStep#5 of 100 us at 1000 us, plus `events` (JSON objects).
std::string kineto(
    const std::string& events,
    const std::string& extra = R"("distributedInfo":{"backend":"nccl","rank":0,"world_size":1},)") {
  return "{" + extra + R"("baseTimeNanoseconds":1000000,"traceEvents":[)" +
         R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#5","pid":1,"tid":1,"ts":1000,"dur":100})" +
         (events.empty() ? "" : "," + events) + "]}";
}

TEST(KinetoImportRules, NcclKernelsTimeTheCollectiveAndRecordParamCommsSizesIt) {
  const auto dir = testing::scratch_dir();
  const auto in = dir / "gpu.pt.trace.json";
  testing::write_file(
      in,
      kineto(
          R"({"ph":"X","cat":"user_annotation","name":"DistributedDataParallel.forward","pid":1,"tid":1,"ts":1010,"dur":10},)"
          R"({"ph":"X","cat":"cpu_op","name":"autograd::engine::evaluate_function: AddmmBackward0","pid":1,"tid":1,"ts":1030,"dur":5},)"
          R"({"ph":"X","cat":"cpu_op","name":"c10d::allreduce_","pid":1,"tid":1,"ts":1040,"dur":3},)"
          R"({"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":1,"ts":1040.5,"dur":2,"args":{"Collective name":"allreduce","In msg nelems":1000,"dtype":"Float"}},)"
          R"J({"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)","pid":0,"tid":7,"ts":1050,"dur":20,"args":{"device":3}},)J"
          R"({"ph":"X","cat":"user_annotation","name":"Optimizer.step#SGD.step","pid":1,"tid":1,"ts":1080,"dur":10})",
          R"("deviceProperties":[{"id":3,"name":"NVIDIA H100 80GB HBM3","totalGlobalMem":85000000000}],)"
          R"("distributedInfo":{"backend":"nccl","rank":0,"world_size":1},)"));
  const auto out = dir / "gpu.jsonl";
  const auto r = run_dpscope("trace import " + quoted(in) + " " + quoted(out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<json> lines = load_lines(out);
  EXPECT_EQ(lines[0]["devices"][0]["name"], "cuda:3");
  EXPECT_EQ(lines[0]["devices"][0]["hardware"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(lines[0]["devices"][0]["memory_bytes"], 85000000000);
  EXPECT_EQ(lines[0]["run"]["first_profiler_step"], 5);
  int collectives = 0;
  for (const json& e : lines) {
    if (e.value("cat", "") != "collective") continue;
    ++collectives;
    EXPECT_EQ(e["ts"], 50000);  // the kernel's start, 50 us after the step's
    EXPECT_EQ(e["dur"], 20000);
    EXPECT_EQ(e["args"]["bytes"], 4000);
    EXPECT_EQ(e["step"], 0);
    EXPECT_EQ(e["phase"], "backward");
  }
  EXPECT_EQ(collectives, 1);
  read_trace(out);  // strict
}

TEST(KinetoImportRules, OverlappingCollectivesAreDrawnOneAfterTheOther) {
  const auto dir = testing::scratch_dir();
  const auto in = dir / "t.pt.trace.json";
  testing::write_file(
      in,
      kineto(
          R"({"ph":"X","cat":"user_annotation","name":"gloo:all_reduce","pid":1,"tid":2,"ts":1010,"dur":30},)"
          R"({"ph":"X","cat":"user_annotation","name":"gloo:all_reduce","pid":1,"tid":3,"ts":1020,"dur":40})"));
  const auto out = dir / "t.jsonl";
  ASSERT_EQ(run_dpscope("trace import " + quoted(in) + " " + quoted(out)).exit_code, 0);
  std::vector<json> colls;
  for (const json& e : load_lines(out))
    if (e.value("cat", "") == "collective") colls.push_back(e);
  ASSERT_EQ(colls.size(), 2u);
  EXPECT_EQ(colls[0]["ts"], 10000);
  EXPECT_EQ(colls[0]["dur"], 30000);
  EXPECT_EQ(colls[1]["ts"], 40000);   // from the first one's end ...
  EXPECT_EQ(colls[1]["dur"], 20000);  // ... to its own
  EXPECT_EQ(colls[1]["args"]["overlap_ns"], 20000);
  EXPECT_EQ(colls[1]["phase"], "data");  // no forward, backward or optimizer marker: all data
}

struct BadInput {
  std::string name;
  std::string text;
  std::string reason;  // the end of the error line, after "FILE: "
};

TEST(KinetoImportErrors, EachMalformedTraceIsOneLineNamingTheFileAndTheReason) {
  const std::vector<BadInput> cases = {
      {"not-json", "{\"traceEvents\": [", "not JSON ("},
      {"array", "[1,2]", "not a torch.profiler trace: the file is not a JSON object"},
      {"no-events", "{\"schemaVersion\":1}", "not a torch.profiler trace: it has no 'traceEvents' array"},
      {"event-not-object", kineto("3"), "traceEvents[1]: not an object"},
      {"no-ph", kineto(R"({"name":"x"})"), "traceEvents[1]: no 'ph' (event type) string"},
      {"no-name", kineto(R"({"ph":"X","ts":1,"dur":1})"),
       "traceEvents[1]: a complete ('X') event without a 'name' string"},
      {"bad-ts", kineto(R"({"ph":"X","name":"k","ts":"soon","dur":1})"),
       "traceEvents[1]: ('k'): 'ts' must be a number of microseconds below 2305843009213693 in magnitude"},
      {"huge-ts", kineto(R"({"ph":"X","name":"k","ts":1e300,"dur":1})"),
       "traceEvents[1]: ('k'): 'ts' must be a number of microseconds below 2305843009213693 in magnitude"},
      {"negative-dur", kineto(R"({"ph":"X","name":"k","ts":1,"dur":-1})"),
       "traceEvents[1]: ('k'): 'dur' must be a non-negative number of microseconds"},
      {"bad-base", R"({"baseTimeNanoseconds":-5,"traceEvents":[]})",
       "'baseTimeNanoseconds' must be an integer from 0 to 2305843009213693951"},
      {"bad-distributed", kineto("", R"("distributedInfo":{"rank":2,"world_size":2},)"),
       "'distributedInfo' must hold integers 'rank' and 'world_size' with 0 <= rank < world_size <= 999999"},
      {"no-steps", R"({"traceEvents":[{"ph":"X","name":"aten::mm","ts":1,"dur":1}]})",
       "no ProfilerStep#N span: profile with a schedule and call prof.step() after every training step, so "
       "that "
       "dpscope can tell the steps apart"},
      {"step-without-number", kineto(R"({"ph":"X","name":"ProfilerStep#x","tid":1,"ts":2000,"dur":1})"),
       "'ProfilerStep#x' has no step number (ProfilerStep#N, N from 0 to 2147483647)"},
      {"steps-overlap", kineto(R"({"ph":"X","name":"ProfilerStep#6","tid":1,"ts":1050,"dur":100})"),
       "'ProfilerStep#6' starts before ProfilerStep#5 ends: the steps overlap"},
      {"steps-shrink", kineto(R"({"ph":"X","name":"ProfilerStep#4","tid":1,"ts":2000,"dur":100})"),
       "'ProfilerStep#4' comes after ProfilerStep#5: step numbers must grow"},
  };
  const auto dir = testing::scratch_dir();
  for (const BadInput& c : cases) {
    const auto in = dir / (c.name + ".json");
    testing::write_file(in, c.text);
    const std::string args = "trace import " + quoted(in) + " " + quoted(dir / (c.name + ".jsonl"));
    const auto r = run_dpscope(args);
    expect_usage_error_line(r, args, in.string() + ": " + c.reason);
    EXPECT_FALSE(std::filesystem::exists(dir / (c.name + ".jsonl"))) << c.name;
  }
}

TEST(KinetoImportErrors, GzipTracesAreRefusedClearly) {
  const auto dir = testing::scratch_dir();
  const auto named = dir / "r.pt.trace.json.gz";
  testing::write_file(named, kineto(""));
  std::string args = "trace import " + quoted(named) + " " + quoted(dir / "o.jsonl");
  expect_usage_error_line(
      run_dpscope(args), args,
      named.string() + ": a gzip-compressed trace; dpscope reads plain JSON: gunzip it first");
  const auto content = dir / "r.pt.trace.json";
  testing::write_file(content, std::string("\x1f\x8b\x08\x00", 4));
  args = "trace import " + quoted(content) + " " + quoted(dir / "o.jsonl");
  expect_usage_error_line(
      run_dpscope(args), args,
      content.string() + ": a gzip-compressed trace; dpscope reads plain JSON: gunzip it first");
  const auto in_dir = dir / "profile";
  std::filesystem::create_directories(in_dir);
  std::filesystem::copy_file(named, in_dir / "r.pt.trace.json.gz");
  args = "trace import " + quoted(in_dir) + " " + quoted(dir / "o.jsonl");
  expect_usage_error_line(run_dpscope(args), args,
                          (in_dir / "r.pt.trace.json.gz").string() + ": a gzip-compressed");
}

// A directory of rank traces, each file's text given.
std::filesystem::path rank_dir(const std::filesystem::path& dir, const std::vector<std::string>& texts) {
  std::filesystem::create_directories(dir);
  for (size_t i = 0; i < texts.size(); ++i)
    testing::write_file(dir / fmt::format("t{}.pt.trace.json", i), texts[i]);
  return dir;
}

std::string rank_trace(int rank, int world_size) {
  return kineto("", fmt::format(R"("distributedInfo":{{"backend":"gloo","rank":{},"world_size":{}}},)", rank,
                                world_size));
}

TEST(KinetoImportErrors, ADirectoryMustHoldOneRunsRanksEachOnce) {
  const auto dir = testing::scratch_dir();
  struct Case {
    std::string name;
    std::vector<std::string> texts;
    std::string message;  // after "dpscope: error: "
  };
  const std::vector<Case> cases = {
      {"empty", {}, "{DIR}: no torch.profiler trace (*.json) in this directory"},
      {"no-info",
       {rank_trace(0, 2), kineto("", "")},
       "{DIR}/t1.pt.trace.json: no 'distributedInfo' (rank, world_size): in a directory of several traces "
       "each "
       "must say its rank"},
      {"world",
       {rank_trace(0, 2), rank_trace(1, 3)},
       "{DIR}/t1.pt.trace.json: its world_size is 3, but {DIR}/t0.pt.trace.json says 2: the traces are not "
       "of one run"},
      {"twice",
       {rank_trace(0, 2), rank_trace(0, 2)},
       "{DIR}/t1.pt.trace.json: a second trace of rank 0 (the other is {DIR}/t0.pt.trace.json): import one "
       "profiling cycle at a time"},
      {"missing", {rank_trace(0, 3), rank_trace(2, 3)}, "{DIR}: no trace of rank 1 (the run has 3 ranks)"},
  };
  for (const Case& c : cases) {
    const auto in = rank_dir(dir / c.name, c.texts);
    std::string message = c.message;
    for (size_t at; (at = message.find("{DIR}")) != std::string::npos;) message.replace(at, 5, in.string());
    const std::string args = "trace import " + quoted(in) + " " + quoted(dir / (c.name + "-out"));
    const auto r = run_dpscope(args);
    EXPECT_EQ(r.output, "dpscope: error: " + message + "\n") << c.name;
    EXPECT_EQ(r.exit_code, 2) << c.name;
    EXPECT_FALSE(std::filesystem::exists(dir / (c.name + "-out"))) << c.name;
  }
}

TEST(KinetoImportErrors, OutIsCheckedBeforeAnythingIsRead) {
  const auto dir = testing::scratch_dir();
  const auto runs = rank_dir(dir / "run", {rank_trace(0, 2), rank_trace(1, 2)});
  const auto one = runs / "t0.pt.trace.json";
  const std::string before = testing::read_file(one);

  // OUT is the input itself: refused, the input untouched.
  std::string args = "trace import " + quoted(one) + " " + quoted(one);
  auto r = run_dpscope(args);
  expect_usage_error_line(r, args, "OUT");
  EXPECT_EQ(testing::read_file(one), before);

  // One trace into a directory, several into a file.
  args = "trace import " + quoted(one) + " " + quoted(dir);
  expect_usage_error_line(run_dpscope(args), args, "OUT");
  const auto file = dir / "file.jsonl";
  testing::write_file(file, "x");
  args = "trace import " + quoted(runs) + " " + quoted(file);
  expect_usage_error_line(
      run_dpscope(args), args,
      "OUT '" + file.string() +
          "' is not a directory: the 2 traces of IN are written as OUT/rank-K.jsonl, one per rank");
  EXPECT_EQ(testing::read_file(file), "x");

  // A FIFO is never written (nor waited on).
  const auto fifo = dir / "fifo.jsonl";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  args = "trace import " + quoted(one) + " " + quoted(fifo);
  expect_usage_error_line(dpscope::testing::run_dpscope_within(20, args), args, "OUT");

  // A directory that holds another run's rank files would mix two runs.
  const auto used = dir / "used";
  std::filesystem::create_directories(used);
  testing::write_file(used / "rank-2.jsonl", "x");
  args = "trace import " + quoted(runs) + " " + quoted(used);
  expect_usage_error_line(
      run_dpscope(args), args,
      "OUT '" + used.string() +
          "' already holds rank-2.jsonl, which this import would not replace: choose an empty "
          "directory");

  // A missing input.
  args = "trace import " + quoted(dir / "nope.json") + " " + quoted(dir / "o.jsonl");
  expect_usage_error_line(
      run_dpscope(args), args,
      "cannot read torch.profiler trace '" + (dir / "nope.json").string() + "': no such file");
}

}  // namespace
}  // namespace dpscope::trace
