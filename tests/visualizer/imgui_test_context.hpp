// A window-less ImGui context for the ui tests (viewer_test, lesson_view_test): display size,
// frame time, the default font built into the atlas, no .ini file. Pair with ImGui::DestroyContext().
#pragma once

#include <imgui.h>

#include "ui/view.hpp"

namespace dpscope::viz::testing {

inline Fonts create_imgui_test_context(ImVec2 display = ImVec2(1600, 900)) {
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = display;
  io.DeltaTime = 1.0f / 60.0f;
  ImFont* font = io.Fonts->AddFontDefault();
  unsigned char* pixels = nullptr;
  int width = 0;
  int height = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &width, &height);
  return Fonts{.body = font, .bold = font, .small = font};
}

}  // namespace dpscope::viz::testing
