// White-box tests of the trace reader's small parts (runtime/src/trace_format): the reused text
// buffer and the cache of recent strings in front of the parser's interning.
#include <gtest/gtest.h>

#include <string>

#include "recent_strings.hpp"
#include "text_buffer.hpp"

namespace dpscope::trace::detail {
namespace {

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

}  // namespace
}  // namespace dpscope::trace::detail
