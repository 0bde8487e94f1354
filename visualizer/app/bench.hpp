// --bench-frames N: how long a trace takes to load, and how much CPU one frame costs (from
// ImGui::NewFrame to ImGui::Render, the Viewer's state query and all views included) at full
// zoom-out, zoomed in, and while playing. Runs ImGui without a window or GPU (like imgui's
// example_null), so it measures our code, not the GL driver; prints one table.
#pragma once

#include <filesystem>

#include "replay/seek.hpp"

namespace dpscope::viz {

struct BenchOptions {
  std::filesystem::path trace;
  int frames = 100;
  PixelSize size{1920, 1080};
  bool present = false;
};

// Returns the process exit code (0, or 1 when the trace cannot be read).
int run_frame_bench(const BenchOptions& options);

}  // namespace dpscope::viz
