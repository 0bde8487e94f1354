// Font lookup and atlas building.
#include "app/fonts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include <imgui.h>

#include "dpscope/base/asset_dir.hpp"

namespace dpscope::viz {

namespace {

// Latin-1, general punctuation (… ·), arrows (→), math (÷ ×), box drawing, shapes, symbols.
constexpr ImWchar kGlyphRanges[] = {0x0020, 0x00FF, 0x2000, 0x206F, 0x2190, 0x21FF, 0x2200,
                                    0x22FF, 0x2500, 0x25FF, 0x2600, 0x26FF, 0};

std::string find_font(const char* file) {
  std::vector<std::filesystem::path> candidates;
  if (const char* env = std::getenv("DPSCOPE_ASSETS"))
    candidates.push_back(std::filesystem::path(env) / "fonts" / file);
  try {
    candidates.push_back(asset_dir() / "fonts" / file);
  } catch (...) {
    // no asset directory: only the system fonts remain
  }
#ifdef DPSCOPE_SOURCE_ASSET_DIR
  candidates.push_back(std::filesystem::path(DPSCOPE_SOURCE_ASSET_DIR) / "fonts" / file);
#endif
  candidates.push_back(std::filesystem::path("/usr/share/fonts/truetype/dejavu") / file);
  for (const auto& p : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

Fonts add_set(ImFontAtlas* atlas, const std::string& regular, const std::string& bold, float body_px,
              float scale) {
  const std::string italic = find_font("DejaVuSans-Oblique.ttf");
  const std::string mono = find_font("DejaVuSansMono.ttf");
  Fonts f;
  f.scale = scale;
  ImFontConfig config;
  config.OversampleH = 2;
  config.OversampleV = 1;
  if (!regular.empty()) {
    f.body = atlas->AddFontFromFileTTF(regular.c_str(), body_px, &config, kGlyphRanges);
    f.small = atlas->AddFontFromFileTTF(regular.c_str(), body_px * 0.84f, &config, kGlyphRanges);
    f.bold = atlas->AddFontFromFileTTF((bold.empty() ? regular : bold).c_str(), body_px * 1.1f, &config,
                                       kGlyphRanges);
    if (!italic.empty()) f.italic = atlas->AddFontFromFileTTF(italic.c_str(), body_px, &config, kGlyphRanges);
    if (!mono.empty())
      f.mono = atlas->AddFontFromFileTTF(mono.c_str(), body_px * 0.95f, &config, kGlyphRanges);
  }
  if (f.body == nullptr) {
    ImFontConfig fallback;
    fallback.SizePixels = std::max(13.0f, std::round(body_px * 0.85f));
    f.body = atlas->AddFontDefault(&fallback);
    f.small = f.body;
    f.bold = f.body;
  }
  return f;
}

}  // namespace

FontSet load_fonts(float content_scale) {
  ImFontAtlas* atlas = ImGui::GetIO().Fonts;
  atlas->Clear();
  const float scale = content_scale > 0.5f ? content_scale : 1.0f;
  const std::string regular = find_font("DejaVuSans.ttf");
  const std::string bold = find_font("DejaVuSans-Bold.ttf");
  FontSet set;
  set.source = regular.empty() ? "ImGui default font" : regular;
  set.normal = add_set(atlas, regular, bold, std::round(15.0f * scale), scale);
  // Presentation text is 21 px at 1280x720 and grows with the window's pixels (ui/viewer.hpp,
  // present_text_scale), whatever the monitor's content scale: drawn from an atlas at 1.5x that
  // (times the content scale, since a HiDPI window has that many more pixels), so a 1920x1080
  // projector gets it pixel for pixel.
  set.present = add_set(atlas, regular, bold, std::round(21.0f * 1.5f * scale), scale * 1.4f);
  set.present.raster = 1.5f * scale;
  unsigned char* pixels = nullptr;
  int w = 0;
  int h = 0;
  atlas->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the atlas
  ImGui::GetIO().FontDefault = set.normal.body;
  return set;
}

}  // namespace dpscope::viz
