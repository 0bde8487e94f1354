// SampledKeys: every 8th key of a sorted sequence whose keys live elsewhere (a lane level's starts,
// a device's instant times: read through event indices from the trace's events). A search first
// bisects this small contiguous array, which stays in cache across the searches of a frame, and
// then reads the sequence itself only inside one block of 8 (3 reads), instead of ~20 scattered
// reads into a gigabyte of events. Costs one byte per key. Used by lanes.hpp and ReplayModel.
// (Every 32nd key took a quarter of that but left full-zoom frames ~20% slower than a copy of
// every time did on a 1M-event trace; every 8th, 10-15%.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <vector>

namespace dpscope::viz {

class SampledKeys {
 public:
  static constexpr size_t kStride = 8;

  SampledKeys() = default;
  // Samples key(k) for the n keys, which must be non-decreasing.
  template <typename Key>
  SampledKeys(size_t n, Key key) {
    samples_.reserve((n + kStride - 1) / kStride);
    for (size_t k = 0; k < n; k += kStride) samples_.push_back(key(k));
  }

  // The first k in [from, to) with key(k) >= t (`to` when none), for the sequence these samples
  // were taken from (an empty SampledKeys searches the whole range).
  template <typename Key>
  size_t lower_bound(size_t from, size_t to, int64_t t, Key key) const {
    if (from >= to) return to;
    if (!samples_.empty()) {
      // The samples taken inside (from, to). With b the first of them >= t, the answer lies after
      // sample b - 1 (when that one was searched: it is < t) and at or before sample b (when there
      // is one): at most one block of keys to read.
      const size_t lo_block = from / kStride + 1;
      const size_t hi_block = std::min((to + kStride - 1) / kStride, samples_.size());
      if (lo_block < hi_block) {
        const size_t b =
            static_cast<size_t>(std::lower_bound(samples_.begin() + static_cast<ptrdiff_t>(lo_block),
                                                 samples_.begin() + static_cast<ptrdiff_t>(hi_block), t) -
                                samples_.begin());
        if (b > lo_block) from = (b - 1) * kStride + 1;
        if (b < hi_block) to = b * kStride;
      }
    }
    const auto indices = std::views::iota(from, to);
    return from +
           static_cast<size_t>(std::ranges::partition_point(indices, [&](size_t k) { return key(k) < t; }) -
                               indices.begin());
  }

 private:
  std::vector<int64_t> samples_;  // (ceil(n / kStride)) samples_[b] = key(b * kStride)
};

}  // namespace dpscope::viz
