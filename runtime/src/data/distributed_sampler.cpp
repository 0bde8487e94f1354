// DistributedSampler (PyTorch 1.13 semantics; see the header).
#include "dpscope/data/distributed_sampler.hpp"

#include <algorithm>
#include <numeric>

#include "dpscope/base/checked.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/data/randperm.hpp"

namespace dpscope {

DistributedSampler::DistributedSampler(int64_t dataset_len, DistributedSamplerOptions options)
    : dataset_len_(dataset_len), options_(options) {
  DPS_CHECK(dataset_len >= 0, ErrorKind::kInvalidArgument,
            "DistributedSampler: dataset length must be >= 0, got {}", dataset_len);
  DPS_CHECK(options.num_replicas >= 1, ErrorKind::kInvalidArgument,
            "DistributedSampler: num_replicas must be at least 1, got {}", options.num_replicas);
  DPS_CHECK(options.rank >= 0 && options.rank < options.num_replicas, ErrorKind::kInvalidArgument,
            "Invalid rank {}, rank should be in the interval [0, {}]", options.rank,
            options.num_replicas - 1);
  const int64_t r = options.num_replicas;
  if (options.drop_last && dataset_len % r != 0) {
    // ceil((len - R) / R) computed as PyTorch does with math.ceil on a float; exact for these ints.
    const int64_t numerator = dataset_len - r;
    num_samples_ = numerator <= 0 ? 0 : checked_ceil_div(numerator, r, "DistributedSampler: num_samples");
  } else {
    num_samples_ = checked_ceil_div(dataset_len, r, "DistributedSampler: num_samples");
  }
  // total_size = num_samples * R may pass len by up to R - 1 (the padding): it must stay in int64.
  (void)checked_mul(num_samples_, r, "DistributedSampler: total_size = num_samples * num_replicas");
}

std::vector<int64_t> DistributedSampler::padded_order(uint64_t other_elems) const {
  // Refused before allocating: `dpscope sampler --len 99999999999999` used to die of std::bad_alloc,
  // and `--len 2147483648` of the OOM killer while the check counted one copy of a peak of three.
  // The order is made once, with room for its padding; `other_elems` is what the caller makes of it.
  const uint64_t order_elems = static_cast<uint64_t>(std::max(total_size(), dataset_len_));
  const uint64_t elems = checked_add(order_elems, other_elems, "DistributedSampler: index count");
  check_fits_in_host_memory(checked_mul<uint64_t>(elems, sizeof(int64_t), "DistributedSampler: index bytes"),
                            fmt::format("DistributedSampler: {} indices", elems));
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(order_elems));
  if (options_.shuffle) {
    randperm_into(order, dataset_len_, options_.seed + static_cast<uint64_t>(epoch_));
  } else {
    order.resize(static_cast<size_t>(dataset_len_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const size_t total = static_cast<size_t>(total_size());
  if (!options_.drop_last) {
    // Pad by repeating from the start, cyclically when padding exceeds the length.
    const size_t len = order.size();
    for (size_t i = 0; order.size() < total && len > 0; ++i) order.push_back(order[i % len]);
  } else {
    order.resize(total);
  }
  return order;
}

std::vector<int64_t> DistributedSampler::indices() const {
  const size_t r = static_cast<size_t>(options_.num_replicas);
  if (r == 1) return padded_order(0);  // one replica: every index of the order, in order
  const std::vector<int64_t> order = padded_order(static_cast<uint64_t>(num_samples_));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(options_.rank); i < order.size(); i += r) mine.push_back(order[i]);
  return mine;
}

std::vector<std::vector<int64_t>> DistributedSampler::all_ranks_indices() const {
  const std::vector<int64_t> order = padded_order(static_cast<uint64_t>(total_size()));
  const size_t r = static_cast<size_t>(options_.num_replicas);
  std::vector<std::vector<int64_t>> ranks(r);
  for (auto& rank : ranks) rank.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = 0; i < order.size(); ++i) ranks[i % r].push_back(order[i]);
  return ranks;
}

}  // namespace dpscope
