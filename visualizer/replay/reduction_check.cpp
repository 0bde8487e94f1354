// check_reduction (reduction_check.hpp).
#include "replay/reduction_check.hpp"

#include <algorithm>
#include <cmath>

#include "replay/value_columns.hpp"

namespace dpscope::viz {

ReductionCheck check_reduction(const ReplayModel& model, const Reduction& r, Cursor cursor, size_t columns) {
  const trace::TraceData& data = model.data();
  auto values_of = [&](uint32_t ev) -> const trace::ValueSample& {
    return data.values[static_cast<size_t>(data.events[ev].payload)];
  };
  ReductionCheck c;
  for (uint32_t ev : r.before)
    if (model.applied(ev, cursor)) c.rows.push_back(ev);
  c.before = !c.rows.empty();
  if (!c.before) c.rows = r.local;
  for (uint32_t ev : r.after)
    if (model.applied(ev, cursor)) c.after.push_back(ev);
  const std::vector<uint32_t>& first = c.rows.empty() ? c.after : c.rows;
  if (first.empty()) return c;
  std::vector<const std::vector<float>*> rows;
  for (uint32_t ev : first) rows.push_back(&values_of(ev).values);
  c.columns = largest_value_columns(rows, columns);
  c.stride = values_of(first.front()).stride;
  if (c.after.empty() || c.rows.size() < 2 || c.columns.empty()) return c;
  // The column whose sum over the ranks is largest in magnitude.
  std::vector<double> sum(c.columns.size(), 0.0);
  for (uint32_t ev : c.rows) {
    const std::vector<float>& v = values_of(ev).values;
    for (size_t k = 0; k < c.columns.size(); ++k)
      if (c.columns[k] < v.size()) sum[k] += v[c.columns[k]];
  }
  size_t probe = 0;
  for (size_t k = 1; k < sum.size(); ++k)
    if (std::fabs(sum[k]) > std::fabs(sum[probe])) probe = k;
  const std::vector<float>& a = values_of(c.after.front()).values;
  if (c.columns[probe] >= a.size()) return c;
  const double got = a[c.columns[probe]];
  const double mean = sum[probe] / static_cast<double>(c.rows.size());
  c.is_mean = std::fabs(got - mean) <= 1e-5 * std::max(1.0, std::fabs(got));
  c.is_sum = std::fabs(got - sum[probe]) <= 1e-5 * std::max(1.0, std::fabs(sum[probe]));
  return c;
}

}  // namespace dpscope::viz
