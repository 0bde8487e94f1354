// The cuda device's caching allocator policy (core/caching_allocator.hpp).
#include "dpscope/core/caching_allocator.hpp"

namespace dpscope {

namespace {
constexpr uint64_t kSmallQuantum = 512;
constexpr uint64_t kLargeThreshold = uint64_t{1} << 20;
constexpr uint64_t kLargeQuantum = uint64_t{2} << 20;

uint64_t round_up(uint64_t bytes, uint64_t quantum) { return (bytes + quantum - 1) / quantum * quantum; }
}  // namespace

uint64_t CachingAllocator::size_class(uint64_t bytes) {
  if (bytes == 0) return 0;
  return bytes < kLargeThreshold ? round_up(bytes, kSmallQuantum) : round_up(bytes, kLargeQuantum);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mutex_);
  for (auto& [data, block] : in_use_) raw_.free(data);
  in_use_.clear();
  empty_cache_locked();
}

void* CachingAllocator::allocate(uint64_t bytes, int stream) {
  if (bytes == 0) return nullptr;
  const uint64_t size = size_class(bytes);
  std::lock_guard lock(mutex_);
  if (auto it = cached_.find({stream, size}); it != cached_.end() && !it->second.empty()) {
    void* data = it->second.back();
    it->second.pop_back();
    in_use_.emplace(data, Block{size, stream});
    stats_.allocated_bytes += size;
    ++stats_.cache_hits;
    return data;
  }
  void* data = raw_.allocate(size);
  if (data == nullptr) {
    // Cached blocks of other sizes or streams may be what stands in the way.
    empty_cache_locked();
    data = raw_.allocate(size);
    if (data == nullptr) return nullptr;
  }
  ++stats_.raw_allocations;
  stats_.reserved_bytes += size;
  stats_.allocated_bytes += size;
  in_use_.emplace(data, Block{size, stream});
  return data;
}

void CachingAllocator::free(void* data) noexcept {
  if (data == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = in_use_.find(data);
  if (it == in_use_.end()) return;  // not ours: nothing to give back
  const Block block = it->second;
  in_use_.erase(it);
  stats_.allocated_bytes -= block.size;
  cached_[{block.stream, block.size}].push_back(data);
}

void CachingAllocator::empty_cache() noexcept {
  std::lock_guard lock(mutex_);
  empty_cache_locked();
}

void CachingAllocator::empty_cache_locked() noexcept {
  for (auto& [key, blocks] : cached_) {
    for (void* data : blocks) {
      raw_.free(data);
      stats_.reserved_bytes -= key.second;
    }
  }
  cached_.clear();
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace dpscope
