// DataLoader: epoch orders, batch slicing and iteration (see data/dataloader.hpp).
#include "dpscope/data/dataloader.hpp"

#include <numeric>

#include "dpscope/base/checked.hpp"
#include "dpscope/data/randperm.hpp"

namespace dpscope {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options, Device device)
    : dataset_(std::move(dataset)), options_(std::move(options)), device_(std::move(device)) {
  DPS_ASSERT(dataset_ != nullptr, "DataLoader needs a dataset; pass make_dataset(...) or a TensorDataset");
  DPS_CHECK(options_.batch_size >= 1, ErrorKind::kInvalidArgument,
            "batch_size should be a positive integer value, but got batch_size={}", options_.batch_size);
  DPS_CHECK(!(options_.shuffle && options_.sampler), ErrorKind::kInvalidArgument,
            "sampler option is mutually exclusive with shuffle");
  order_ = make_order(epoch_);
}

void DataLoader::set_epoch(int64_t epoch) {
  DPS_CHECK(epoch >= 0, ErrorKind::kInvalidArgument, "set_epoch: epoch must be non-negative, got {}", epoch);
  epoch_ = epoch;
  order_ = make_order(epoch);
}

std::shared_ptr<const std::vector<int64_t>> DataLoader::make_order(int64_t epoch) const {
  if (options_.sampler) return std::make_shared<const std::vector<int64_t>>(options_.sampler(epoch));
  if (options_.shuffle)
    return std::make_shared<const std::vector<int64_t>>(
        randperm(dataset_->size(), options_.seed + static_cast<uint64_t>(epoch)));
  std::vector<int64_t> order(static_cast<size_t>(dataset_->size()));
  std::iota(order.begin(), order.end(), int64_t{0});
  return std::make_shared<const std::vector<int64_t>>(std::move(order));
}

int64_t DataLoader::batch_count(size_t indices) const {
  const auto m = static_cast<int64_t>(indices);
  const int64_t b = options_.batch_size;
  // ceil(m / b) without forming m + b - 1, which overflows for a batch_size near INT64_MAX (the
  // count would turn negative and a loop over batches would never advance).
  return options_.drop_last ? m / b : checked_ceil_div(m, b, "DataLoader: batches per epoch");
}

std::span<const int64_t> DataLoader::slice(const std::vector<int64_t>& order, int64_t b) const {
  const int64_t count = batch_count(order.size());
  DPS_CHECK(b >= 0 && b < count, ErrorKind::kInvalidArgument,
            "batch {} is out of range: this epoch has {} batches", b, count);
  const int64_t begin = b * options_.batch_size;
  const int64_t end = std::min(begin + options_.batch_size, static_cast<int64_t>(order.size()));
  return std::span<const int64_t>(order).subspan(static_cast<size_t>(begin),
                                                 static_cast<size_t>(end - begin));
}

Batch DataLoader::batch(int64_t b) const { return dataset_->get_batch(batch_indices(b), device_); }

DataLoader::Iterator DataLoader::begin() const { return Iterator(this, order_, 0); }
DataLoader::Iterator DataLoader::end() const { return Iterator(this, order_, num_batches()); }

const Batch& DataLoader::Iterator::operator*() const {
  DPS_ASSERT(loader_ != nullptr, "dereferencing a default-constructed DataLoader::Iterator");
  if (!current_) current_ = loader_->dataset_->get_batch(loader_->slice(*order_, b_), loader_->device_);
  return *current_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++b_;
  current_.reset();
  return *this;
}

}  // namespace dpscope
