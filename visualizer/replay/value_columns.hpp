// Which of a traced tensor's sampled elements the inspector shows: the largest in magnitude. The
// runtime samples elements across the whole tensor (`values` events with a `stride`); the first
// few elements of a gradient are often exact zeros (dead ReLU units, blank input pixels), which
// would tell a student nothing about averaging.
#pragma once

#include <cstddef>
#include <vector>

namespace dpscope::viz {

// Up to `count` sample positions, ordered by position, whose summed magnitude over `rows` (each
// rank's samples of one tensor) is largest; positions no row has are ignored; ties keep the lower
// position. Zero rows or count 0: none.
std::vector<size_t> largest_value_columns(const std::vector<const std::vector<float>*>& rows, size_t count);

}  // namespace dpscope::viz
