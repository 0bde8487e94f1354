// PyTorch's DDP bucket defaults (torch/nn/parallel/distributed.py): bucket_cap_mb=25, and the first
// bucket 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES). They sit with the trace's vocabulary because a
// trace's run object that names no bucket_cap_mb or first_bucket_mb means these (a PyTorch run
// recorded with its defaults); DdpOptions, `dpscope train --bucket-mb` and the DDP diagnosis of
// trace_tools all start here.
#pragma once

#include <cstdint>

namespace dpscope {

inline constexpr double kDefaultBucketCapMb = 25.0;
inline constexpr double kDefaultFirstBucketMb = 1.0;
inline constexpr uint64_t kDefaultFirstBucketBytes =
    static_cast<uint64_t>(kDefaultFirstBucketMb * 1024 * 1024);
inline constexpr uint64_t kDefaultBucketCapBytes = static_cast<uint64_t>(kDefaultBucketCapMb * 1024 * 1024);

}  // namespace dpscope
