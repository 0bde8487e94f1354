// A screenshot read back as RGB pixels (stb_image), for the screenshot tests that count what a
// picture shows.
#pragma once

#include <gtest/gtest.h>
#include <stb_image.h>

#include <filesystem>
#include <vector>

namespace dpscope::viz {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<unsigned char> rgb;
  // Whether pixel (x, y) is exactly (r, g, b).
  bool is(int x, int y, int r, int g, int b) const {
    const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3;
    return rgb[i] == r && rgb[i + 1] == g && rgb[i + 2] == b;
  }
};

// The PNG at `path`; an empty image (and a test failure) when it cannot be read.
inline Image load_png(const std::filesystem::path& path) {
  Image img;
  int channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &img.width, &img.height, &channels, 3);
  if (data == nullptr) {
    ADD_FAILURE() << "cannot read " << path;
    return img;
  }
  img.rgb.assign(data, data + static_cast<size_t>(img.width) * static_cast<size_t>(img.height) * 3);
  stbi_image_free(data);
  return img;
}

}  // namespace dpscope::viz
