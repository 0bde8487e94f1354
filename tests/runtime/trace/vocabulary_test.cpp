// The trace vocabulary (trace_format/events.hpp): docs/trace-format.md's "Vocabulary" table lists
// exactly the header's words (both directions), every word survives a string round trip, and the
// reader resolves what the recorder writes to the same enums.
#include "dpscope/trace_format/events.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope {
namespace {

// Row label -> the backticked words of that row, from the "## Vocabulary" table of the docs.
std::map<std::string, std::set<std::string>> documented_vocabulary() {
  std::ifstream in(std::string(DPSCOPE_SOURCE_DIR) + "/docs/trace-format.md");
  EXPECT_TRUE(in.good()) << "docs/trace-format.md not found";
  std::map<std::string, std::set<std::string>> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Vocabulary";
    if (!in_section || line.rfind("| ", 0) != 0 || line.rfind("| vocabulary", 0) == 0) continue;
    const size_t bar = line.find(" | ", 2);
    if (bar == std::string::npos) continue;
    std::set<std::string>& words = rows[line.substr(2, bar - 2)];
    for (size_t open = line.find('`', bar); open != std::string::npos; open = line.find('`', open + 1)) {
      const size_t close = line.find('`', open + 1);
      if (close == std::string::npos) break;
      words.insert(line.substr(open + 1, close - open - 1));
      open = close;
    }
  }
  return rows;
}

template <typename Container>
std::set<std::string> words_of(const Container& names) {
  std::set<std::string> out;
  for (std::string_view s : names)
    if (!s.empty()) out.emplace(s);  // kOther's empty spelling is no word
  return out;
}

template <typename Enum, size_t N>
std::set<std::string> names_of(const Enum (&values)[N]) {
  std::set<std::string> out;
  for (Enum v : values) out.emplace(to_string(v));
  return out;
}

TEST(TraceVocabulary, DocsAgreeWithTheHeader) {
  const auto rows = documented_vocabulary();
  const EventName fixed[] = {EventName::kBarrier, EventName::kAvgScale, EventName::kSyncParams,
                             EventName::kCopyH2D, EventName::kCopyD2H,  EventName::kCopyD2D,
                             EventName::kSendRecv};
  const std::map<std::string, std::set<std::string>> header = {
      {"event types", words_of(kEventTypeNames)},    {"span categories", words_of(kSpanCategoryNames)},
      {"instant names", names_of(kInstantNames)},    {"counter names", names_of(kCounterNames)},
      {"values names", names_of(kValuesNames)},      {"fixed span and transfer names", names_of(fixed)},
      {"values `when`", words_of(kValuesWhenNames)}, {"buckets `reason`", words_of(kBucketReasonNames)},
  };
  for (const auto& [row, words] : header) {
    const auto it = rows.find(row);
    ASSERT_NE(it, rows.end()) << "docs/trace-format.md has no Vocabulary row '" << row << "'";
    for (const std::string& w : words)
      EXPECT_EQ(it->second.count(w), 1u) << row << ": '" << w << "' not documented";
    for (const std::string& w : it->second)
      EXPECT_EQ(words.count(w), 1u) << row << ": documented '" << w << "' not in events.hpp";
  }
  EXPECT_EQ(rows.size(), header.size()) << "a Vocabulary row the test does not know";
  // Every fixed name is in exactly one row.
  std::set<std::string> all_names;
  for (std::string_view s : kEventNameStrings)
    if (!s.empty()) all_names.emplace(s);
  std::set<std::string> rows_names;
  for (const char* row : {"instant names", "counter names", "values names", "fixed span and transfer names"})
    rows_names.insert(rows.at(row).begin(), rows.at(row).end());
  EXPECT_EQ(all_names, rows_names);
}

