// largest_value_columns (value_columns.hpp).
#include "replay/value_columns.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dpscope::viz {

std::vector<size_t> largest_value_columns(const std::vector<const std::vector<float>*>& rows, size_t count) {
  size_t width = 0;
  for (const std::vector<float>* r : rows) width = std::max(width, r->size());
  std::vector<double> score(width, 0.0);
  for (const std::vector<float>* r : rows)
    for (size_t i = 0; i < r->size(); ++i)
      if (std::isfinite((*r)[i])) score[i] += std::fabs(static_cast<double>((*r)[i]));
  std::vector<size_t> order(width);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  order.resize(std::min(count, width));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace dpscope::viz
