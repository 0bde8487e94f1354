// Where dpscope's assets (presets, lessons, fonts) are: what core's presets, the CLI's lessons and
// the viewer's fonts and lesson mode look up, so the viewer finds them without linking core.
#pragma once

#include <filesystem>

namespace dpscope {

// The asset directory in use: $DPSCOPE_ASSETS when set, else the source tree's assets/ (when it
// holds presets/), else <exe>/../share/dpscope.
std::filesystem::path asset_dir();

}  // namespace dpscope
