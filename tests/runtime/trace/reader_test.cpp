// The trace reader: every field written by TraceRecorder reads back; the header is validated;
// partial last lines are tolerated; and every malformed-line reason is reported with its line.
#include "dpscope/trace_tools/reader.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <span>

#include "dpscope/base/error.hpp"
#include "support/presets.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using testing::header_line;

// The message of the Error that `fn` throws ("" if none).
template <typename Fn>
std::string error_of(Fn&& fn, ErrorKind expected_kind = ErrorKind::kFormat) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), expected_kind) << e.what();
    return e.what();
  }
  return "";
}

constexpr const char* kGoodSpan =
    R"({"type":"span","ts":3000,"rank":0,"dev":0,"step":0,"phase":"forward","name":"forward 0.Linear","cat":"compute","stream":"compute","dur":4035,"args":{"flops":102760448,"bytes":1874944}})";

TEST(TraceReader, EveryFieldTheRecorderWritesReadsBack) {
  const auto dir = testing::scratch_dir();
  const HardwarePreset h100 = dpscope::testing::roofline_preset("h100-sxm");
  const Device gpu = Device::sim(0, h100);
  TraceHeader header;
  header.clock = "simulated";
  header.run_json = R"({"mode":"single","lr":0.1,"model":"784-512-10"})";
  add_trace_device(header, gpu);
  header.params = {{0, "0.weight", {512, 784}, 1605632}, {1, "0.bias", {512}, 2048}};
  header.buckets = {{0, {1, 0}, 1607680}};
  const Device devices[] = {gpu};
  auto recorder = TraceRecorder::open(dir / "t.jsonl", header, devices);
  gpu.set_rank(0);
  gpu.set_step(3);
  gpu.set_phase(Phase::kBackward);
  const KernelCost cost{.flops = 102760448, .bytes = 1874944};
  { KernelScope kernel(gpu, "backward 0.Linear", cost); }
  recorder->span(gpu, {.stream = StreamKind::kComm,
                       .cat = SpanCategory::kCollective,
                       .name = "all_reduce \"b0\"",
                       .ts_ns = 100,
                       .dur_ns = 50,
                       .args = CollectiveArgs{.coll = 3, .op = "all_reduce", .algo = "ring", .ranks = 2}});
  recorder->instant(gpu, 91000, GradReady{.param = 5});
  recorder->memory_counter(gpu, 12000, gpu.memory());
  recorder->loss_counter(gpu, 50000, 2.3021);
  const uint64_t flow = recorder->transfer(gpu, {.src = 0,
                                                 .dst = 1,
                                                 .bytes = 65536,
                                                 .ts_ns = 80000,
                                                 .dur_ns = 1200,
                                                 .stream = StreamKind::kComm,
                                                 .name = "ring reduce-scatter",
                                                 .collective = 4,
                                                 .algo = "ring",
                                                 .algo_step = 1,
                                                 .chunk = 2});
  recorder->copy_transfer(Device::cpu(), gpu, 0, 2638, 102400);
  const float grad[] = {0.01f, -0.2f, 0.05f, 0.3f};
  recorder->values(gpu, 99000,
                   {.name = EventName::kGrad,
                    .param = 4,
                    .when = ValuesWhen::kBeforeReduce,
                    .values = grad,
                    .norm = 1.27,
                    .stride = 6272});
  const int64_t indices[] = {32, 33, 34, 35};
  recorder->samples(gpu, 0, indices, 3);
  recorder->buckets(gpu, 0, header.buckets, BucketReason::kRebuilt);
  recorder->loss_counter(gpu, 50000, std::nan(""));
  recorder->close();

  const TraceData data = read_trace(dir / "t.jsonl");
  EXPECT_TRUE(data.problems.empty());
  EXPECT_EQ(data.version, "1.0");
  EXPECT_EQ(data.header.clock, "simulated");
  EXPECT_EQ(data.header.run_json, R"({"mode":"single","lr":0.1,"model":"784-512-10"})");
  ASSERT_EQ(data.header.devices.size(), 2u);
  EXPECT_EQ(data.header.devices[0].name, "sim:0");
  EXPECT_EQ(data.header.devices[0].kind, "sim");
  EXPECT_EQ(data.header.devices[0].hardware, h100.name);
  EXPECT_EQ(data.header.devices[0].memory_bytes, h100.memory_bytes);
  EXPECT_EQ(data.header.devices[0].peak_flops, h100.peak_flops);
  EXPECT_EQ(data.header.devices[0].mem_bandwidth_bytes_per_s, h100.mem_bandwidth_bytes_per_s);
  EXPECT_EQ(data.header.devices[1].name, "host");
  EXPECT_EQ(data.header.devices[1].kind, "host");
  ASSERT_EQ(data.header.links.size(), 1u);
  EXPECT_EQ(data.header.links[0].src, 0);
  EXPECT_EQ(data.header.links[0].dst, 1);
  EXPECT_EQ(data.header.links[0].kind, h100.host_link.kind);
  EXPECT_EQ(data.header.links[0].bandwidth_bytes_per_s, h100.host_link.bandwidth_bytes_per_s);
  EXPECT_EQ(data.header.links[0].latency_ns, h100.host_link.latency_ns);
  ASSERT_EQ(data.header.params.size(), 2u);
  EXPECT_EQ(data.header.params[0].name, "0.weight");
  EXPECT_EQ(data.header.params[0].shape, (Shape{512, 784}));
  EXPECT_EQ(data.header.params[1].bytes, 2048u);
  ASSERT_EQ(data.header.buckets.size(), 1u);
  EXPECT_EQ(data.header.buckets[0].params, (std::vector<int>{1, 0}));
  EXPECT_EQ(data.header.buckets[0].bytes, 1607680u);

  ASSERT_EQ(data.events.size(), 11u);
  const Event& kernel = data.events[0];
  EXPECT_EQ(kernel.type, EventType::kSpan);
  EXPECT_EQ(kernel.line, 2u);
  EXPECT_EQ(data.str(kernel.name), "backward 0.Linear");
  EXPECT_EQ(data.str(kernel.cat), "compute");
  EXPECT_EQ(kernel.category, SpanCategory::kCompute);
  EXPECT_EQ(kernel.known, EventName::kOther) << "kernel names are free-form";
  EXPECT_EQ(kernel.stream, StreamKind::kCompute);
  EXPECT_EQ(kernel.phase, Phase::kBackward);
  EXPECT_EQ(kernel.step, 3);
  EXPECT_EQ(kernel.rank, 0);
  EXPECT_EQ(kernel.dev, 0);
  EXPECT_EQ(kernel.ts_ns, 0);
  EXPECT_EQ(kernel.dur_ns, kernel_time_ns(h100, cost));
  EXPECT_EQ(data.arg(kernel, "flops"), 102760448.0);
  EXPECT_EQ(data.arg(kernel, "bytes"), 1874944.0);
  ASSERT_TRUE(data.kernel_args(kernel).has_value());
  EXPECT_EQ(data.kernel_args(kernel)->flops, 102760448.0);

  const Event& coll = data.events[1];
  EXPECT_EQ(data.str(coll.name), "all_reduce \"b0\"");
  EXPECT_EQ(data.str(coll.cat), "collective");
  EXPECT_EQ(coll.stream, StreamKind::kComm);
  EXPECT_EQ(coll.ts_ns, 100);
  EXPECT_EQ(coll.dur_ns, 50);
  EXPECT_EQ(coll.end_ns(), 150);
  EXPECT_EQ(data.arg(coll, "coll"), 3.0);
  EXPECT_EQ(data.arg(coll, "ranks"), 2.0);
  EXPECT_EQ(data.arg(coll, "op"), std::nullopt) << "non-numeric args are dropped";
  EXPECT_EQ(coll.category, SpanCategory::kCollective);

  const Event& instant = data.events[2];
  EXPECT_EQ(instant.type, EventType::kInstant);
  EXPECT_EQ(data.str(instant.name), "grad_ready");
  EXPECT_EQ(instant.ts_ns, 91000);
  EXPECT_EQ(data.arg(instant, "param"), 5.0);
  EXPECT_EQ(instant.known, EventName::kGradReady);
  ASSERT_TRUE(data.grad_ready(instant).has_value());
  EXPECT_EQ(data.grad_ready(instant)->param, 5);
  EXPECT_EQ(data.bucket_args(instant), std::nullopt);

  const Event& memory = data.events[3];
  EXPECT_EQ(memory.type, EventType::kCounter);
  EXPECT_EQ(data.str(memory.name), "memory");
  EXPECT_EQ(memory.known, EventName::kMemory);
  const ArgValues mem = data.counter_values(data.counters[memory.payload]);
  ASSERT_EQ(mem.size(), 6u);
  EXPECT_EQ(data.str(mem[0].first), "parameters");
  EXPECT_EQ(data.str(mem[5].first), "capacity");
  EXPECT_EQ(mem[5].second, static_cast<double>(h100.memory_bytes));

  EXPECT_EQ(data.events[4].known, EventName::kLoss);
  const ArgValues loss_values = data.counter_values(data.counters[data.events[4].payload]);
  ASSERT_EQ(loss_values.size(), 1u);
  EXPECT_EQ(data.str(loss_values[0].first), "loss");
  EXPECT_EQ(loss_values[0].second, 2.3021);
  const ArgValues nan_loss = data.counter_values(data.counters[data.events[10].payload]);
  ASSERT_EQ(nan_loss.size(), 1u);
  EXPECT_TRUE(std::isnan(nan_loss[0].second)) << "NaN is written as null and reads back as NaN";

  const Event& transfer = data.events[5];
  const Transfer& sent = data.transfer(transfer);
  EXPECT_EQ(transfer.type, EventType::kTransfer);
  EXPECT_EQ(data.str(transfer.name), "ring reduce-scatter");
  EXPECT_EQ(transfer.stream, StreamKind::kComm);
  EXPECT_EQ(sent.src, 0);
  EXPECT_EQ(sent.dst, 1);
  EXPECT_EQ(sent.bytes, 65536u);
  EXPECT_EQ(sent.flow, flow);
  EXPECT_EQ(sent.coll, 4);
  EXPECT_EQ(data.str(sent.algo), "ring");
  EXPECT_EQ(sent.algo_step, 1);
  EXPECT_EQ(sent.chunk, 2);
  EXPECT_EQ(transfer.ts_ns, 80000);
  EXPECT_EQ(transfer.dur_ns, 1200);

  const Event& copy = data.events[6];
  const Transfer& copied = data.transfer(copy);
  EXPECT_EQ(data.str(copy.name), "copy H2D");
  EXPECT_EQ(copy.known, EventName::kCopyH2D);
  EXPECT_EQ(copy.stream, StreamKind::kCopy);
  EXPECT_EQ(copied.src, 1);
  EXPECT_EQ(copied.dst, 0);
  EXPECT_EQ(copied.coll, -1);
  EXPECT_EQ(copied.algo, kNoString);
  EXPECT_EQ(copied.algo_step, -1);
  EXPECT_EQ(copied.flow, flow + 1);

  const Event& values = data.events[7];
  EXPECT_EQ(values.type, EventType::kValues);
  EXPECT_EQ(data.str(values.name), "grad");
  const ValueSample& sample = data.values[values.payload];
  EXPECT_EQ(sample.param, 4);
  EXPECT_EQ(data.str(sample.when), "before_reduce");
  EXPECT_EQ(sample.when_kind, ValuesWhen::kBeforeReduce);
  EXPECT_EQ(values.known, EventName::kGrad);
  EXPECT_EQ(sample.values, (std::vector<float>{0.01f, -0.2f, 0.05f, 0.3f}));
  EXPECT_EQ(sample.norm, 1.27);
  EXPECT_EQ(sample.stride, 6272);  // elements 0, 6272, 12544, 18816 of the gradient

  const Event& samples = data.events[8];
  EXPECT_EQ(samples.type, EventType::kSamples);
  EXPECT_EQ(data.samples[samples.payload].indices, (std::vector<int64_t>{32, 33, 34, 35}));
  EXPECT_EQ(data.samples[samples.payload].epoch, std::optional<int64_t>(3));

  const Event& buckets = data.events[9];
  EXPECT_EQ(buckets.type, EventType::kBuckets);
  const BucketAssignment& assignment = data.buckets[buckets.payload];
  EXPECT_EQ(data.str(assignment.reason), "rebuilt");
  EXPECT_EQ(assignment.reason_kind, BucketReason::kRebuilt);
  ASSERT_EQ(assignment.buckets.size(), 1u);
  EXPECT_EQ(assignment.buckets[0].id, 0);
  EXPECT_EQ(assignment.buckets[0].params, (std::vector<int>{1, 0}));
  EXPECT_EQ(assignment.buckets[0].bytes, 1607680u);

  EXPECT_EQ(data.min_ts_ns, 0);
  EXPECT_EQ(data.max_end_ns, 99000);
  EXPECT_EQ(data.device(1)->name, "host");
  EXPECT_EQ(data.device(7), nullptr);
  EXPECT_EQ(data.find_string("no such string"), kNoString);
  EXPECT_EQ(data.str(kNoString), "");
}

