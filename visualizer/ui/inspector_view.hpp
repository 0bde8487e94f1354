// Inspector: numbers behind the picture. The selected event (or, with nothing selected, the
// latest one) field by field; the DDP bucket table (parameters, bytes, state on every rank); the
// gradient values each rank had before the latest reduction and the result after it, with their
// mean, so averaging is visible as numbers; the dataset rows on each GPU.
#pragma once

#include "ui/view.hpp"

namespace dpscope::viz {

class InspectorView final : public View {
 public:
  const char* title() const override { return "Inspector"; }
  void draw(ViewContext& ctx) override;

 private:
  void draw_event(ViewContext& ctx, uint32_t event, bool selected);
  void draw_buckets(const ViewContext& ctx);
  void draw_reduction(const ViewContext& ctx);
  void draw_step_reductions(const ViewContext& ctx, int64_t step);
  void draw_data_split(const ViewContext& ctx);
};

}  // namespace dpscope::viz
