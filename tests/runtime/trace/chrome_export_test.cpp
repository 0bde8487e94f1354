// Chrome Trace Event export: valid JSON with one process per device, one thread per stream,
// X slices, s/f flows for transfers, C counters, i instants, and lanes that always nest.
#include "dpscope/trace_tools/chrome_export.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "dpscope/base/error.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace {
namespace {

using nlohmann::json;
using testing::header_line;

json export_json(const TraceData& data) {
  std::ostringstream out;
  export_chrome(data, out);
  return json::parse(out.str());  // throws (and fails the test) when the output is not JSON
}

// The trace events with this phase ("X", "M", ...), in output order.
std::vector<json> with_ph(const json& doc, std::string_view ph) {
  std::vector<json> out;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

std::string event(const std::string& type, int64_t ts, int dev, const std::string& rest) {
  return fmt::format(R"({{"type":"{}","ts":{},"rank":{},"dev":{},"step":2,"phase":"backward",{}}})", type, ts,
                     dev == 2 ? 1 : 0, dev, rest) +
         "\n";
}

TEST(ChromeExport, NamesOneProcessPerDeviceAndOneThreadPerStream) {
  const std::string text =
      header_line() +
      event("span", 3000, 0, R"("name":"fwd","cat":"compute","stream":"compute","dur":4035)") +
      event("span", 9000, 2, R"("name":"ar","cat":"collective","stream":"comm","dur":100)");
  const json doc = export_json(parse_trace(text));
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  EXPECT_EQ(doc["otherData"]["format"], "dpscope-trace");
  EXPECT_EQ(doc["otherData"]["version"], "1.0");
  EXPECT_EQ(doc["otherData"]["clock"], "simulated");
  EXPECT_EQ(doc["otherData"]["run"]["mode"], "ddp");

  std::map<int, std::string> process_names;
  std::map<int, int> sort_index;
  std::set<std::tuple<int, int, std::string>> threads;
  for (const json& m : with_ph(doc, "M")) {
    if (m["name"] == "process_name") process_names[m["pid"]] = m["args"]["name"];
    if (m["name"] == "process_sort_index") sort_index[m["pid"]] = m["args"]["sort_index"];
    if (m["name"] == "thread_name") threads.emplace(m["pid"], m["tid"], m["args"]["name"]);
  }
  EXPECT_EQ(process_names, (std::map<int, std::string>{{1, "sim:0 \u00b7 NVIDIA H100 SXM5 80GB"},
                                                       {2, "host"},
                                                       {3, "sim:1 \u00b7 NVIDIA H100 SXM5 80GB"}}));
  EXPECT_EQ(sort_index, (std::map<int, int>{{1, 0}, {2, 1}, {3, 2}}));
  EXPECT_EQ(threads, (std::set<std::tuple<int, int, std::string>>{
                         {1, 1, "compute"}, {3, 1, "compute"}, {3, 2, "comm"}}));
}

TEST(ChromeExport, SpansBecomeCompleteEventsInMicroseconds) {
  const std::string text =
      header_line() +
      event(
          "span", 3000, 0,
          R"("name":"forward 0.Linear","cat":"compute","stream":"compute","dur":4035,"args":{"flops":1e8,"bytes":1874944,"note":"x"})") +
      event("span", 1500, 2, R"("name":"ar","cat":"collective","stream":"comm","dur":1000000)");
  const std::vector<json> slices = with_ph(export_json(parse_trace(text)), "X");
  ASSERT_EQ(slices.size(), 2u);
  const json& s = slices[0];
  EXPECT_EQ(s["name"], "forward 0.Linear");
  EXPECT_EQ(s["cat"], "compute");
  EXPECT_EQ(s["pid"], 1);
  EXPECT_EQ(s["tid"], 1);
  EXPECT_EQ(s["ts"].get<double>(), 3.0);
  EXPECT_EQ(s["dur"].get<double>(), 4.035);
  EXPECT_EQ(s["args"],
            json::parse(R"({"step":2,"phase":"backward","rank":0,"flops":100000000,"bytes":1874944})"));
  EXPECT_EQ(slices[1]["pid"], 3);
  EXPECT_EQ(slices[1]["tid"], 2);
  EXPECT_EQ(slices[1]["ts"].get<double>(), 1.5);
  EXPECT_EQ(slices[1]["dur"].get<double>(), 1000.0);
}

TEST(ChromeExport, TimesKeepNanosecondsAsThreeDecimals) {
  std::ostringstream out;
  const std::string text =
      header_line() + event("span", 1001, 0, R"("name":"k","cat":"c","stream":"compute","dur":10)");
  export_chrome(parse_trace(text), out);
  EXPECT_NE(out.str().find(R"("ts":1.001,"dur":0.01,)"), std::string::npos) << out.str();
}

TEST(ChromeExport, TransfersBecomeASendSliceAReceiveSliceAndAFlow) {
  const std::string text =
      header_line() +
      event(
          "transfer", 80000, 0,
          R"("name":"ring reduce-scatter","stream":"comm","dur":1200,"src":0,"dst":2,"bytes":65536,"flow":17,"coll":4,"algo":"ring","algo_step":1,"chunk":0)");
  const json doc = export_json(parse_trace(text));
  const std::vector<json> slices = with_ph(doc, "X");
  ASSERT_EQ(slices.size(), 2u);
  const json& send = slices[0];
  EXPECT_EQ(send["name"], "ring reduce-scatter");
  EXPECT_EQ(send["pid"], 1);
  EXPECT_EQ(send["tid"], 2);
  EXPECT_EQ(send["ts"].get<double>(), 80.0);
  EXPECT_EQ(send["dur"].get<double>(), 1.2);
  EXPECT_EQ(send["args"]["bytes"], 65536);
  EXPECT_EQ(send["args"]["coll"], 4);
  EXPECT_EQ(send["args"]["algo"], "ring");
  EXPECT_EQ(send["args"]["algo_step"], 1);
  const json& recv = slices[1];
  EXPECT_EQ(recv["pid"], 3);
  EXPECT_EQ(recv["tid"], 2);
  EXPECT_EQ(recv["ts"].get<double>(), 81.2);
  EXPECT_EQ(recv["dur"].get<double>(), 0.001);

  const std::vector<json> starts = with_ph(doc, "s");
  const std::vector<json> finishes = with_ph(doc, "f");
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(finishes.size(), 1u);
  EXPECT_EQ(starts[0]["id"], 17);
  EXPECT_EQ(starts[0]["pid"], 1);
  EXPECT_EQ(starts[0]["tid"], 2);
  EXPECT_EQ(starts[0]["ts"].get<double>(), 80.0);
  EXPECT_EQ(finishes[0]["id"], 17);
  EXPECT_EQ(finishes[0]["bp"], "e");
  EXPECT_EQ(finishes[0]["pid"], 3);
  EXPECT_EQ(finishes[0]["tid"], 2);
  EXPECT_EQ(finishes[0]["ts"].get<double>(), 81.2);
  EXPECT_EQ(starts[0]["cat"], finishes[0]["cat"]);
  EXPECT_EQ(starts[0]["name"], finishes[0]["name"]);
}

TEST(ChromeExport, CountersInstantsValuesSamplesAndBucketsAreVisible) {
  const std::string text =
      header_line() + event("counter", 100, 0, R"("name":"loss","values":{"loss":2.5,"bad":null})") +
      event("instant", 200, 2, R"("name":"grad_ready","args":{"param":5})") +
      event("values", 300, 0,
            R"("name":"grad","param":4,"when":"after_reduce","values":[0.5,-1],"norm":1.25)") +
      event("samples", 400, 2, R"("indices":[4,5,6],"epoch":1)") +
      event("buckets", 500, 0, R"("reason":"rebuilt","buckets":[{"id":0,"params":[1,0],"bytes":64}])");
  const json doc = export_json(parse_trace(text));
  const std::vector<json> counters = with_ph(doc, "C");
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0]["name"], "loss");
  EXPECT_EQ(counters[0]["pid"], 1);
  EXPECT_EQ(counters[0]["args"], json::parse(R"({"loss":2.5})")) << "NaN (null) values are left out";