TEST(TraceReader, ReadsEveryPhaseStreamAndEventTypeTheRuntimeNames) {
  for (int p = 0; p <= static_cast<int>(Phase::kCheckpoint); ++p) {
    for (int s = 0; s < kStreamCount; ++s) {
      const std::string line = fmt::format(
          R"({{"type":"{}","ts":1,"rank":0,"dev":0,"step":0,"phase":"{}","name":"n","cat":"c","stream":"{}","dur":2}})",
          to_string(EventType::kSpan), to_string(static_cast<Phase>(p)),
          to_string(static_cast<StreamKind>(s)));
      const TraceData data = parse_trace(header_line() + line + "\n");
      ASSERT_EQ(data.events.size(), 1u) << line;
      EXPECT_EQ(data.events[0].phase, static_cast<Phase>(p));
      EXPECT_EQ(data.events[0].stream, static_cast<StreamKind>(s));
    }
  }
  const std::string rest[] = {R"("name":"n","cat":"c","stream":"comm","dur":2)",
                              R"("name":"n")",
                              R"("name":"n","values":{"a":1})",
                              R"("name":"n","stream":"comm","dur":2,"src":0,"dst":2,"bytes":1,"flow":1)",
                              R"("name":"n","param":0,"when":"local","values":[],"norm":0)",
                              R"("indices":[])",
                              R"("reason":"initial","buckets":[])"};
  for (int t = 0; t <= static_cast<int>(EventType::kBuckets); ++t) {
    const std::string line =
        fmt::format(R"({{"type":"{}","ts":1,"rank":0,"dev":0,"step":0,"phase":"none",{}}})",
                    to_string(static_cast<EventType>(t)), rest[t]);
    const TraceData data = parse_trace(header_line() + line + "\n");
    ASSERT_EQ(data.events.size(), 1u) << line;
    EXPECT_EQ(data.events[0].type, static_cast<EventType>(t));
  }
}

