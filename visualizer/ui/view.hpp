// The contract between the Viewer and its views: every view is a small struct holding its own
// state, with a title and a draw() that renders into the ImGui window the Viewer opened for it
// (the Viewer owns layout and the View menu, so views are toggled from one place). A view reads
// the frame's ViewContext and acts only through it (seek, select).
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "replay/document.hpp"
#include "replay/playback.hpp"
#include "replay/replay_model.hpp"
#include "ui/palette.hpp"

namespace dpscope::viz {

struct Fonts {
  ImFont* body = nullptr;    // the default text
  ImFont* bold = nullptr;    // titles, card headers (falls back to body)
  ImFont* small = nullptr;   // chips, axis labels (falls back to body)
  ImFont* italic = nullptr;  // *emphasis* in narration (falls back to body)
  ImFont* mono = nullptr;    // `code` in narration (falls back to body)
  float scale = 1.0f;        // content scale (HiDPI) times the presentation-mode factor
  // The atlas's pixel size relative to the size text has at the reference window (1280x720):
  // presentation mode draws these fonts at present_text_scale(window) / raster (ui/viewer.hpp).
  float raster = 1.0f;
};

// Everything a view may use in one frame. Built by the Viewer before drawing.
struct ViewContext {
  Document* doc = nullptr;
  std::vector<const Document*> documents;  // every open trace, the active one (doc) among them
  const ReplayModel* model = nullptr;      // null: no trace to show (views draw nothing)
  const ReplayState* state = nullptr;
  Playback* playback = nullptr;
  uint32_t* selected_event = nullptr;  // kNoEvent: nothing selected
  const Palette* palette = nullptr;
  Fonts fonts;
  bool present = false;   // classroom mode: large, high contrast, no developer details
  bool headless = false;  // screenshots: no hover effects, no wall-clock animation

  void seek(Cursor cursor) const {
    if (model != nullptr && playback != nullptr) playback->seek(*model, cursor);
  }
  void select(uint32_t event) const {
    if (selected_event != nullptr) *selected_event = event;
  }
  uint32_t selected() const { return selected_event != nullptr ? *selected_event : kNoEvent; }
};

class View {
 public:
  virtual ~View() = default;
  virtual const char* title() const = 0;
  // Developer panels are hidden in presentation mode.
  virtual bool developer_panel() const { return false; }
  // Whether it has anything to show for `doc`: a view that has not takes no room and is greyed
  // out in the View menu (the Diagnosis of a trace without DDP's events).
  virtual bool applies_to(const Document& /*doc*/) const { return true; }
  // Its share of the right column's height, relative to the other panels there.
  virtual float layout_weight() const { return 1.0f; }
  // Called every frame before any view draws, shown or not (the lesson panel stops the player at
  // chapters even in presentation mode, where it is not drawn).
  virtual void before_draw(const ViewContext& /*ctx*/) {}
  // The caption presentation mode shows under the stage ("" : the viewer's own, step and phase).
  virtual std::string caption() const { return ""; }
  // Presentation mode's caption drawn by the view itself (the lesson: chapter, narration rendered
  // from Markdown, the chapter's question large, its answer once revealed), `width` pixels wide.
  // Returns its height, or a negative number when the view has none; `measure`: no drawing.
  virtual float present_caption(const ViewContext& /*ctx*/, float /*width*/, bool /*measure*/) {
    return -1.0f;
  }
  // A character typed in presentation mode (the lesson's R reveals the answer); true when used.
  virtual bool handle_char(unsigned int /*c*/) { return false; }
  virtual void draw(ViewContext& ctx) = 0;

  bool visible = true;
};

}  // namespace dpscope::viz
