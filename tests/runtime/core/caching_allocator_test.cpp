// The cuda device's caching allocator policy (core/caching_allocator.hpp), over a fake RawMemory
// with a capacity, so size classes, per-stream reuse, empty_cache and the retry after a failed raw
// allocation are tested without a GPU.
#include "dpscope/core/caching_allocator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

namespace dpscope {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Host memory standing in for a GPU's: refuses past `capacity_bytes`, records every call.
class FakeRawMemory final : public RawMemory {
 public:
  explicit FakeRawMemory(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
  ~FakeRawMemory() override { EXPECT_TRUE(live_.empty()) << live_.size() << " blocks leaked"; }

  void* allocate(uint64_t bytes) override {
    ++allocate_calls;
    if (in_use_bytes + bytes > capacity_bytes_) return nullptr;
    void* data = std::malloc(bytes);
    live_.emplace(data, bytes);
    in_use_bytes += bytes;
    return data;
  }
  void free(void* data) noexcept override {
    auto it = std::find_if(live_.begin(), live_.end(), [&](const auto& b) { return b.first == data; });
    if (it == live_.end()) {
      ++bad_frees;
      return;
    }
    in_use_bytes -= it->second;
    live_.erase(it);
    freed.push_back(data);
    std::free(data);
  }

  uint64_t in_use_bytes = 0;
  int allocate_calls = 0;
  int bad_frees = 0;
  std::vector<void*> freed;

 private:
  uint64_t capacity_bytes_;
  std::set<std::pair<void*, uint64_t>> live_;
};

TEST(CachingAllocator, RoundsSmallRequestsTo512BytesAndLargeOnesTo2MiB) {
  EXPECT_EQ(CachingAllocator::size_class(0), 0u);
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(kMiB - 1), kMiB);  // still below 1 MiB: 512-byte steps
  EXPECT_EQ(CachingAllocator::size_class(kMiB), 2 * kMiB);  // from 1 MiB: 2 MiB steps
  EXPECT_EQ(CachingAllocator::size_class(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::size_class(2 * kMiB + 1), 4 * kMiB);
}

TEST(CachingAllocator, AFreedBlockIsReusedBySameSizeClassOnTheSameStream) {
  FakeRawMemory raw(64 * kMiB);
  CachingAllocator allocator(raw);
  void* a = allocator.allocate(1000, /*stream=*/0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(raw.in_use_bytes, 1024u);
  allocator.free(a);
  const CachingAllocator::Stats cached = allocator.stats();
  EXPECT_EQ(cached.reserved_bytes, 1024u);  // kept, not given back
  EXPECT_EQ(cached.allocated_bytes, 0u);

  void* b = allocator.allocate(700, /*stream=*/0);  // 700 -> 1024, the same class
  EXPECT_EQ(b, a);
  const CachingAllocator::Stats s = allocator.stats();
  EXPECT_EQ(s.raw_allocations, 1u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.reserved_bytes, 1024u);
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(raw.allocate_calls, 1);
  allocator.free(b);
}

TEST(CachingAllocator, AFreedBlockIsNotReusedByAnotherStreamOrSizeClass) {
  FakeRawMemory raw(64 * kMiB);
  CachingAllocator allocator(raw);
  void* a = allocator.allocate(1000, /*stream=*/0);
  allocator.free(a);
  void* other_stream = allocator.allocate(1000, /*stream=*/1);
  void* other_size = allocator.allocate(1025, /*stream=*/0);  // class 1536
  EXPECT_NE(other_stream, a);
  EXPECT_NE(other_size, a);
  const CachingAllocator::Stats s = allocator.stats();
  EXPECT_EQ(s.raw_allocations, 3u);
  EXPECT_EQ(s.cache_hits, 0u);
  EXPECT_EQ(s.reserved_bytes, 1024u + 1024u + 1536u);
  EXPECT_EQ(s.allocated_bytes, 1024u + 1536u);
  allocator.free(other_stream);
  allocator.free(other_size);
}

TEST(CachingAllocator, EmptyCacheGivesBackCachedBlocksButNotBlocksInUse) {
  FakeRawMemory raw(64 * kMiB);
  CachingAllocator allocator(raw);
  void* cached = allocator.allocate(3 * kMiB, 0);  // class 4 MiB
  void* used = allocator.allocate(512, 0);
  allocator.free(cached);
  allocator.empty_cache();
  EXPECT_EQ(raw.freed, std::vector<void*>{cached});
  EXPECT_EQ(raw.in_use_bytes, 512u);
  const CachingAllocator::Stats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes, 512u);
  EXPECT_EQ(s.allocated_bytes, 512u);
  // Nothing cached any more: the next 3 MiB request reaches the raw allocator again.
  void* again = allocator.allocate(3 * kMiB, 0);
  EXPECT_EQ(allocator.stats().raw_allocations, 3u);
  allocator.free(again);
  allocator.free(used);
}

TEST(CachingAllocator, AFailedRawAllocationEmptiesTheCacheAndRetriesOnce) {
  FakeRawMemory raw(4 * kMiB);
  CachingAllocator allocator(raw);
  void* small = allocator.allocate(2 * kMiB, /*stream=*/1);  // cached on stream 1 after the free
  allocator.free(small);
  // 2 MiB cached + 4 MiB asked > 4 MiB: the first raw call fails, the cache is emptied, the retry fits.
  void* big = allocator.allocate(4 * kMiB, /*stream=*/0);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(raw.allocate_calls, 3);
  EXPECT_EQ(raw.freed, std::vector<void*>{small});
  const CachingAllocator::Stats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes, 4 * kMiB);
  EXPECT_EQ(s.allocated_bytes, 4 * kMiB);
  EXPECT_EQ(s.raw_allocations, 2u);
  allocator.free(big);
}

TEST(CachingAllocator, ReturnsNullWhenEvenTheRetryFailsAndChangesNothing) {
  FakeRawMemory raw(kMiB);
  CachingAllocator allocator(raw);
  void* held = allocator.allocate(kMiB / 2, 0);
  const CachingAllocator::Stats before = allocator.stats();
  EXPECT_EQ(allocator.allocate(kMiB, 0), nullptr);  // class 2 MiB > 1 MiB capacity
  const CachingAllocator::Stats after = allocator.stats();
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.raw_allocations, before.raw_allocations);
  EXPECT_EQ(raw.allocate_calls, 3);  // the first, then two tries of the failing request
  allocator.free(held);
}