TEST(TraceReader, StringsAreInternedOnce) {
  const std::string text = header_line() + kGoodSpan + "\n" + kGoodSpan + "\n";
  const TraceData data = parse_trace(text);
  ASSERT_EQ(data.events.size(), 2u);
  EXPECT_EQ(data.events[0].name, data.events[1].name);
  EXPECT_EQ(data.str(data.events[0].name), "forward 0.Linear");
  EXPECT_EQ(data.find_string("forward 0.Linear"), data.events[0].name);
}

TEST(TraceReader, ArgsAndCounterValuesLiveInSharedPoolsInFileOrder) {
  const std::string text =
      header_line() + kGoodSpan + "\n" +
      R"({"type":"instant","ts":5,"rank":0,"dev":0,"step":0,"phase":"forward","name":"error","args":{"message":"boom","param":3,"ok":true}})"
      "\n"
      R"({"type":"counter","ts":6,"rank":0,"dev":0,"step":0,"phase":"forward","name":"memory","values":{"a":1,"b":null}})"
      "\n"
      R"({"type":"instant","ts":7,"rank":0,"dev":0,"step":0,"phase":"forward","name":"plain"})"
      "\n";
  const TraceData data = parse_trace(text);
  ASSERT_EQ(data.events.size(), 4u);
  ASSERT_EQ(data.args.size(), 2u);
  ASSERT_EQ(data.counters.size(), 1u);
  EXPECT_EQ(data.value_pool.size(), 2u + 2u + 2u)
      << "span: flops, bytes; instant: param, then the string index of its message; counter: a, b";
  ASSERT_EQ(data.shapes.size(), 3u) << "one key list each";
  EXPECT_EQ(data.shapes[data.args[data.events[1].payload].shape].text_keys,
            std::vector<uint32_t>{data.find_string("message")});

  const ArgValues span_args = data.arg_values(data.args[data.events[0].payload]);
  ASSERT_EQ(span_args.size(), 2u);
  EXPECT_EQ(data.str(span_args[0].first), "flops");
  EXPECT_EQ(span_args[0].second, 102760448.0);
  EXPECT_EQ(data.str(span_args[1].first), "bytes");
  EXPECT_TRUE(data.arg_texts(data.args[data.events[0].payload]).empty());

  const Args& instant = data.args[data.events[1].payload];
  ASSERT_EQ(data.arg_values(instant).size(), 1u);
  EXPECT_EQ(data.arg_values(instant)[0].second, 3.0);
  ASSERT_EQ(data.arg_texts(instant).size(), 1u);
  EXPECT_EQ(data.str(data.arg_texts(instant)[0].second), "boom");
  EXPECT_EQ(data.text_arg(data.events[1], "message"), "boom");
  EXPECT_EQ(data.arg(data.events[1], "param"), 3.0);

  const ArgValues counter = data.counter_values(data.counters[data.events[2].payload]);
  ASSERT_EQ(counter.size(), 2u);
  EXPECT_EQ(data.str(counter[1].first), "b");
  EXPECT_TRUE(std::isnan(counter[1].second));
  EXPECT_EQ(data.events[3].payload, kNoPayload) << "no args: no pool entries";

  EXPECT_TRUE(data.arg_values(Args{.shape = 0, .begin = 5}).empty())
      << "entries past the pool read as empty, never out of bounds";
  EXPECT_TRUE(data.arg_texts(Args{.shape = 1, .begin = 5}).empty());
  EXPECT_TRUE(data.arg_values(Args{.shape = 7, .begin = 0}).empty()) << "an unknown shape";
}

