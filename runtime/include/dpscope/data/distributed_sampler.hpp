// DistributedSampler: which dataset indices each rank reads in an epoch, exactly as PyTorch 1.13's
// torch.utils.data.distributed.DistributedSampler computes them.
//
//   num_samples = ceil((len - R) / R) if drop_last and len % R != 0 else ceil(len / R)
//   total_size  = num_samples * R
//   indices     = randperm(len, seed + epoch) if shuffle else 0 .. len-1
//   not drop_last: pad by repeating indices from the start (cyclically) up to total_size
//   drop_last:     truncate to total_size
//   rank's indices = indices[rank : total_size : R]      (strided, not contiguous)
//
// Without set_epoch() every epoch repeats the same order (pytorch/pytorch#31771): lesson 03 shows
// that pitfall. Used by DDP training (`dpscope train --mode ddp`) and `dpscope sampler`.
#pragma once

#include <cstdint>
#include <vector>

namespace dpscope {

struct DistributedSamplerOptions {
  int64_t num_replicas = 1;
  int64_t rank = 0;
  bool shuffle = true;  // PyTorch's defaults
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  // Throws kInvalidArgument like PyTorch: "Invalid rank 4, rank should be in the interval [0, 3]".
  DistributedSampler(int64_t dataset_len, DistributedSamplerOptions options);

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // len(sampler): the number of indices this rank reads per epoch.
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * options_.num_replicas; }
  const DistributedSamplerOptions& options() const { return options_; }

  // This rank's indices for the current epoch.
  std::vector<int64_t> indices() const;
  // Every rank's indices for the current epoch (rank r at [r]); what lessons draw.
  std::vector<std::vector<int64_t>> all_ranks_indices() const;

 private:
  // total_size indices before striding; refuses (before allocating) an order that, with
  // `other_elems` more indices the caller makes of it, does not fit in this machine's memory.
  std::vector<int64_t> padded_order(uint64_t other_elems) const;

  int64_t dataset_len_;
  DistributedSamplerOptions options_;
  int64_t num_samples_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace dpscope
