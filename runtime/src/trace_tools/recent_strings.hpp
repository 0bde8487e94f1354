// A small direct-mapped cache of short strings and their interned indices (internal to libdpscope).
//
// Every trace line names a dozen strings (its name, category, stream, args' keys and texts), and
// nearly all are the same few dozen: a slot picked by a cheap hash of the length and the first and
// last eight bytes, then one compare, answers most of them without hashing the whole string and
// walking a hash map's nodes (TraceParser::intern, docs/benchmarks.md "10M events").
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace dpscope::trace::detail {

class RecentStrings {
 public:
  static constexpr size_t kMaxBytes = 30;  // longer strings (and the empty one) are not cached

  // The index cached for `s`, or -1.
  int64_t find(std::string_view s) const {
    if (s.empty() || s.size() > kMaxBytes) return -1;
    const Slot& slot = slots_[slot_of(s)];
    return slot.size == s.size() && same_bytes(slot.text, s.data(), s.size()) ? int64_t{slot.index} : -1;
  }
  // Caches `s` as `index`, replacing what its slot held.
  void put(std::string_view s, uint32_t index) {
    if (s.empty() || s.size() > kMaxBytes) return;
    Slot& slot = slots_[slot_of(s)];
    slot.size = static_cast<uint8_t>(s.size());
    std::memcpy(slot.text, s.data(), s.size());
    slot.index = index;
  }
  void clear() { slots_ = {}; }

 private:
  static constexpr size_t kSlots = 512;
  struct Slot {
    uint32_t index = 0;
    uint8_t size = 0xFF;  // no string: never equals a cached length
    char text[kMaxBytes] = {};
  };

  // memcmp(a, b, n) == 0, inlined: 8 bytes at a time, then the rest (a call to memcmp would cost
  // more than comparing the few bytes of a key).
  static bool same_bytes(const char* a, const char* b, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t x = 0;
      uint64_t y = 0;
      std::memcpy(&x, a + i, 8);
      std::memcpy(&y, b + i, 8);
      if (x != y) return false;
    }
    for (; i < n; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

  static size_t slot_of(std::string_view s) {
    uint64_t head = 0;
    uint64_t tail = 0;
    if (s.size() >= 8) {
      std::memcpy(&head, s.data(), 8);
      std::memcpy(&tail, s.data() + s.size() - 8, 8);
    } else {  // byte by byte: a memcpy of a variable length under 8 would be a call
      for (size_t i = 0; i < s.size(); ++i) head |= uint64_t{static_cast<uint8_t>(s[i])} << (8 * i);
    }
    uint64_t h = (head * 0x9E3779B97F4A7C15ull) ^ (tail * 0xC2B2AE3D27D4EB4Full) ^ s.size();
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return static_cast<size_t>(h >> 55) & (kSlots - 1);  // the top 9 bits
  }

  std::array<Slot, kSlots> slots_{};
};

}  // namespace dpscope::trace::detail
