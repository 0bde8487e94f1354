// `dpscope presets` (runtime/cli/presets_cmd.cpp): one row per preset file under a header, every
// column aligned, the memory named by its size and bandwidth only (GDDR cards are no HBM), and a
// preset without peer access said so in its GPU-to-GPU column.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "cli/run_limited.hpp"

namespace dpscope::testing {
namespace {

using namespace std::chrono_literals;

TEST(Presets, EveryPresetIsOneAlignedRowUnderTheHeader) {
  const LimitedRun r = run_limited({DPSCOPE_CLI, "presets"}, {}, 20s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GE(lines.size(), 2u);
  const std::string& header = lines.front();
  EXPECT_EQ(header.rfind("preset ", 0), 0u) << header;
  // The header's column words end where each row's numbers end (right-aligned numbers).
  const size_t bandwidth_end = header.find("bandwidth") + std::string("bandwidth").size();
  const size_t fp32_end = header.find("fp32") + std::string("fp32").size();
  const size_t host_at = header.find("host link");
  std::set<std::string> ids;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& row = lines[i];
    ids.insert(row.substr(0, row.find(' ')));
    EXPECT_EQ(row.substr(bandwidth_end - 4, 4), "GB/s") << row;
    EXPECT_EQ(row.substr(fp32_end - 7, 7), "TFLOP/s") << row;
    EXPECT_EQ(row.substr(host_at - 2, 2), "  ") << row;
    EXPECT_NE(row[host_at], ' ') << row;
    EXPECT_EQ(row.find("HBM"), std::string::npos) << row;
    EXPECT_NE(row.back(), ' ') << row;
  }
  std::set<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "assets" / "presets"))
    if (entry.path().extension() == ".toml") files.insert(entry.path().stem().string());
  EXPECT_EQ(ids, files);
  for (const std::string& line : lines) {
    if (line.rfind("rtx-2080ti ", 0) == 0) {
      EXPECT_NE(line.find("pcie3 16 GB/s, no peer access"), std::string::npos) << line;
    } else {
      EXPECT_EQ(line.find("no peer access"), std::string::npos) << line;
    }
  }
}

}  // namespace
}  // namespace dpscope::testing
