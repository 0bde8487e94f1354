// Presets for tests of the timing model.
#pragma once

#include <string>

#include "dpscope/core/preset.hpp"

namespace dpscope::testing {

// Preset `id` without the host time its [calibration] measured per kernel: each kernel starts as
// soon as its stream is free, so a test can add up kernel_time_ns exactly. The roofline keeps the
// calibrated efficiencies.
inline HardwarePreset roofline_preset(const std::string& id) {
  HardwarePreset preset = find_preset(id);
  preset.host_issue_ns = 0.0;
  return preset;
}

}  // namespace dpscope::testing
