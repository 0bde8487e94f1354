// Platform: the GLFW window, the OpenGL 3.3 context and the ImGui GLFW/OpenGL3 backends, in the
// order of imgui's example_glfw_opengl3 (init, context, backends; cleanup in reverse). It also
// turns window events the Viewer does not see into queues: dropped files, function keys, content
// scale changes; and offers an offscreen framebuffer so headless screenshots do not depend on a
// visible window. Needs a display: under CI run it inside `xvfb-run` (Mesa llvmpipe).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

struct GLFWwindow;

namespace dpscope::viz {

struct PlatformOptions {
  int width = 1600;
  int height = 900;
  bool visible = true;
  bool fullscreen = false;
  const char* title = "dpscope-viz";
};

// An RGBA8 framebuffer object of a fixed size (headless rendering).
class OffscreenTarget {
 public:
  OffscreenTarget(int width, int height);
  ~OffscreenTarget();
  OffscreenTarget(const OffscreenTarget&) = delete;
  OffscreenTarget& operator=(const OffscreenTarget&) = delete;
  void bind() const;
  int width() const { return width_; }
  int height() const { return height_; }

 private:
  unsigned fbo_ = 0;
  unsigned color_ = 0;
  int width_ = 0;
  int height_ = 0;
};

class Platform {
 public:
  // Throws dpscope::Error(kUnsupported) with the reason when no window can be opened (no DISPLAY,
  // no OpenGL 3.3) — a headless caller reports it and exits non-zero.
  static std::unique_ptr<Platform> create(const PlatformOptions& options);
  ~Platform();
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;

  GLFWwindow* window() const { return window_; }
  float content_scale() const;
  bool should_close() const;
  // Processes window events; waits up to `timeout_s` for one when `wait` (an idle viewer).
  void poll_events(bool wait, double timeout_s);
  // Backend half of a new frame: call before ImGui::NewFrame().
  void new_frame();
  // Clears and renders ImGui's draw data into the bound framebuffer of `width` × `height`.
  void render(int width, int height);
  // The window's framebuffer size in pixels.
  void framebuffer_size(int& width, int& height) const;
  void swap_buffers();
  // Around a font atlas rebuild (content scale changed): drop and re-upload the GL texture.
  void destroy_font_texture();
  void create_font_texture();
  void set_fullscreen(bool fullscreen);
  bool fullscreen() const { return fullscreen_; }

  // Events gathered by the GLFW callbacks since the last call.
  std::vector<std::string> take_dropped_files();
  std::vector<int> take_function_keys();  // 1 = F1, 11 = F11, 12 = F12
  bool take_content_scale_changed();

 private:
  Platform() = default;
  static void on_drop(GLFWwindow* window, int count, const char** paths);
  static void on_key(GLFWwindow* window, int key, int scancode, int action, int mods);
  static void on_content_scale(GLFWwindow* window, float xscale, float yscale);

  GLFWwindow* window_ = nullptr;
  bool imgui_backends_ = false;
  bool fullscreen_ = false;
  int windowed_x_ = 100;
  int windowed_y_ = 100;
  int windowed_w_ = 1600;
  int windowed_h_ = 900;
  std::vector<std::string> dropped_;
  std::vector<int> function_keys_;
  bool scale_changed_ = false;
};

// Reads the bound framebuffer (bottom-up rows, RGBA) and writes it as a PNG, top row first.
// Throws dpscope::Error(kIo) naming the file when it cannot be written.
void write_framebuffer_png(const std::filesystem::path& path, int width, int height);

}  // namespace dpscope::viz
