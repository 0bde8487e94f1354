// CachingAllocator: the cuda device's memory allocator, in the spirit of PyTorch's CUDA caching
// allocator. cudaMalloc and cudaFree are slow and synchronize the device, so freed blocks are kept
// and handed out again:
//  * sizes round up to a size class: multiples of 512 bytes below 1 MiB, of 2 MiB above;
//  * a freed block is reused only by a request of the same size class on the same stream (work
//    on one stream runs in order, so the next user cannot overtake the last one);
//  * when the raw allocator fails, the cache is emptied and the request retried once;
//  * empty_cache() gives every cached block back to the raw allocator.
// The raw memory is an interface so the policy is tested without a GPU (a fake RawMemory).
// Thread semantics: every member is safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dpscope {

class RawMemory {
 public:
  virtual ~RawMemory() = default;
  // Returns `bytes` of device memory, or nullptr when there is not enough.
  virtual void* allocate(uint64_t bytes) = 0;
  virtual void free(void* data) noexcept = 0;
};

class CachingAllocator {
 public:
  explicit CachingAllocator(RawMemory& raw) : raw_(raw) {}
  ~CachingAllocator();  // gives every block back (in use or cached)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The size class a request of `bytes` is served from.
  static uint64_t size_class(uint64_t bytes);

  // A block of at least `bytes` for work on stream `stream` (an opaque stream id), or nullptr when
  // the raw allocator has none even after the cache is emptied. 0 bytes gives nullptr.
  void* allocate(uint64_t bytes, int stream);
  // Returns a block allocate() gave to the cache of its stream; nullptr is ignored.
  void free(void* data) noexcept;
  // Gives every cached (unused) block back to the raw allocator.
  void empty_cache() noexcept;

  struct Stats {
    uint64_t reserved_bytes = 0;   // held from the raw allocator (in use + cached)
    uint64_t allocated_bytes = 0;  // in use (size classes)
    uint64_t raw_allocations = 0;  // calls that reached the raw allocator
    uint64_t cache_hits = 0;
  };
  Stats stats() const;

 private:
  struct Block {
    uint64_t size = 0;
    int stream = 0;
  };
  void empty_cache_locked() noexcept;

  RawMemory& raw_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> in_use_;
  std::map<std::pair<int, uint64_t>, std::vector<void*>> cached_;  // (stream, size class) -> blocks
  Stats stats_;
};

}  // namespace dpscope
