// White-box tests of the trace reader's small parts (runtime/src/trace_tools): the reused text
// buffer, the cache of recent strings in front of the parser's interning, and the copy of shared
// runs of args' values.
#include <gtest/gtest.h>

#include <string>

#include "dpscope/trace_tools/reader.hpp"
#include "event_copy.hpp"
#include "recent_strings.hpp"
#include "text_buffer.hpp"
#include "trace_test_util.hpp"

namespace dpscope::trace::detail {
namespace {

using testing::header_line;

TEST(TextBuffer, GrowsKeepingItsBytesAndKeepsItsRoomWhenCleared) {
  TextBuffer buffer;
  EXPECT_TRUE(buffer.empty());
  std::string expected;
  for (int i = 0; i < 1000; ++i) {  // many small writes: the room grows several times
    const std::string part = std::to_string(i) + ",";
    char* room = buffer.room(part.size());
    ASSERT_GE(buffer.free_bytes(), part.size());
    part.copy(room, part.size());
    buffer.grow(part.size());
    expected += part;
  }
  EXPECT_EQ(buffer.view(), expected);
  const size_t capacity = buffer.capacity();
  buffer.clear();
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.capacity(), capacity);
  EXPECT_EQ(buffer.room(capacity), buffer.data()) << "room within the capacity is not moved";
}

TEST(RecentStrings, AnswersOnlyForTheStringCachedInItsSlot) {
  RecentStrings cache;
  EXPECT_EQ(cache.find("compute"), -1);
  // Every length that is cached, 1 to kMaxBytes.
  std::string s;
  for (uint32_t n = 1; n <= RecentStrings::kMaxBytes; ++n) {
    s.push_back(static_cast<char>('a' + n % 26));
    cache.put(s, n);
    EXPECT_EQ(cache.find(s), n) << s;
  }
  // The empty string and longer ones are never cached (the caller interns them itself).
  cache.put("", 7);
  EXPECT_EQ(cache.find(""), -1);
  const std::string long_text(RecentStrings::kMaxBytes + 1, 'x');
  cache.put(long_text, 8);
  EXPECT_EQ(cache.find(long_text), -1);

  // Strings with the same length, first 8 and last 8 bytes share a slot: the later one replaces
  // the earlier, which is then not found, never answered with the other's index.
  const std::string first =
      "collecti"
      "ve r"
      "ing 64 B";  // differ only in bytes 8 to 11
  const std::string second =
      "collecti"
      "ve t"
      "ing 64 B";
  cache.put(first, 1);
  cache.put(second, 2);
  EXPECT_EQ(cache.find(second), 2);
  EXPECT_EQ(cache.find(first), -1);
  EXPECT_EQ(cache.find("collective ring 64 C"), -1);
  cache.clear();
  EXPECT_EQ(cache.find(second), -1);
}

TEST(CopyEvent, ARunOfValuesSharedByTwoKeyListsIsCopiedForEachAsItsKeysReadIt) {
  // Two events whose args are the same entries [1, k] in the source's value pool: for the first both
  // are numbers, for the second k is the string "t" (the source's string k). Copied with a map of
  // runs, the second must not reuse the first's copy: in the destination "t" has another index.
  auto parse = [](int64_t k) {
    const std::string text =
        header_line() +
        fmt::format(
            R"({{"type":"instant","ts":1,"rank":0,"dev":0,"step":0,"phase":"none","name":"n","args":{{"a":1,"b":{}}}}})"
            "\n",
            k) +
        R"({"type":"instant","ts":2,"rank":0,"dev":0,"step":0,"phase":"none","name":"n","args":{"a":1,"c":"t"}})"
        "\n";
    return parse_trace(text, "t.jsonl");
  };
  const TraceData probe = parse(0);
  const auto k = static_cast<int64_t>(probe.string_index.at("t"));
  const TraceData from = parse(k);
  ASSERT_EQ(from.events.size(), 2u);
  const Args& first = from.args[from.events[0].payload];
  const Args& second = from.args[from.events[1].payload];
  ASSERT_EQ(first.begin, second.begin) << "the source stores the equal runs once";
  ASSERT_NE(first.shape, second.shape);

  TraceData into;
  for (const char* s : {"x", "y", "z"}) into.intern(s);  // "t" gets another index than in `from`
  std::vector<uint32_t> strings;
  std::vector<uint32_t> shapes;
  std::vector<uint64_t> runs;
  CopyMaps maps{strings, shapes, &runs};
  for (const Event& e : from.events) into.events.push_back(copy_event(into, from, e, maps, true));
  const Args a = into.args[into.events[0].payload];
  const Args b = into.args[into.events[1].payload];
  ASSERT_EQ(into.arg_values(a).size(), 2u);
  EXPECT_EQ(into.arg_values(a)[1].second, static_cast<double>(k));
  ASSERT_EQ(into.arg_texts(b).size(), 1u);
  EXPECT_EQ(into.str(into.arg_texts(b)[0].second), "t");
  // The same run with the same keys again: the copy made before is reused.
  const Event again = copy_event(into, from, from.events[1], maps, true);
  EXPECT_EQ(into.args[again.payload].begin, b.begin);
}

}  // namespace
}  // namespace dpscope::trace::detail
