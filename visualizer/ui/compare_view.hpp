// Compare: two or three runs of the same model (single device, DataParallel, DDP) one above the
// other on one time axis, each from its own first event: their phases step by step, the step time,
// the throughput, and the speedup over the run with the fewest GPUs. `dpscope-viz --compare A B C`
// or View > Compare traces with several traces open; it takes the stage's place.
#pragma once

#include <vector>

#include "replay/compare.hpp"
#include "ui/view.hpp"

namespace dpscope::viz {

class CompareView final : public View {
 public:
  CompareView() { visible = false; }
  const char* title() const override { return "Compare"; }
  void draw(ViewContext& ctx) override;

  // The runs of the last frame, in document order, and which is the baseline (for tests).
  const std::vector<RunSummary>& runs() const { return runs_; }
  size_t baseline() const { return baseline_; }

 private:
  std::vector<RunSummary> runs_;
  std::vector<const ReplayModel*> summarized_;  // the models runs_ were made from
  size_t baseline_ = 0;
};

}  // namespace dpscope::viz
