// compute_bucket_assignment_by_size: how DDP groups gradients into buckets (c10d reducer.cpp).
//
// Walks the tensors in the given order, adding each to the open bucket; a bucket closes once its
// size reaches the current limit, and the limit then advances to the next one in `limits_bytes`
// (the last limit repeats). The remaining open bucket closes at the end. Without `order` (initial
// assignment, tensors in parameters() order) the buckets come out sorted by their smallest index —
// DDP then REVERSES the list so bucket 0 holds the last layers. With `order` (a rebuild in
// gradient-ready order) they stay in that order. All our tensors are float32 on one device, so
// there is one bucket stream (PyTorch keeps one per dtype and device).
//
// PyTorch 1.13 DDP with find_unused_parameters=False starts with limits {SIZE_MAX} (one bucket),
// records the gradient-ready order during iteration 1, and rebuilds with {1 MiB, bucket_cap}
// before iteration 2. Lesson 04 draws both assignments.
#pragma once

#include <cstdint>
#include <vector>

#include "dpscope/trace_format/ddp_defaults.hpp"  // kDefaultBucketCapMb, kDefaultFirstBucketMb

namespace dpscope {

// `sizes_bytes[i]` is tensor i's size. With `order` empty, tensors are visited 0..n-1 and the
// result is sorted by smallest index; otherwise they are visited in `order` (indices into
// sizes_bytes) and the result keeps that order. Returns tensor indices per bucket.
std::vector<std::vector<int>> compute_bucket_assignment_by_size(const std::vector<uint64_t>& sizes_bytes,
                                                                const std::vector<uint64_t>& limits_bytes,
                                                                const std::vector<int>& order = {});

}  // namespace dpscope
