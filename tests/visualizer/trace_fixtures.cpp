// Trace fixtures for the visualizer tests.
#include "trace_fixtures.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "dpscope/base/error.hpp"
#include "dpscope/core/preset.hpp"
#include "dpscope/nn/sequential.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "dpscope_bench/collective_bench.hpp"

namespace dpscope::viz::testing {

LoadedTrace load_trace(const std::filesystem::path& path) {
  LoadedTrace l;
  l.data = std::make_unique<trace::TraceData>(trace::read_trace(path));
  l.model = std::make_unique<ReplayModel>(*l.data);
  return l;
}

std::filesystem::path scratch_dir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::path(DPSCOPE_BINARY_DIR) / "test-output" / "visualizer" /
                              (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// A run (the model is set by run_traced) on `samples` seeded blobs rows: one batch per step and
// rank, so every step sees fresh rows.
TrainConfig fixture_config(TrainMode mode, int devices, int steps, int64_t batch, int64_t samples) {
  TrainConfig config;
  config.mode = mode;
  config.devices = devices;
  config.steps = steps;
  config.batch = batch;
  config.dataset = fmt::format("blobs:{}:784:10", samples);
  return config;
}

// Runs `config` with a trace at `path` and reads the GPUs' header ids back ("sim:R" is rank R).
RuntimeTrace run_traced(TrainConfig config, const std::filesystem::path& path) {
  config.model = kFixtureModel;
  config.shuffle = false;
  config.trace = path.string();
  RuntimeTrace out;
  out.result = run_training(config);
  out.config = std::move(config);
  const trace::TraceData data = trace::read_trace(path);
  out.gpu_ids.assign(static_cast<size_t>(out.config.devices), -1);
  for (const TraceDeviceInfo& d : data.header.devices) {
    if (d.kind == "host") out.host_id = d.id;
    if (d.kind != "sim") continue;
    const int rank = std::stoi(d.name.substr(d.name.find(':') + 1));
    if (rank >= 0 && rank < out.config.devices) out.gpu_ids[static_cast<size_t>(rank)] = d.id;
  }
  return out;
}

}  // namespace

RuntimeTrace write_ddp_trace(const std::filesystem::path& path, int devices, int steps, int64_t batch) {
  TrainConfig config = fixture_config(TrainMode::kDdp, devices, steps, batch, devices * batch * steps);
  config.algo = "ring";
  config.bucket_cap_mb = 0.25;      // 256 KiB
  config.first_bucket_mb = 0.0625;  // 64 KiB
  return run_traced(std::move(config), path);
}

RuntimeTrace write_dp_trace(const std::filesystem::path& path, int devices, int steps, int64_t batch) {
  return run_traced(fixture_config(TrainMode::kDataParallel, devices, steps, batch, batch * steps), path);
}

void write_failed_ddp_trace(const std::filesystem::path& path, int devices, const std::string& model,
                            int64_t batch) {
  const std::vector<int64_t> sizes = Sequential::parse_mlp_spec(model);
  TrainConfig config;
  config.mode = TrainMode::kDdp;
  config.devices = devices;
  config.model = model;
  config.dataset = fmt::format("blobs:{}:{}:{}", devices * batch * 4, sizes.front(), sizes.back());
  config.batch = batch;
  config.shuffle = false;
  config.steps = 3;
  config.pitfalls = {"mismatched-collective"};
  config.trace = path.string();
  EXPECT_THROW(run_training(config), Error);
}

RuntimeTrace write_single_trace(const std::filesystem::path& path, int steps) {
  return run_traced(fixture_config(TrainMode::kSingle, 1, steps, 16, 16 * steps), path);
}

HandTrace write_hand_trace(const std::filesystem::path& path) {
  const HardwarePreset h100 = find_preset("h100-sxm");
  Device g0 = Device::sim(0, h100);
  Device g1 = Device::sim(1, h100);
  TraceHeader header;
  HandTrace ids;
  ids.gpu0 = add_trace_device(header, g0);
  ids.gpu1 = add_trace_device(header, g1);
  ids.host = header.host_id;
  header.run_json = R"({"mode":"ddp","backend":"sim","devices":2})";
  const std::vector<Device> devices = {g0, g1};
  auto rec = TraceRecorder::open(path, header, devices);
  g0.set_rank(0);
  g1.set_rank(1);
  for (const Device& g : devices) {
    g.set_step(0);
    g.set_phase(Phase::kData);
  }
  const int64_t rows0[] = {0, 1};
  const int64_t rows1[] = {2, 3};
  rec->samples(g0, 0, rows0, std::nullopt);
  rec->samples(g1, 0, rows1, std::nullopt);
  MemoryStats m;
  m.bytes[static_cast<int>(MemoryCategory::kParameters)] = 100;
  m.capacity_bytes = 1000;
  rec->memory_counter(g0, 500, m);
  g0.set_phase(Phase::kForward);
  // The children are written before their parent: file order is not time order.
  rec->kernel_span(g0, StreamKind::kCompute, "forward 0.Linear", 1000, 1000, {});
  rec->kernel_span(g0, StreamKind::kCompute, "forward 2.Linear", 2000, 1000, {});
  rec->span(g0, {.stream = StreamKind::kCompute,
                 .cat = SpanCategory::kPhase,
                 .name = "forward",
                 .ts_ns = 1000,
                 .dur_ns = 2000});
  rec->instant(g0, 2000, GradReady{.param = 1});
  rec->instant(g1, 2000, GradReady{.param = 1});
  m.bytes[static_cast<int>(MemoryCategory::kActivations)] = 50;
  rec->memory_counter(g0, 2500, m);
  g0.set_phase(Phase::kBackward);
  g1.set_phase(Phase::kBackward);
  rec->span(g0, {.stream = StreamKind::kComm,
                 .cat = SpanCategory::kCollective,
                 .name = "all-reduce",
                 .ts_ns = 3000,
                 .dur_ns = 2000});
  for (int k = 0; k < 2; ++k) {
    TraceTransfer t;
    t.bytes = 1000;
    t.ts_ns = 3000 + 1000 * k;
    t.dur_ns = 1000;
    t.stream = StreamKind::kComm;
    t.name = k == 0 ? "ring reduce-scatter" : "ring all-gather";
    t.collective = 0;
    t.algo = "ring";
    t.algo_step = k;
    t.chunk = k;
    t.src = ids.gpu0;
    t.dst = ids.gpu1;
    rec->transfer(g0, t);
    t.src = ids.gpu1;
    t.dst = ids.gpu0;
    rec->transfer(g1, t);
  }
  g0.set_phase(Phase::kOptimizer);
  rec->loss_counter(g0, 4500, 2.5);
  rec->close();
  return ids;
}

void write_t4_bench_trace(const std::filesystem::path& path, int iterations) {
  BenchOptions o;
  o.devices = 4;
  o.preset = "t4";
  o.min_bytes = o.max_bytes = 1 << 20;
  o.timing_only = true;
  o.iterations = iterations;
  o.warmup = 0;
  o.trace = path;
  run_collective_bench(o);
}

uint32_t find_position(const ReplayModel& model, const std::function<bool(const trace::Event&)>& pred) {
  for (size_t p = 0; p < model.event_count(); ++p)
    if (pred(model.event(model.event_at(p)))) return static_cast<uint32_t>(p);
  ADD_FAILURE() << "no event matches";
  return 0;
}

uint32_t find_instant(const ReplayModel& model, int rank, int64_t step, EventName name, std::string_view key,
                      double value) {
  const trace::TraceData& data = model.data();
  return find_position(model, [&](const trace::Event& e) {
    if (e.type != trace::EventType::kInstant || e.rank != rank || e.step != step || e.known != name)
      return false;
    if (key.empty()) return true;
    const auto v = data.arg(e, key);
    return v.has_value() && *v == value;
  });
}

void write_rank_directory(const std::filesystem::path& dir, int ranks, int steps) {
  std::filesystem::create_directories(dir);
  for (int rank = 0; rank < ranks; ++rank) {
    const int64_t offset_ns = rank == 0 ? 0 : rank * 300 - 100;  // this rank's clock + offset = rank 0's
    TraceHeader h;
    h.clock = "measured";
    h.run_json = fmt::format(
        R"({{"mode":"ddp","device":"cpu","backend":"mpi","devices":{},"model":"16-32-4","batch":4,)"
        R"("process":{{"rank":{},"world_size":{},"clock_offset_ns":{},"clock_uncertainty_ns":40}}}})",
        ranks, rank, ranks, offset_ns);
    h.devices.push_back({.id = 0, .name = "cpu", .kind = "cpu"});
    h.params = {{0, "0.weight", {32, 16}, 2048}, {1, "0.bias", {32}, 128}};
    fmt::memory_buffer out;
    append_trace_header(out, h);
    auto line = [&](const std::string& type, int64_t global_ns, int step, const char* phase,
                    const std::string& rest) {
      fmt::format_to(std::back_inserter(out),
                     R"({{"type":"{}","ts":{},"rank":{},"dev":0,"step":{},"phase":"{}",{}}})"
                     "\n",
                     type, global_ns - offset_ns, rank, step, phase, rest);
    };
    const int next = (rank + 1) % ranks;
    for (int step = 0; step < steps; ++step) {
      const int64_t t = int64_t{10000} * step;
      line("samples", t, step, "data",
           fmt::format(R"("indices":[{},{},{},{}])", 16 * step + 4 * rank, 16 * step + 4 * rank + 1,
                       16 * step + 4 * rank + 2, 16 * step + 4 * rank + 3));
      line(
          "counter", t + 50, step, "forward",
          R"("name":"memory","values":{"parameters":2176,"gradients":2176,"optimizer_state":0,"activations":512,"buffers":0,"capacity":0})");
      line(
          "span", t + 100, step, "forward",
          R"("name":"forward 0.Linear","cat":"compute","stream":"compute","dur":2000,"args":{"flops":4096,"bytes":3000})");
      line(
          "span", t + 2100, step, "backward",
          R"("name":"backward 0.Linear","cat":"compute","stream":"compute","dur":2400,"args":{"flops":8192,"bytes":6000})");
      line("instant", t + 4500, step, "backward", R"("name":"grad_ready","args":{"param":1})");
      line("span", t + 4600, step, "backward",
           fmt::format(
               R"("name":"all_reduce ring 2.12 KiB","cat":"collective","stream":"comm","dur":2000,)"
               R"("args":{{"coll":{},"group":0,"op":"all_reduce","algo":"ring","bytes":2176,"ranks":{}}})",
               step, ranks));
      line("transfer", t + 5000, step, "backward",
           fmt::format(
               R"("name":"ring reduce-scatter","stream":"comm","dur":800,"src":0,"dst":0,"bytes":1088,)"
               R"("flow":{},"coll":{},"algo":"ring","algo_step":0,"chunk":{},"dst_rank":{})",
               step + 1, step, rank, next));
      line("span", t + 7000, step, "optimizer",
           R"("name":"optimizer.step SGD","cat":"optimizer","stream":"compute","dur":500)");
      line("counter", t + 7600, step, "optimizer",
           fmt::format(R"("name":"loss","values":{{"loss":{}}})", 1.5 - 0.1 * step - 0.01 * rank));
    }
    write_text(dir / fmt::format("rank-{}.jsonl", rank), fmt::to_string(out));
  }
}

void write_straggler_directory(const std::filesystem::path& dir, int steps, int late_rank, int64_t delay_ns) {
  constexpr int64_t kUs = 1000;
  std::filesystem::create_directories(dir);
  for (int rank = 0; rank < 2; ++rank) {
    TraceHeader h;
    h.clock = "measured";
    h.run_json = fmt::format(
        R"({{"mode":"ddp","device":"cpu","backend":"gloo","devices":2,"bucket_cap_mb":0.01,)"
        R"("first_bucket_mb":0.0009765625,"process":{{"rank":{},"world_size":2,"clock_offset_ns":0,)"
        R"("clock_uncertainty_ns":40}}}})",
        rank);
    h.devices.push_back({.id = 0, .name = "cpu", .kind = "cpu"});
    h.params = {{0, "0.weight", {64, 16}, 4096},
                {1, "0.bias", {64}, 256},
                {2, "2.weight", {4, 64}, 1024},
                {3, "2.bias", {4}, 16}};
    h.buckets = {{0, {3, 2}, 1040}, {1, {1, 0}, 4352}};
    fmt::memory_buffer out;
    append_trace_header(out, h);
    auto line = [&](const std::string& type, int64_t ts, int step, const char* phase,
                    const std::string& rest) {
      fmt::format_to(std::back_inserter(out),
                     R"({{"type":"{}","ts":{},"rank":{},"dev":0,"step":{},"phase":"{}",{}}})"
                     "\n",
                     type, ts, rank, step, phase, rest);
    };
    auto all_reduce = [&](int64_t ts, int64_t dur, int step, int bucket, uint64_t bytes) {
      line("span", ts, step, "backward",
           fmt::format(R"("name":"all_reduce bucket {}","cat":"collective","stream":"comm","dur":{},)"
                       R"("args":{{"op":"all_reduce","bucket":{},"bytes":{}}})",
                       bucket, dur, bucket, bytes));
    };
    const int64_t delay = rank == late_rank ? delay_ns : 0;
    for (int step = 0; step < steps; ++step) {
      const int64_t t = kStragglerStepNs * step;
      line("samples", t, step, "data",
           fmt::format(R"("indices":[{},{}])", 4 * step + 2 * rank, 4 * step + 2 * rank + 1));
      line("span", t + 10 * kUs, step, "forward",
           R"("name":"forward","cat":"compute","stream":"compute","dur":200000)");
      line(
          "span", t + 210 * kUs, step, "backward",
          fmt::format(R"("name":"backward","cat":"compute","stream":"compute","dur":{})", 490 * kUs + delay));
      auto ready = [&](int param, int64_t ts) {
        line("instant", ts, step, "backward",
             fmt::format(R"("name":"grad_ready","args":{{"param":{}}})", param));
      };
      ready(3, t + 300 * kUs);
      ready(2, t + 400 * kUs);
      line("instant", t + 410 * kUs, step, "backward", R"("name":"bucket_launched","args":{"bucket":0})");
      all_reduce(t + 410 * kUs, 100 * kUs, step, 0, 1040);
      ready(1, t + 600 * kUs + delay);
      ready(0, t + 700 * kUs + delay);
      const int64_t launch = t + 710 * kUs + delay;
      line("instant", launch, step, "backward", R"("name":"bucket_launched","args":{"bucket":1})");
      const int64_t done = t + 810 * kUs + delay_ns;  // the later rank's launch + 100 us
      all_reduce(launch, done - launch, step, 1, 4352);
      line("span", done + 10 * kUs, step, "optimizer",
           R"("name":"optimizer.step SGD","cat":"optimizer","stream":"compute","dur":100000)");
      line("counter", done + 120 * kUs, step, "optimizer",
           fmt::format(R"("name":"loss","values":{{"loss":{}}})", 2.0 - 0.1 * step));
    }
    write_text(dir / fmt::format("rank-{}.jsonl", rank), fmt::to_string(out));
  }
}

}  // namespace dpscope::viz::testing
