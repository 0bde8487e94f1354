// largest_value_columns (visualizer/replay/value_columns.hpp): the inspector's columns are the
// sampled elements largest in magnitude over the ranks shown, in element order.
#include <gtest/gtest.h>

#include <cmath>

#include "replay/value_columns.hpp"

namespace dpscope::viz {
namespace {

TEST(ValueColumns, PickTheLargestMagnitudesAcrossRanksInElementOrder) {
  // Exact zeros (dead ReLU units) in the first elements: they are not what a student should see.
  const std::vector<float> rank0 = {0.0f, 0.0f, -0.5f, 0.01f, 0.0f, 2.0f};
  const std::vector<float> rank1 = {0.0f, 0.0f, -0.7f, 0.02f, 0.3f, 1.0f};
  const std::vector<size_t> cols = largest_value_columns({&rank0, &rank1}, 3);
  EXPECT_EQ(cols, (std::vector<size_t>{2, 4, 5}));
  EXPECT_EQ(largest_value_columns({&rank0, &rank1}, 10).size(), 6u);
  EXPECT_TRUE(largest_value_columns({}, 4).empty());
  EXPECT_TRUE(largest_value_columns({&rank0}, 0).empty());
}

TEST(ValueColumns, TiesKeepTheLowerPositionAndNaNsCountAsNothing) {
  const std::vector<float> a = {1.0f, 1.0f, std::nanf(""), 1.0f};
  EXPECT_EQ(largest_value_columns({&a}, 2), (std::vector<size_t>{0, 1}));
  const std::vector<float> shorter = {0.0f};
  const std::vector<float> longer = {0.0f, 0.0f, 5.0f};
  EXPECT_EQ(largest_value_columns({&shorter, &longer}, 1), (std::vector<size_t>{2}));
}

}  // namespace
}  // namespace dpscope::viz