TEST(TraceReader, EventsWithTheSameKeysShareOneShape) {
  std::string text = header_line();
  for (int i = 0; i < 3; ++i) text += std::string(kGoodSpan) + "\n";
  text +=
      R"({"type":"span","ts":9,"rank":0,"dev":0,"step":0,"phase":"forward","name":"x","cat":"compute","stream":"compute","dur":1,"args":{"bytes":4,"flops":2}})"
      "\n";
  const TraceData data = parse_trace(text);
  ASSERT_EQ(data.events.size(), 4u);
  ASSERT_EQ(data.shapes.size(), 2u) << "the same keys in another order are another shape";
  EXPECT_EQ(data.args[0].shape, data.args[2].shape);
  EXPECT_NE(data.args[2].shape, data.args[3].shape);
  EXPECT_EQ(data.arg(data.events[3], "bytes"), 4.0);
  EXPECT_EQ(data.arg(data.events[3], "flops"), 2.0);
  EXPECT_EQ(data.value_pool.size(), 4u) << "two numbers a distinct event, no keys: equal ones are shared";
  EXPECT_EQ(data.args[0].begin, data.args[2].begin);
}

TEST(TraceReader, EqualArgValuesAreStoredOnceAndDistinctOnesEachReadBackTheirOwn) {
  // 6,000 counters of distinct values (enough to collide in the table of recent runs, which then
  // keeps the later one) and 3,000 spans repeating 3 pairs of values.
  std::string text = header_line();
  for (int i = 0; i < 6000; ++i) {
    text += fmt::format(
        R"({{"type":"counter","ts":{},"rank":0,"dev":0,"step":0,"phase":"forward","name":"memory","values":{{"a":{},"b":-0.0}}}})"
        "\n",
        i, i);
    if (i % 2 == 0)
      text += fmt::format(
          R"({{"type":"span","ts":{},"rank":0,"dev":0,"step":0,"phase":"forward","name":"k","cat":"compute","stream":"compute","dur":1,"args":{{"flops":{},"bytes":8}}}})"
          "\n",
          i, i % 3);
  }
  const TraceData data = parse_trace(text);
  ASSERT_EQ(data.events.size(), 9000u);
  for (const Event& e : data.events) {
    if (e.type == EventType::kCounter) {
      const ArgValues v = data.counter_values(data.counters[e.payload]);
      ASSERT_EQ(v.size(), 2u);
      ASSERT_EQ(v[0].second, static_cast<double>(e.ts_ns)) << "its own value, never a neighbour's";
      ASSERT_TRUE(std::signbit(v[1].second)) << "-0.0 is not +0.0";
    } else {
      ASSERT_EQ(data.arg(e, "flops"), static_cast<double>(e.ts_ns % 3));
      ASSERT_EQ(data.arg(e, "bytes"), 8.0);
    }
  }
  // Each distinct pair once, bar the rare repeat whose slot a colliding counter took meanwhile
  // (18,000 entries unshared).
  EXPECT_GE(data.value_pool.size(), 6000u * 2 + 3 * 2);
  EXPECT_LT(data.value_pool.size(), 6000u * 2 + 100);
}