TEST(TraceVocabulary, EveryWordRoundTrips) {
  for (size_t i = 0; i < kEventTypeNames.size(); ++i)
    EXPECT_EQ(event_type_from_string(to_string(static_cast<EventType>(i))), static_cast<EventType>(i));
  EXPECT_EQ(event_type_from_string("header"), std::nullopt);
  for (size_t i = 1; i < kEventNameStrings.size(); ++i)
    EXPECT_EQ(event_name_from_string(to_string(static_cast<EventName>(i))), static_cast<EventName>(i));
  for (size_t i = 1; i < kSpanCategoryNames.size(); ++i)
    EXPECT_EQ(span_category_from_string(to_string(static_cast<SpanCategory>(i))),
              static_cast<SpanCategory>(i));
  for (size_t i = 1; i < kValuesWhenNames.size(); ++i)
    EXPECT_EQ(values_when_from_string(to_string(static_cast<ValuesWhen>(i))), static_cast<ValuesWhen>(i));
  for (size_t i = 1; i < kBucketReasonNames.size(); ++i)
    EXPECT_EQ(bucket_reason_from_string(to_string(static_cast<BucketReason>(i))),
              static_cast<BucketReason>(i));
  EXPECT_EQ(event_name_from_string("forward 0.Linear"), EventName::kOther);
  EXPECT_EQ(event_name_from_string(""), EventName::kOther);
  EXPECT_EQ(span_category_from_string("kernel"), SpanCategory::kOther);
  EXPECT_EQ(values_when_from_string("later"), ValuesWhen::kOther);
  EXPECT_EQ(bucket_reason_from_string("moved"), BucketReason::kOther);
}

TEST(TraceVocabulary, NamesBuiltFromDataKeepTheirSpelling) {
  EXPECT_EQ(optimizer_step_span_name("Adam"), "optimizer.step Adam");
  EXPECT_EQ(reduce_span_name("sum"), "reduce sum");
  EXPECT_EQ(reduce_span_name(""), "reduce");
  EXPECT_EQ(collective_span_name("all_reduce", "ring", 4096), "all_reduce ring 4.00 KiB");
  EXPECT_EQ(collective_transfer_name("ring", "reduce-scatter"), "ring reduce-scatter");
  EXPECT_EQ(kernel_category(StreamKind::kCompute), SpanCategory::kCompute);
  EXPECT_EQ(kernel_category(StreamKind::kComm), SpanCategory::kComm);
  EXPECT_EQ(kernel_category(StreamKind::kCopy), SpanCategory::kCopy);
  EXPECT_EQ(instant_name(GradReady{.param = 1}), EventName::kGradReady);
  EXPECT_EQ(instant_name(BucketLaunched{}), EventName::kBucketLaunched);
  EXPECT_EQ(instant_name(BucketDone{}), EventName::kBucketDone);
  EXPECT_EQ(instant_name(WorkCompleted{}), EventName::kWorkCompleted);
  EXPECT_EQ(instant_name(CheckpointSaved{}), EventName::kCheckpointSaved);
}

TEST(TraceVocabulary, UnknownNamesReadAsOtherAndKeepTheirString) {
  const std::string text =
      R"({"type":"header","format":"dpscope-trace","version":"1.0","clock":"simulated","run":{},"devices":[{"id":0,"name":"sim:0","kind":"sim"}],"links":[],"params":[],"buckets":[]})"
      "\n"
      R"({"type":"span","ts":0,"rank":0,"dev":0,"step":0,"phase":"forward","name":"mystery","cat":"kernel","stream":"compute","dur":5})"
      "\n"
      R"({"type":"instant","ts":1,"rank":0,"dev":0,"step":0,"phase":"forward","name":"bucket_done","args":{"bucket":3,"bytes":64,"params":2}})"
      "\n";
  const trace::TraceData data = trace::parse_trace(text);
  ASSERT_EQ(data.events.size(), 2u);
  EXPECT_EQ(data.events[0].known, EventName::kOther);
  EXPECT_EQ(data.events[0].category, SpanCategory::kOther);
  EXPECT_EQ(data.str(data.events[0].cat), "kernel");
  EXPECT_EQ(data.events[1].known, EventName::kBucketDone);
  const auto bucket = data.bucket_args(data.events[1]);
  ASSERT_TRUE(bucket.has_value());
  EXPECT_EQ(bucket->bucket, 3);
  EXPECT_EQ(bucket->bytes, 64u);
  EXPECT_EQ(bucket->params, 2u);
  EXPECT_EQ(data.grad_ready(data.events[1]), std::nullopt);
  EXPECT_EQ(data.kernel_args(data.events[0]), std::nullopt);
}

}  // namespace
}  // namespace dpscope