  const std::vector<json> instants = with_ph(doc, "i");
  ASSERT_EQ(instants.size(), 4u);
  for (const json& i : instants) EXPECT_EQ(i["s"], "t");
  EXPECT_EQ(instants[0]["name"], "grad_ready");
  EXPECT_EQ(instants[0]["pid"], 3);
  EXPECT_EQ(instants[0]["args"]["param"], 5);
  EXPECT_EQ(instants[0]["args"]["step"], 2);
  EXPECT_EQ(instants[1]["name"], "grad[4] after_reduce");
  EXPECT_EQ(instants[1]["args"]["values"], json::parse("[0.5,-1]"));
  EXPECT_EQ(instants[1]["args"]["norm"], 1.25);
  EXPECT_EQ(instants[2]["name"], "samples");
  EXPECT_EQ(instants[2]["args"]["indices"], json::parse("[4,5,6]"));
  EXPECT_EQ(instants[2]["args"]["epoch"], 1);
  EXPECT_EQ(instants[3]["name"], "buckets (rebuilt)");
  EXPECT_EQ(instants[3]["args"]["buckets"], json::parse(R"([{"id":0,"params":[1,0],"bytes":64}])"));
}

TEST(ChromeExport, StringsAreEscaped) {
  const std::string text =
      header_line() +
      event("span", 0, 0, R"("name":"say \"hi\"\n\t\\ \u0001 \u00e9","cat":"c","stream":"compute","dur":1)");
  const std::vector<json> slices = with_ph(export_json(parse_trace(text)), "X");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0]["name"], "say \"hi\"\n\t\\ \x01 \u00e9");
}

