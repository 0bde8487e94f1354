// Dataset rows summarised as runs (replay/row_runs.hpp): DataParallel's 256-row chunks and DDP's
// strided sampler read as one range each, and joining the runs gives the rows back.
#include <gtest/gtest.h>

#include "replay/row_runs.hpp"

namespace dpscope::viz {
namespace {

std::vector<int64_t> expand(const std::vector<RowRun>& runs) {
  std::vector<int64_t> rows;
  for (const RowRun& r : runs)
    for (int64_t k = 0; k < r.count; ++k) rows.push_back(r.first + k * r.stride);
  return rows;
}

TEST(RowRuns, AContiguousChunkIsOneRange) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 256; ++i) rows.push_back(i);
  const std::vector<RowRun> runs = row_runs(rows);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(format_row_run(runs[0]), "0\u2013255");
  EXPECT_EQ(runs[0].count, 256);
  EXPECT_EQ(expand(runs), rows);
}

TEST(RowRuns, AStridedSamplerIsOneRangeWithItsStride) {
  // DistributedSampler without shuffle, 4 replicas, rank 1: 1, 5, 9, ...
  std::vector<int64_t> rows;
  for (int64_t i = 1; i < 256; i += 4) rows.push_back(i);
  const std::vector<RowRun> runs = row_runs(rows);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(format_row_run(runs[0]), "1\u2013253 every 4th");
  EXPECT_EQ(expand(runs), rows);
  EXPECT_EQ(format_rows({0, 2, 4}), "0\u20134 every 2nd");
  EXPECT_EQ(format_rows({0, 3, 6}), "0\u20136 every 3rd");
  EXPECT_EQ(format_rows({0, 11, 22}), "0\u201322 every 11th");
  EXPECT_EQ(format_rows({0, 21, 42}), "0\u201342 every 21st");
}

TEST(RowRuns, ShuffledRowsStayOneByOneAndMixedRowsKeepTheirOrder) {
  EXPECT_EQ(format_rows({7, 2, 9}), "7, 2, 9");
  EXPECT_EQ(format_rows({0, 1, 2, 3, 10, 5, 6}), "0\u20133, 10, 5\u20136");
  EXPECT_EQ(format_rows({4, 4, 4}), "4, 4, 4");  // a repeated row is not a run of stride 0
  EXPECT_EQ(format_rows({}), "");
  const std::vector<int64_t> mixed = {3, 0, 1, 2, 8, 6, 4, 2, 9};
  EXPECT_EQ(expand(row_runs(mixed)), mixed);
}

}  // namespace
}  // namespace dpscope::viz
