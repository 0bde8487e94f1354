// The header's "cluster" and a hierarchical all-reduce's phase args (docs/trace-format.md "The
// cluster", "Hierarchical all-reduce phases"): what the recorder writes reads back field for field;
// a trace without them still reads; each malformed value is refused with its one line.
#include <gtest/gtest.h>

#include <string>

#include "dpscope/base/error.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_tools/reader.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_trace(text, "t.jsonl");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat) << e.what();
    return e.what();
  }
  return "";
}

TraceClusterInfo h100_cluster() {
  return {.nodes = 128,
          .gpus_per_node = 8,
          .intra_topology = "nvswitch",
          .intra_link = "nvlink4",
          .intra_bandwidth_bytes_per_s = 450e9,
          .intra_latency_ns = 936,
          .rails_per_node = 8,
          .rail_kind = "ib-ndr",
          .rail_bandwidth_bytes_per_s = 50e9,
          .rail_latency_ns = 0};
}

// The header line the recorder writes for `h`.
std::string header_of(const TraceHeader& h) {
  fmt::memory_buffer out;
  append_trace_header(out, h);
  return fmt::to_string(out);
}

TraceHeader one_gpu_header() {
  TraceHeader h;
  h.devices = {{.id = 0, .name = "sim:0", .kind = "sim"}};
  return h;
}

TEST(ClusterHeader, RoundTripsFieldForField) {
  TraceHeader h = one_gpu_header();
  h.cluster = h100_cluster();
  const std::string line = header_of(h);
  EXPECT_NE(line.find(R"("cluster":{"nodes":128,"gpus_per_node":8,"intra":{"topology":"nvswitch")"),
            std::string::npos)
      << line;
  const TraceData data = parse_trace(line, "t.jsonl", {.strict = true});
  ASSERT_TRUE(data.header.cluster.has_value());
  EXPECT_EQ(*data.header.cluster, h100_cluster());
}

TEST(ClusterHeader, AHeaderWithoutOneReadsAsOneMachine) {
  EXPECT_EQ(header_of(one_gpu_header()).find("cluster"), std::string::npos);
  EXPECT_FALSE(parse_trace(testing::header_line()).header.cluster.has_value());
}

// The valid cluster header with `from` replaced by `to`.
std::string bad_cluster(const std::string& from, const std::string& to) {
  TraceHeader h = one_gpu_header();
  h.cluster = h100_cluster();
  std::string line = header_of(h);
  const size_t at = line.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return line.replace(at, from.size(), to);
}

TEST(ClusterHeader, MalformedValuesAreRefusedWithOneLine) {
  EXPECT_EQ(error_of(bad_cluster(R"("nodes":128)", R"("nodes":0)")),
            "t.jsonl:1: header: field 'cluster.nodes' must be an integer >= 1");
  EXPECT_EQ(error_of(bad_cluster(R"("gpus_per_node":8,)", "")),
            "t.jsonl:1: header: missing field 'cluster.gpus_per_node'");
  EXPECT_EQ(error_of(bad_cluster(R"("topology":"nvswitch")", R"("topology":3)")),
            "t.jsonl:1: header: field 'cluster.intra.topology' must be a string");
  EXPECT_EQ(error_of(bad_cluster(R"("bandwidth":50000000000)", R"("bandwidth":0)")),
            "t.jsonl:1: header: field 'cluster.rails.bandwidth' must be a positive number");
  EXPECT_EQ(error_of(bad_cluster(R"("latency_ns":936)", R"("latency_ns":-1)")),
            "t.jsonl:1: header: field 'cluster.intra.latency_ns' must be a non-negative number");
  EXPECT_EQ(error_of(bad_cluster(R"("per_node":8)", R"("per_node":"8")")),
            "t.jsonl:1: header: field 'cluster.rails.per_node' must be an integer >= 1");
  EXPECT_EQ(error_of(bad_cluster(R"("cluster":{)", R"("cluster":[],"x":{)")),
            "t.jsonl:1: header: field 'cluster' must be an object");
}

constexpr const char* kSpanHead =
    R"({"type":"span","ts":1000,"rank":0,"dev":0,"step":1,"phase":"backward","name":"all_reduce hierarchical 64 MiB","cat":"collective","stream":"comm","dur":800,"args":{"coll":3,"op":"all_reduce","algo":"hierarchical")";

std::string span_with(const std::string& phase_args) {
  return testing::header_line() + kSpanHead + phase_args + "}}\n";
}

TEST(CollectivePhaseArgs, ReadBackAsTheRecorderWroteThem) {
  const TraceData data = parse_trace(span_with(
      R"(,"phase_rs_start_ns":0,"phase_rs_dur_ns":500,"phase_net_start_ns":100,"phase_net_dur_ns":600,"phase_ag_start_ns":200,"phase_ag_dur_ns":600)"));
  ASSERT_EQ(data.events.size(), 1u);
  int seen = 0;
  for (const auto& [key, value] : data.arg_values(data.args[static_cast<size_t>(data.events[0].payload)]))
    if (data.strings[key].rfind("phase_", 0) == 0) ++seen;
  EXPECT_EQ(seen, 6);
  // A collective without phases (a ring, an older trace) reads as before.
  EXPECT_EQ(parse_trace(span_with("")).events.size(), 1u);
}

TEST(CollectivePhaseArgs, MalformedPhasesAreRefusedWithOneLine) {
  EXPECT_EQ(error_of(span_with(R"(,"phase_rs_start_ns":0,"phase_rs_dur_ns":500)")),
            "t.jsonl:2: missing field 'args.phase_net_start_ns' (a hierarchical all-reduce's phases come as "
            "all six phase_* fields)");
  EXPECT_EQ(
      error_of(span_with(
          R"(,"phase_rs_start_ns":0,"phase_rs_dur_ns":-5,"phase_net_start_ns":100,"phase_net_dur_ns":600,"phase_ag_start_ns":200,"phase_ag_dur_ns":600)")),
      "t.jsonl:2: field 'args.phase_rs_dur_ns' must be a non-negative integer");
  EXPECT_EQ(
      error_of(span_with(
          R"(,"phase_rs_start_ns":0,"phase_rs_dur_ns":500,"phase_net_start_ns":10,"phase_net_dur_ns":900,"phase_ag_start_ns":200,"phase_ag_dur_ns":600)")),
      "t.jsonl:2: phase 'net' (10 + 900 ns) ends after its span (dur 800 ns)");
  EXPECT_EQ(
      error_of(span_with(
          R"(,"phase_rs_start_ns":0.5,"phase_rs_dur_ns":500,"phase_net_start_ns":10,"phase_net_dur_ns":700,"phase_ag_start_ns":200,"phase_ag_dur_ns":600)")),
      "t.jsonl:2: field 'args.phase_rs_start_ns' must be a non-negative integer");
}

}  // namespace
}  // namespace dpscope::trace
