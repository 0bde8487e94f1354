// Hostile-input rows (issue 22), training runs: memory estimates, values in files and flags, checkpoint
// names.
#include "cli/hostile_input.hpp"

namespace dpscope::testing {

std::vector<Case> hostile_training_cases() { return {}; }

}  // namespace dpscope::testing