TEST(ChromeExport, ANonUtf8PathStillGivesValidJson) {
  const TraceData data = parse_trace(header_line(), "run-\xff\xc3.jsonl");
  EXPECT_EQ(export_json(data)["otherData"]["trace"], "run-\ufffd\ufffd.jsonl");
}

TEST(ChromeExport, PartlyOverlappingSlicesMoveToAnExtraLaneAndNestedOnesStay) {
  const std::string text = header_line() +
                           event("span", 0, 0, R"("name":"outer","cat":"c","stream":"comm","dur":100)") +
                           event("span", 10, 0, R"("name":"inner","cat":"c","stream":"comm","dur":20)") +
                           event("span", 90, 0, R"("name":"straddles","cat":"c","stream":"comm","dur":20)") +
                           event("span", 100, 0, R"("name":"after","cat":"c","stream":"comm","dur":5)");
  const json doc = export_json(parse_trace(text));
  std::map<std::string, int> tid;
  for (const json& x : with_ph(doc, "X")) tid[x["name"]] = x["tid"];
  EXPECT_EQ(tid, (std::map<std::string, int>{{"outer", 2}, {"inner", 2}, {"straddles", 12}, {"after", 2}}));
  bool named = false;
  for (const json& m : with_ph(doc, "M"))
    named |= m["name"] == "thread_name" && m["tid"] == 12 && m["args"]["name"] == "comm #2";
  EXPECT_TRUE(named);
}

TEST(ChromeExport, RecordedTraceExportsToAFileAtomically) {
  const auto dir = testing::scratch_dir();
  const TraceData data = read_trace(testing::record_sample_trace(dir / "t.jsonl"));
  export_chrome(data, dir / "t.json");
  const json doc = json::parse(testing::read_file(dir / "t.json"));
  EXPECT_EQ(with_ph(doc, "X").size(), 8u + 2 * 4u) << "8 spans, 4 transfers (send + receive)";
  EXPECT_EQ(with_ph(doc, "s").size(), 4u);
  EXPECT_EQ(with_ph(doc, "f").size(), 4u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 2)
      << "no temporary file is left behind";
}

TEST(ChromeExport, UnwritablePathIsAnIoError) {
  const TraceData data = parse_trace(header_line());
  try {
    export_chrome(data, std::filesystem::path("/nonexistent/dir/t.json"));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_EQ(
        std::string(e.what()),
        "/nonexistent/dir/t.json: cannot create a file in '/nonexistent/dir': No such file or directory");
  }
}

}  // namespace
}  // namespace dpscope::trace
