// Trace info (a developer panel, hidden in presentation mode): the file, its format version and
// clock, event/lane counts, load and index times, devices and links from the header, every
// problem found while reading, and the frame time.
#pragma once

#include "ui/view.hpp"

namespace dpscope::viz {

class TraceInfoView final : public View {
 public:
  const char* title() const override { return "Trace info"; }
  bool developer_panel() const override { return true; }
  void draw(ViewContext& ctx) override;
};

}  // namespace dpscope::viz
