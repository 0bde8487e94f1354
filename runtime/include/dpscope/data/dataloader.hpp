// DataLoader: batches of a Dataset, epoch after epoch — a minimal torch.utils.data.DataLoader.
//
//   DataLoader loader(dataset, {.batch_size = 32, .shuffle = true, .seed = 0}, device);
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.set_epoch(epoch);
//     for (const Batch& batch : loader) { ... batch.inputs, batch.targets, batch.indices ... }
//   }
//
// Order of an epoch: 0..N-1, or with shuffle randperm(N, seed + epoch) (data/randperm.hpp) — the
// rule DistributedSampler uses, so an epoch's order is reproducible from (seed, epoch) alone and,
// like there, forgetting set_epoch repeats the same order every epoch. (PyTorch's own DataLoader
// shuffles with a RandomSampler drawing from one generator across epochs; dpscope uses the
// DistributedSampler rule so single-device and DDP runs are described by the same two numbers.)
// A custom `sampler` (e.g. a DistributedSampler's indices for one rank) replaces that order.
// Batches: consecutive slices of batch_size; the last one is smaller unless drop_last drops it, so an
// epoch has ceil(M / B) batches, or floor(M / B) with drop_last, M being the epoch's index count.
// Iteration snapshots the epoch's order at begin(): set_epoch during a loop affects the next loop.
// Each batch is gathered when the iterator is dereferenced (Dataset::get_batch onto `device`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "dpscope/data/dataset.hpp"

namespace dpscope {

// The dataset indices of one epoch, in order (PyTorch's `sampler=` argument).
using EpochSampler = std::function<std::vector<int64_t>(int64_t epoch)>;

struct DataLoaderOptions {
  int64_t batch_size = 1;  // PyTorch's default
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;
  EpochSampler sampler;  // optional; mutually exclusive with shuffle, as in PyTorch
};

class DataLoader {
 public:
  class Iterator;

  // Throws kInvalidArgument for batch_size < 1 or shuffle together with a sampler (PyTorch's wording).
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
             Device device = Device::cpu());

  // Selects the epoch whose order the next iteration uses (epoch >= 0).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  const Device& device() const { return device_; }

  // This epoch's dataset indices, in visiting order (before batching and drop_last).
  const std::vector<int64_t>& epoch_order() const { return *order_; }
  // len(loader): ceil(M / B), or floor(M / B) with drop_last.
  int64_t num_batches() const { return batch_count(order_->size()); }
  // Dataset indices of batch `b` of this epoch (0 <= b < num_batches()).
  std::span<const int64_t> batch_indices(int64_t b) const { return slice(*order_, b); }
  // Batch `b` of this epoch, gathered onto device().
  Batch batch(int64_t b) const;

  Iterator begin() const;
  Iterator end() const;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;

    Iterator() = default;
    const Batch& operator*() const;
    const Batch* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    int64_t batch_number() const { return b_; }
    friend bool operator==(const Iterator& a, const Iterator& b) { return a.b_ == b.b_; }

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, std::shared_ptr<const std::vector<int64_t>> order, int64_t b)
        : loader_(loader), order_(std::move(order)), b_(b) {}
    const DataLoader* loader_ = nullptr;
    std::shared_ptr<const std::vector<int64_t>> order_;  // the epoch's order, fixed at begin()
    int64_t b_ = 0;
    mutable std::optional<Batch> current_;
  };

 private:
  int64_t batch_count(size_t indices) const;
  std::span<const int64_t> slice(const std::vector<int64_t>& order, int64_t b) const;
  std::shared_ptr<const std::vector<int64_t>> make_order(int64_t epoch) const;

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  Device device_;
  int64_t epoch_ = 0;
  std::shared_ptr<const std::vector<int64_t>> order_;
};

}  // namespace dpscope