TEST(TraceReader, AStepBeyondInt32IsRefusedNamingIt) {
  const std::string text =
      header_line() +
      R"({"type":"instant","ts":5,"rank":0,"dev":0,"step":2147483648,"phase":"forward","name":"x"})"
      "\n";
  try {
    (void)parse_trace(text);
    FAIL() << "a step beyond int32 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_THAT(
        e.what(),
        ::testing::HasSubstr(
            "<memory>:2: field 'step' is 2147483648, above the largest step a trace may have (2147483647)"));
  }
}

TEST(TraceReader, BlankLinesAreSkippedButCounted) {
  const std::string text = header_line() + "\n   \n" + kGoodSpan + "\r\n\n" + kGoodSpan + "\n";
  const TraceData data = parse_trace(text);
  ASSERT_EQ(data.events.size(), 2u);
  EXPECT_EQ(data.events[0].line, 4u);
  EXPECT_EQ(data.events[1].line, 6u);
}

TEST(TraceReader, UnknownEventTypesAndFieldsAreSkippedSilently) {
  const std::string text =
      header_line("1.3") +
      R"({"type":"gpu_temperature","ts":"whenever","celsius":71})"
      "\n"
      R"({"type":"span","ts":5,"rank":0,"dev":2,"step":-1,"phase":"none","name":"n","cat":"c","stream":"copy","dur":0,"color":"red","extra":{"a":[1,2]}})"
      "\n";
  const TraceData data = parse_trace(text);
  EXPECT_TRUE(data.problems.empty());
  EXPECT_EQ(data.version, "1.3");
  ASSERT_EQ(data.events.size(), 1u);
  EXPECT_EQ(data.events[0].dev, 2);
  EXPECT_EQ(data.events[0].step, -1);
  EXPECT_EQ(data.events[0].stream, StreamKind::kCopy);
  EXPECT_EQ(data.events[0].payload, kNoPayload);
}

TEST(TraceReader, IncompleteLastLineIsLeftOutWithoutComplaint) {
  const std::string text = header_line() + kGoodSpan + "\n" + R"({"type":"span","ts":40)";
  const TraceData data = parse_trace(text, "live.jsonl", {.strict = true});
  EXPECT_EQ(data.events.size(), 1u);
  EXPECT_TRUE(data.problems.empty());
  EXPECT_TRUE(data.partial_last_line);
  EXPECT_FALSE(parse_trace(header_line() + kGoodSpan + "\n").partial_last_line);
}

