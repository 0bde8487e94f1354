// Store (comm/store.hpp) through InMemoryStore: set/get/add/compare_set/wait/check/delete, the
// exact timeout and misuse messages, and atomicity of add under 8 concurrent threads.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/store.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

using std::chrono::steady_clock;

using testing::error_of;
using testing::Outcome;

TEST(InMemoryStore, SetThenGetReturnsTheBytesAndOverwritesReplace) {
  InMemoryStore store;
  store.set("a", StoreBytes{0, 255, 7});
  EXPECT_EQ(store.get("a"), (StoreBytes{0, 255, 7}));
  store.set("a", "text");
  EXPECT_EQ(store.get_string("a"), "text");
  EXPECT_EQ(store.num_keys(), 1);
}

TEST(InMemoryStore, GetWaitsForAKeyAnotherThreadSetsLater) {
  InMemoryStore store;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    store.set("late", "here");
  });
  EXPECT_EQ(store.get_string("late", Milliseconds(5000)), "here");
  setter.join();
}

TEST(InMemoryStore, GetOfAMissingKeyTimesOutNamingTheKeyAndTheTimeWaited) {
  InMemoryStore store;
  const auto begun = steady_clock::now();
  const Outcome e = error_of([&] { store.get("never", Milliseconds(50)); });
  const auto waited = std::chrono::duration_cast<Milliseconds>(steady_clock::now() - begun);
  EXPECT_EQ(e.kind, ErrorKind::kTimeout);
  EXPECT_EQ(e.message, "InMemoryStore get('never'): timed out after 50 ms waiting for the key to be set");
  EXPECT_GE(waited.count(), 50);
  EXPECT_LT(waited.count(), 2000);
}

TEST(InMemoryStore, ZeroTimeoutMeansTheStoresOwn) {
  InMemoryStore store(Milliseconds(40));
  EXPECT_EQ(store.timeout(), Milliseconds(40));
  EXPECT_EQ(error_of([&] { store.get("x"); }).message,
            "InMemoryStore get('x'): timed out after 40 ms waiting for the key to be set");
  EXPECT_EQ(error_of([] { InMemoryStore bad(Milliseconds(0)); }).message,
            "store timeout must be positive, got 0 ms");
}

TEST(InMemoryStore, AddCountsFromZeroAndStoresDecimalText) {
  InMemoryStore store;
  EXPECT_EQ(store.add("n", 5), 5);
  EXPECT_EQ(store.add("n", -7), -2);
  EXPECT_EQ(store.add("n", 0), -2);
  EXPECT_EQ(store.get_string("n"), "-2");
  store.set("word", "abc");
  const Outcome e = error_of([&] { store.add("word", 1); });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message, "InMemoryStore add('word', 1): the key holds a value that is not an integer counter");
  EXPECT_EQ(store.get_string("word"), "abc");
}

TEST(InMemoryStore, ConcurrentAddsFromEightThreadsLoseNothing) {
  InMemoryStore store;
  constexpr int kThreads = 8, kAddsEach = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAddsEach; ++i) store.add("counter", t + 1);
    });
  for (auto& t : threads) t.join();
  // sum over t of (t + 1) * 1000 = 36 * 1000
  EXPECT_EQ(store.add("counter", 0), 36000);
}

TEST(InMemoryStore, CompareSetSwapsOnlyWhenTheCurrentValueIsExpected) {
  InMemoryStore store;
  // A missing key counts as empty: expected {} creates it.
  EXPECT_EQ(store.compare_set("k", {}, to_store_bytes("one")), to_store_bytes("one"));
  EXPECT_EQ(store.compare_set("k", to_store_bytes("zero"), to_store_bytes("two")), to_store_bytes("one"));
  EXPECT_EQ(store.compare_set("k", to_store_bytes("one"), to_store_bytes("two")), to_store_bytes("two"));
  EXPECT_EQ(store.get_string("k"), "two");
  EXPECT_EQ(store.compare_set("missing", to_store_bytes("x"), to_store_bytes("y")), StoreBytes{});
  EXPECT_FALSE(store.check({"missing"}));
}

TEST(InMemoryStore, WaitReturnsOnceEveryKeyExists) {
  InMemoryStore store;
  store.set("a", "1");
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    store.add("b", 1);
  });
  store.wait({"a", "b"}, Milliseconds(5000));
  setter.join();
  EXPECT_TRUE(store.check({"a", "b"}));
  store.wait({});  // nothing to wait for
}

TEST(InMemoryStore, WaitTimesOutNamingOnlyTheMissingKeys) {
  InMemoryStore store;
  store.set("b", "present");
  const Outcome e = error_of([&] { store.wait({"a", "b", "c"}, Milliseconds(30)); });
  EXPECT_EQ(e.kind, ErrorKind::kTimeout);
  EXPECT_EQ(e.message, "InMemoryStore wait: timed out after 30 ms; keys never set: ['a', 'c']");
}

TEST(InMemoryStore, CheckAndDeleteKey) {
  InMemoryStore store;
  store.set("a", "");
  EXPECT_TRUE(store.check({"a"}));  // an empty value is still a value
  EXPECT_FALSE(store.check({"a", "b"}));
  EXPECT_TRUE(store.delete_key("a"));
  EXPECT_FALSE(store.delete_key("a"));
  EXPECT_EQ(store.num_keys(), 0);
}

TEST(InMemoryStore, EmptyKeysAreRefused) {
  InMemoryStore store;
  const Outcome e = error_of([&] { store.set("", "x"); });
  EXPECT_EQ(e.kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message, "InMemoryStore set: the key is empty");
  EXPECT_EQ(error_of([&] { store.wait({"a", ""}); }).message, "InMemoryStore wait: the key is empty");
}

}  // namespace
}  // namespace dpscope