TEST(CachingAllocator, ZeroBytesNullAndForeignPointersAreIgnored) {
  FakeRawMemory raw(kMiB);
  CachingAllocator allocator(raw);
  EXPECT_EQ(allocator.allocate(0, 0), nullptr);
  EXPECT_EQ(raw.allocate_calls, 0);
  allocator.free(nullptr);
  int not_ours = 0;
  allocator.free(&not_ours);
  const CachingAllocator::Stats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(raw.bad_frees, 0);
}

TEST(CachingAllocator, DestructionGivesEveryBlockBackInUseOrCached) {
  FakeRawMemory raw(64 * kMiB);
  {
    CachingAllocator allocator(raw);
    allocator.free(allocator.allocate(4096, 0));
    static_cast<void>(allocator.allocate(3 * kMiB, 2));  // still in use at destruction
    EXPECT_EQ(raw.in_use_bytes, 4096u + 4 * kMiB);
  }
  EXPECT_EQ(raw.in_use_bytes, 0u);
  EXPECT_EQ(raw.freed.size(), 2u);
}

TEST(CachingAllocator, ThreadsAllocatingAndFreeingAtOnceKeepTheCountsExact) {
  FakeRawMemory raw(1024 * kMiB);
  CachingAllocator allocator(raw);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&allocator, t] {
      for (int i = 0; i < 500; ++i) {
        void* a = allocator.allocate(static_cast<uint64_t>(512 * (1 + i % 4)), t);
        void* b = allocator.allocate(kMiB, t);
        allocator.free(a);
        allocator.free(b);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const CachingAllocator::Stats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.raw_allocations + s.cache_hits, 4u * 500u * 2u);
  // Each stream caches at most one block per class it used: 4 small classes and one 2 MiB block.
  EXPECT_EQ(s.reserved_bytes, 4u * (512u + 1024u + 1536u + 2048u + 2 * kMiB));
  EXPECT_EQ(raw.in_use_bytes, s.reserved_bytes);
}

}  // namespace
}  // namespace dpscope