TEST(TraceReader, EmptyFileIsRefused) {
  EXPECT_EQ(error_of([] { parse_trace("", "a.jsonl"); }),
            "a.jsonl: empty file, expected a dpscope trace header");
  EXPECT_EQ(error_of([] { parse_trace("\n \n", "a.jsonl", {.strict = false}); }),
            "a.jsonl: empty file, expected a dpscope trace header");
}

TEST(TraceReader, NewerMajorVersionIsRefusedInBothModes) {
  const std::string text = header_line("2.0") + kGoodSpan + "\n";
  const std::string expected =
      "t.jsonl: trace format version 2.0 is newer than this dpscope supports (1.x); upgrade dpscope";
  EXPECT_EQ(error_of([&] { parse_trace(text, "t.jsonl"); }), expected);
  EXPECT_EQ(error_of([&] { parse_trace(text, "t.jsonl", {.strict = false}); }), expected);
}

TEST(TraceReader, BadHeadersAreRefusedWithTheReason) {
  EXPECT_EQ(error_of([] { parse_trace(std::string(kGoodSpan) + "\n", "t"); }),
            "t:1: not a dpscope trace: the first line must be a header object with \"type\":\"header\"");
  EXPECT_EQ(error_of([] { parse_trace("not json\n", "t"); }),
            "t:1: not a dpscope trace: the first line must be a header object with \"type\":\"header\"");
  EXPECT_EQ(error_of([] {
              parse_trace(R"({"type":"header","format":"other","version":"1.0"})"
                          "\n",
                          "t");
            }),
            "t:1: not a dpscope trace: header field 'format' must be \"dpscope-trace\"");
  for (const char* version : {"1", "one.zero", "1.0.2", "-1.0", "1.", ""}) {
    std::string header = header_line();
    header.replace(header.find("\"1.0\""), 5, std::string("\"") + version + "\"");
    EXPECT_EQ(error_of([&] { parse_trace(header, "t"); }),
              "t:1: header field 'version' must be a string \"MAJOR.MINOR\" (e.g. \"1.0\")")
        << version;
  }
  EXPECT_EQ(error_of([] { parse_trace(header_line("0.9"), "t"); }),
            "t:1: trace format version 0.9 is not supported (this dpscope reads 1.x)");
  std::string no_id = header_line();
  no_id.replace(no_id.find(R"("id":1,)"), 7, "");
  EXPECT_EQ(error_of([&] { parse_trace(no_id, "t"); }), "t:1: header: missing field 'devices[1].id'");
  std::string dup_id = header_line();
  dup_id.replace(dup_id.find(R"("id":2,)"), 7, R"("id":0,)");
  EXPECT_EQ(error_of([&] { parse_trace(dup_id, "t"); }), "t:1: header: device id 0 is listed twice");
  std::string bad_shape = header_line();
  bad_shape.replace(bad_shape.find("[512,784]"), 9, "[512,\"x\"]");
  EXPECT_EQ(error_of([&] { parse_trace(bad_shape, "t"); }),
            "t:1: header: field 'params[0].shape' must be an array of non-negative integers");
  EXPECT_EQ(
      error_of([] { parse_trace(R"({"type":"header","format":"dpscope-trace","version":"1.0"})", "t"); }),
      "t:1: incomplete header line (the file ends before its '\\n')");
}

TEST(TraceReader, MissingFileIsAnIoError) {
  EXPECT_EQ(error_of([] { read_trace("/nonexistent/dir/t.jsonl"); }, ErrorKind::kIo),
            "cannot read trace '/nonexistent/dir/t.jsonl': no such file");
}

// One malformed line and the reason the reader must give for it.
struct BadLine {
  std::string line;
  std::string reason;
};

