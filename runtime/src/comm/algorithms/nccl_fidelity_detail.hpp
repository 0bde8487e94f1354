// What the tables' reading and evaluation (nccl_fidelity.cpp) and the report made of them
// (nccl_fidelity_report.cpp) both use.
#pragma once

#include <optional>
#include <vector>

#include "dpscope/comm/nccl_fidelity.hpp"

namespace dpscope::fidelity_detail {

// The median of `v` (0 for none).
double median(std::vector<double> v);

// The algorithm the table's command forces with NCCL_ALGO=..., if it does: the model is forced the
// same way (as `nccl_proto` forces the protocol). kFormat naming the file for one it lacks.
std::optional<NcclAlgo> forced_algo(const MeasuredSystem& s);

// nccl-tests' name of a collective (its <name>_perf binaries, the tables' `collective:` line); "?"
// for one it does not measure.
const char* nccl_tests_name(OpType op);

}  // namespace dpscope::fidelity_detail
