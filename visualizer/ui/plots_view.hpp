// Plots (drawn with ImDrawList; ImPlot is not in Debian): the loss per training step (so far in
// full colour, the rest faint), and per GPU the time breakdown of HTA — compute, exposed
// communication, idle — with the comm/compute overlap %, over the whole trace, the current step,
// or up to the playhead.
#pragma once

#include "ui/view.hpp"

namespace dpscope::viz {

class PlotsView final : public View {
 public:
  const char* title() const override { return "Plots"; }
  void draw(ViewContext& ctx) override;

  enum class Window { kWholeTrace, kCurrentStep, kUpToPlayhead };
  Window window = Window::kWholeTrace;

 private:
  void draw_loss(const ViewContext& ctx, ImVec2 size);
  void draw_breakdown(const ViewContext& ctx);
};

}  // namespace dpscope::viz