std::vector<BadLine> bad_lines() {
  const std::string common = R"("ts":1,"rank":0,"dev":0,"step":0,"phase":"backward")";
  auto span = [&](const std::string& fields) { return R"({"type":"span",)" + common + "," + fields + "}"; };
  const std::string span_ok = R"("name":"n","cat":"compute","stream":"compute","dur":5)";
  auto transfer = [&](const std::string& fields) {
    return R"({"type":"transfer",)" + common + "," + fields + "}";
  };
  const std::string transfer_ok = R"("name":"t","stream":"comm","dur":5,"src":0,"dst":2,"bytes":8,"flow":1)";
  return {
      {R"({"type":"span","ts":1,)", "not valid JSON"},
      {R"({"type":"span"} trailing)", "not valid JSON"},
      {"[1,2,3]", "not a JSON object"},
      {R"({"ts":1})", "missing field 'type'"},
      {R"({"type":7})", "field 'type' must be a string"},
      {R"({"type":"span","rank":0,"dev":0,"step":0,"phase":"forward"})", "missing field 'ts'"},
      {R"({"type":"span","ts":1.5,"rank":0,"dev":0,"step":0,"phase":"forward"})",
       "field 'ts' must be an integer"},
      {R"({"type":"span","ts":"1","rank":0,"dev":0,"step":0,"phase":"forward"})",
       "field 'ts' must be an integer"},
      {R"({"type":"span","ts":1,"rank":-1,"dev":0,"step":0,"phase":"forward"})",
       "field 'rank' must be a non-negative integer"},
      {R"({"type":"span","ts":1,"rank":0,"step":0,"phase":"forward"})", "missing field 'dev'"},
      {R"({"type":"span","ts":1,"rank":0,"dev":9,"step":0,"phase":"forward"})",
       "field 'dev' is 9, which is not a device in the header"},
      {R"({"type":"span","ts":1,"rank":0,"dev":0,"step":-2,"phase":"forward"})",
       "field 'step' must be an integer >= -1"},
      {R"({"type":"span","ts":1,"rank":0,"dev":0,"step":0})", "missing field 'phase'"},
      {R"({"type":"span","ts":1,"rank":0,"dev":0,"step":0,"phase":"x"})", "unknown phase 'x'"},
      {R"({"type":"span","ts":1,"rank":0,"dev":0,"step":0,"phase":3})", "field 'phase' must be a string"},
      {span(R"("cat":"compute","stream":"compute","dur":5)"), "missing field 'name'"},
      {span(R"("name":"n","cat":1,"stream":"compute","dur":5)"), "field 'cat' must be a string"},
      {span(R"("name":"n","cat":"c","stream":"gpu","dur":5)"), "unknown stream 'gpu'"},
      {span(R"("name":"n","cat":"c","stream":"comm","dur":-5)"),
       "field 'dur' must be a non-negative integer"},
      {span(R"("name":"n","cat":"c","stream":"comm","dur":"5")"),
       "field 'dur' must be a non-negative integer"},
      {span(R"("name":"n","cat":"c","stream":"comm")"), "missing field 'dur'"},
      {span(span_ok + R"(,"args":[1])"), "field 'args' must be an object"},
      {R"({"type":"instant",)" + common + "}", "missing field 'name'"},
      {R"({"type":"counter",)" + common + R"(,"name":"loss","values":[1]})",
       "field 'values' must be an object"},
      {R"({"type":"counter",)" + common + R"(,"name":"loss","values":{"loss":"high"}})",
       "field 'values.loss' must be a number"},
      {transfer(R"("name":"t","stream":"comm","dur":5,"src":7,"dst":2,"bytes":8,"flow":1)"),
       "field 'src' is 7, which is not a device in the header"},
      {transfer(R"("name":"t","stream":"comm","dur":5,"src":0,"dst":2,"bytes":-8,"flow":1)"),
       "field 'bytes' must be a non-negative integer"},
      {transfer(R"("name":"t","stream":"comm","dur":5,"src":0,"dst":2,"bytes":8)"), "missing field 'flow'"},
      {transfer(transfer_ok + R"(,"coll":1,"algo":"ring","algo_step":-3,"chunk":0)"),
       "field 'algo_step' must be an integer >= -1"},
      {transfer(transfer_ok + R"(,"coll":1,"algo":5)"), "field 'algo' must be a string"},
      {R"({"type":"values",)" + common + R"(,"name":"grad","param":1,"when":"local","values":{},"norm":1})",
       "field 'values' must be an array"},
      {R"({"type":"values",)" + common + R"(,"name":"grad","param":-2,"when":"local","values":[],"norm":1})",
       "field 'param' must be an integer >= -1"},
      {R"({"type":"values",)" + common +
           R"(,"name":"grad","param":1,"when":"local","values":[1,true],"norm":1})",
       "field 'values' must be an array of numbers"},
      {R"({"type":"values",)" + common +
           R"(,"name":"grad","param":1,"when":"local","values":[],"norm":"big"})",
       "field 'norm' must be a number"},
      {R"({"type":"values",)" + common +
           R"(,"name":"grad","param":1,"when":"local","values":[],"norm":1,"stride":0})",
       "field 'stride' must be an integer >= 1"},
      {R"({"type":"values",)" + common +
           R"(,"name":"grad","param":1,"when":"local","values":[],"norm":1,"stride":"x"})",
       "field 'stride' must be a non-negative integer"},
      {R"({"type":"samples",)" + common + R"(,"indices":3})", "field 'indices' must be an array"},
      {R"({"type":"samples",)" + common + R"(,"indices":[1,-2]})",
       "field 'indices' must be an array of non-negative integers"},
      {R"({"type":"samples",)" + common + R"(,"indices":[1],"epoch":-1})",
       "field 'epoch' must be a non-negative integer"},
      {R"({"type":"buckets",)" + common + R"(,"reason":"rebuilt","buckets":[{"id":0,"params":5,"bytes":4}]})",
       "field 'buckets[0].params' must be an array"},
      {R"({"type":"buckets",)" + common +
           R"(,"reason":"rebuilt","buckets":[{"id":0,"params":[1],"bytes":4},{"id":1,"params":[0]}]})",
       "missing field 'buckets[1].bytes'"},
      {R"({"type":"buckets",)" + common +
           R"(,"reason":"rebuilt","buckets":[{"id":0,"params":[1,"a"],"bytes":4}]})",
       "field 'buckets[0].params' must be an array of non-negative integers"},
      {R"({"type":"buckets",)" + common + R"(,"buckets":[]})", "missing field 'reason'"},
      {R"({"type":"header","format":"dpscope-trace","version":"1.0"})",
       "a second header (the header must be the first line)"},
      // Regression test: ts + dur overflowed int64 and such spans vanished from stats.
      {R"({"type":"span","ts":9223372036854775807,"rank":0,"dev":0,"step":0,"phase":"forward",)"
       R"("name":"a","cat":"compute","stream":"compute","dur":10})",
       "field 'ts' is 9223372036854775807, outside the supported range [-4611686018427387904, "
       "4611686018427387904) ns"},
      {R"({"type":"instant","ts":-4611686018427387905,"rank":0,"dev":0,"step":0,"phase":"forward","name":"a"})",
       "field 'ts' is -4611686018427387905, outside the supported range [-4611686018427387904, "
       "4611686018427387904) ns"},
      {R"({"type":"span","ts":4611686018427387000,"rank":0,"dev":0,"step":0,"phase":"forward",)"
       R"("name":"a","cat":"compute","stream":"compute","dur":904})",
       "ts + dur = 4611686018427387000 + 904 is not below 4611686018427387904 ns, the end of the supported "
       "range"},
  };
}

