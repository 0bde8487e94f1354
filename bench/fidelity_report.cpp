// fidelity_report DIR OUT.md: evaluates every published nccl-tests table of DIR
// (tests/data/nccl-tests) against the collectives' cost model and writes docs/fidelity.md.
//
//   build/ci/bin/fidelity_report tests/data/nccl-tests docs/fidelity.md
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/nccl_fidelity.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fidelity_report TABLES_DIR OUT.md\n");
    return 2;
  }
  try {
    std::vector<dpscope::FidelityResult> results;
    for (const dpscope::MeasuredSystem& s : dpscope::load_measured_systems(argv[1]))
      results.push_back(dpscope::evaluate_fidelity(s));
    std::ofstream out(argv[2], std::ios::binary);
    out << dpscope::fidelity_markdown(results);
    out.close();
    if (!out) throw dpscope::Error(dpscope::ErrorKind::kIo, fmt::format("cannot write {}", argv[2]));
    for (const dpscope::FidelityResult& r : results)
      fmt::print("{}: median {:.1f} %, worst {:.1f} %\n", r.system.id, 100 * r.median_error,
                 100 * r.worst_error);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fidelity_report: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
