// The published nccl-tests tables of tests/data/nccl-tests, evaluated as fidelity_report does: for the
// fidelity tests (fidelity_test.cpp, fidelity_pcie_test.cpp).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dpscope/comm/nccl_fidelity.hpp"

namespace dpscope {

inline const std::filesystem::path kTables =
    std::filesystem::path(DPSCOPE_SOURCE_DIR) / "tests/data/nccl-tests";

inline std::vector<FidelityResult> evaluate_all() {
  std::vector<FidelityResult> results;
  for (const MeasuredSystem& s : load_measured_systems(kTables)) results.push_back(evaluate_fidelity(s));
  return results;
}

// The tables of not-compared/ (outside the goal's size range), as fidelity_report reads them.
inline std::vector<FidelityResult> evaluate_not_compared() {
  std::vector<FidelityResult> results;
  for (const MeasuredSystem& s : load_not_compared_systems(kTables)) results.push_back(evaluate_fidelity(s));
  return results;
}

// docs/NAME as one line (the prose wraps anywhere).
inline std::string read_doc(const char* name) {
  std::ifstream in(std::filesystem::path(DPSCOPE_SOURCE_DIR) / "docs" / name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  for (char& ch : s)
    if (ch == '\n') ch = ' ';  // the prose wraps anywhere
  return s;
}

}  // namespace dpscope