TEST(TraceReader, StrictModeReportsTheFirstMalformedLineWithItsNumber) {
  for (const BadLine& bad : bad_lines()) {
    const std::string text = header_line() + kGoodSpan + "\n\n" + bad.line + "\n" + kGoodSpan + "\n";
    EXPECT_EQ(error_of([&] { parse_trace(text, "run.jsonl"); }), "run.jsonl:4: " + bad.reason) << bad.line;
  }
}

TEST(TraceReader, LenientModeCollectsEveryMalformedLineAndKeepsTheRest) {
  std::string text = header_line();
  const std::vector<BadLine> lines = bad_lines();
  for (const BadLine& bad : lines) text += bad.line + "\n" + kGoodSpan + "\n";
  const TraceData data = parse_trace(text, "run.jsonl", {.strict = false});
  EXPECT_EQ(data.events.size(), lines.size());
  ASSERT_EQ(data.problems.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(data.problems[i].line, 2 + 2 * i) << lines[i].line;
    EXPECT_EQ(data.problems[i].reason, lines[i].reason) << lines[i].line;
    EXPECT_EQ(data.events[i].line, 3 + 2 * i);
  }
}

TEST(TraceReader, TimesAtTheEdgeOfTheRangeAreAcceptedAndDifferencesFit) {
  const std::string text =
      header_line() +
      R"({"type":"span","ts":-4611686018427387904,"rank":0,"dev":0,"step":0,"phase":"forward","name":"a","cat":"compute","stream":"compute","dur":0})"
      "\n"
      R"({"type":"span","ts":4611686018427387000,"rank":0,"dev":0,"step":0,"phase":"forward","name":"b","cat":"compute","stream":"compute","dur":903})"
      "\n";
  const TraceData data = parse_trace(text);
  ASSERT_EQ(data.events.size(), 2u);
  EXPECT_EQ(data.min_ts_ns, -(int64_t{1} << 62));
  EXPECT_EQ(data.max_end_ns, (int64_t{1} << 62) - 1);
  // The widest trace the reader accepts still has a duration that fits in int64.
  EXPECT_EQ(data.max_end_ns - data.min_ts_ns, std::numeric_limits<int64_t>::max());
}

TEST(TraceReader, RecordedTraceReadsBackWithoutProblems) {
  const auto path = testing::record_sample_trace(testing::scratch_dir() / "t.jsonl", 3);
  const TraceData data = read_trace(path);
  EXPECT_TRUE(data.problems.empty());
  EXPECT_FALSE(data.partial_last_line);
  int spans = 0;
  int steps_seen = 0;
  for (const Event& e : data.events) {
    spans += e.type == EventType::kSpan;
    steps_seen = std::max<int>(steps_seen, static_cast<int>(e.step) + 1);
  }
  EXPECT_EQ(spans, 3 * 4);  // forward, backward, all_reduce, sgd step per step
  EXPECT_EQ(steps_seen, 3);
}

}  // namespace
}  // namespace dpscope::trace
