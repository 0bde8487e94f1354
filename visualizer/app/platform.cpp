// Platform: GLFW + OpenGL 3.3 core + ImGui backends, offscreen target, PNG export.
#define GL_GLEXT_PROTOTYPES
#include "app/platform.hpp"

#include <GL/gl.h>
#include <GL/glext.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope::viz {

namespace {

std::string g_glfw_error;  // the last GLFW error, for the message when creation fails

void on_glfw_error(int code, const char* description) {
  g_glfw_error = fmt::format("GLFW error {}: {}", code, description);
}

}  // namespace

// ---- OffscreenTarget ----

OffscreenTarget::OffscreenTarget(int width, int height) : width_(width), height_(height) {
  glGenFramebuffers(1, &fbo_);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo_);
  glGenTextures(1, &color_);
  glBindTexture(GL_TEXTURE_2D, color_);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, color_, 0);
  const GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  DPS_CHECK(status == GL_FRAMEBUFFER_COMPLETE, ErrorKind::kUnsupported,
            "cannot create a {}x{} offscreen framebuffer (status 0x{:x})", width, height, status);
}

OffscreenTarget::~OffscreenTarget() {
  glBindFramebuffer(GL_FRAMEBUFFER, 0);
  glDeleteTextures(1, &color_);
  glDeleteFramebuffers(1, &fbo_);
}

void OffscreenTarget::bind() const { glBindFramebuffer(GL_FRAMEBUFFER, fbo_); }

// ---- Platform ----

std::unique_ptr<Platform> Platform::create(const PlatformOptions& options) {
  glfwSetErrorCallback(on_glfw_error);
  if (!glfwInit()) {
    const char* display = std::getenv("DISPLAY");
    throw Error(ErrorKind::kUnsupported,
                fmt::format("cannot open a window: {}{}",
                            g_glfw_error.empty() ? "GLFW failed to initialise" : g_glfw_error,
                            display == nullptr || *display == '\0'
                                ? " (no DISPLAY; for headless use run: xvfb-run -a dpscope-viz ...)"
                                : ""));
  }
  std::unique_ptr<Platform> p(new Platform());
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_VISIBLE, options.visible ? GLFW_TRUE : GLFW_FALSE);
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, GLFW_TRUE);  // HiDPI: window size in screen coordinates
  p->windowed_w_ = options.width;
  p->windowed_h_ = options.height;
  p->window_ = glfwCreateWindow(options.width, options.height, options.title, nullptr, nullptr);
  if (p->window_ == nullptr) {
    glfwTerminate();
    throw Error(ErrorKind::kUnsupported, fmt::format("cannot create an OpenGL 3.3 window: {}", g_glfw_error));
  }
  glfwMakeContextCurrent(p->window_);
  glfwSwapInterval(1);  // vsync
  glfwSetWindowUserPointer(p->window_, p.get());
  // Our callbacks go in first: the ImGui backend chains to them.
  glfwSetDropCallback(p->window_, on_drop);
  glfwSetKeyCallback(p->window_, on_key);
  glfwSetWindowContentScaleCallback(p->window_, on_content_scale);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the layout is fixed: nothing to save
  ImGui_ImplGlfw_InitForOpenGL(p->window_, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  p->imgui_backends_ = true;
  if (options.fullscreen) p->set_fullscreen(true);
  return p;
}

Platform::~Platform() {
  if (imgui_backends_) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
  if (window_ != nullptr) glfwDestroyWindow(window_);
  glfwTerminate();
}

float Platform::content_scale() const {
  float xs = 1.0f;
  float ys = 1.0f;
  glfwGetWindowContentScale(window_, &xs, &ys);
  return std::max(xs, ys);
}

bool Platform::should_close() const { return glfwWindowShouldClose(window_) != 0; }

void Platform::poll_events(bool wait, double timeout_s) {
  if (wait) {
    glfwWaitEventsTimeout(timeout_s);
  } else {
    glfwPollEvents();
  }
}

void Platform::new_frame() {
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
}

void Platform::render(int width, int height) {
  glViewport(0, 0, width, height);
  glClearColor(0.07f, 0.08f, 0.09f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

void Platform::framebuffer_size(int& width, int& height) const {
  glfwGetFramebufferSize(window_, &width, &height);
}

void Platform::swap_buffers() { glfwSwapBuffers(window_); }
void Platform::destroy_font_texture() { ImGui_ImplOpenGL3_DestroyFontsTexture(); }
void Platform::create_font_texture() { ImGui_ImplOpenGL3_CreateFontsTexture(); }

void Platform::set_fullscreen(bool fullscreen) {
  if (fullscreen == fullscreen_) return;
  GLFWmonitor* monitor = glfwGetPrimaryMonitor();
  if (fullscreen && monitor != nullptr) {
    glfwGetWindowPos(window_, &windowed_x_, &windowed_y_);
    glfwGetWindowSize(window_, &windowed_w_, &windowed_h_);
    const GLFWvidmode* mode = glfwGetVideoMode(monitor);
    glfwSetWindowMonitor(window_, monitor, 0, 0, mode->width, mode->height, mode->refreshRate);
    fullscreen_ = true;
  } else if (!fullscreen) {
    glfwSetWindowMonitor(window_, nullptr, windowed_x_, windowed_y_, windowed_w_, windowed_h_, 0);
    fullscreen_ = false;
  }
}

std::vector<std::string> Platform::take_dropped_files() { return std::exchange(dropped_, {}); }
std::vector<int> Platform::take_function_keys() { return std::exchange(function_keys_, {}); }
bool Platform::take_content_scale_changed() { return std::exchange(scale_changed_, false); }

void Platform::on_drop(GLFWwindow* window, int count, const char** paths) {
  auto* self = static_cast<Platform*>(glfwGetWindowUserPointer(window));
  for (int i = 0; i < count; ++i) self->dropped_.emplace_back(paths[i]);
}

void Platform::on_key(GLFWwindow* window, int key, int /*scancode*/, int action, int /*mods*/) {
  auto* self = static_cast<Platform*>(glfwGetWindowUserPointer(window));
  if (action != GLFW_PRESS) return;
  if (key == GLFW_KEY_F1) self->function_keys_.push_back(1);
  if (key == GLFW_KEY_F11) self->function_keys_.push_back(11);
  if (key == GLFW_KEY_F12) self->function_keys_.push_back(12);
}

void Platform::on_content_scale(GLFWwindow* window, float /*xscale*/, float /*yscale*/) {
  static_cast<Platform*>(glfwGetWindowUserPointer(window))->scale_changed_ = true;
}

void write_framebuffer_png(const std::filesystem::path& path, int width, int height) {
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * static_cast<size_t>(height) * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  // Opaque output whatever the framebuffer's alpha holds.
  for (size_t i = 3; i < pixels.size(); i += 4) pixels[i] = 255;
  stbi_flip_vertically_on_write(1);
  std::string png;  // encoded in memory, then written through the output guard's atomic writer
  const auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
  };
  const int ok = stbi_write_png_to_func(append, &png, width, height, 4, pixels.data(), width * 4);
  DPS_CHECK(ok != 0, ErrorKind::kIo, "cannot encode PNG '{}'", path.string());
  AtomicFileWriter file(path);
  file.write(png);
  file.commit();
}

}  // namespace dpscope::viz
