// compute_bucket_assignment_by_size (semantics of c10d's reducer.cpp; see the header).
#include "dpscope/parallel/bucket_assignment.hpp"

#include <algorithm>

#include "dpscope/base/error.hpp"

namespace dpscope {

std::vector<std::vector<int>> compute_bucket_assignment_by_size(const std::vector<uint64_t>& sizes_bytes,
                                                                const std::vector<uint64_t>& limits_bytes,
                                                                const std::vector<int>& order) {
  DPS_CHECK(!limits_bytes.empty(), ErrorKind::kInvalidArgument,
            "bucket assignment needs at least one size limit");
  DPS_CHECK(order.empty() || order.size() == sizes_bytes.size(), ErrorKind::kInvalidArgument,
            "bucket assignment: order lists {} tensors but there are {}", order.size(), sizes_bytes.size());
  std::vector<std::vector<int>> result;
  std::vector<int> open;
  uint64_t open_bytes = 0;
  size_t limit = 0;
  for (size_t i = 0; i < sizes_bytes.size(); ++i) {
    const int index = order.empty() ? static_cast<int>(i) : order[i];
    DPS_CHECK(index >= 0 && static_cast<size_t>(index) < sizes_bytes.size(), ErrorKind::kInvalidArgument,
              "bucket assignment: tensor index {} out of range", index);
    open.push_back(index);
    open_bytes += sizes_bytes[static_cast<size_t>(index)];
    if (open_bytes >= limits_bytes[limit]) {
      result.push_back(std::move(open));
      open.clear();
      open_bytes = 0;
      if (limit + 1 < limits_bytes.size()) ++limit;
    }
  }
  if (!open.empty()) result.push_back(std::move(open));
  if (order.empty()) {
    std::sort(result.begin(), result.end(), [](const std::vector<int>& a, const std::vector<int>& b) {
      return *std::min_element(a.begin(), a.end()) < *std::min_element(b.begin(), b.end());
    });
  }
  return result;
}

}  // namespace dpscope
