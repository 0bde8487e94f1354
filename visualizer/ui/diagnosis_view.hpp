// Diagnosis: the DDP diagnosis of `dpscope trace stats` in the viewer, for recorded and
// live traces (dpscope's own runs and real PyTorch runs recorded by dpscope_torch). Every number
// comes from trace::diagnose_ddp (trace_tools/ddp_diagnosis.hpp), computed by the Document
// (replay/diagnosis.hpp); this view only draws it: each finding's sentence — straggler, exposed
// communication, buckets, the sampler's set_epoch — wrapped to the panel, and per training step a
// row showing whose last gradient came last and its lead as a bar against the step's noise, the
// step under the playhead highlighted; a click on a row moves the playhead to that step. A trace
// without DDP's events (DataParallel, single device) has no finding, and the panel takes no room.
// In presentation mode, where panels are not drawn, a named straggler joins the caption.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ui/view.hpp"

namespace dpscope::viz {

class DiagnosisView final : public View {
 public:
  const char* title() const override { return "Diagnosis"; }
  // Until the trace was diagnosed (the panel hidden so far), the View menu can turn it on.
  bool applies_to(const Document& doc) const override {
    return !doc.diagnosis().computed() || doc.diagnosis().has_findings();
  }
  // More of the right column when the diagnosis names a straggler or the set_epoch pitfall; less
  // when it only explains (a simulated run: no straggler, the buckets).
  float layout_weight() const override { return weight_; }
  void before_draw(const ViewContext& ctx) override;
  std::string caption() const override { return caption_; }
  void draw(ViewContext& ctx) override;

  // What the last draw showed, for tests: the findings' text in order, and one row per step.
  struct StepRow {
    int64_t step = 0;  // the trace's 0-based step
    ImVec2 min;        // the row's rectangle on screen
    ImVec2 max;
    bool current = false;  // the step under the playhead (highlighted)
    int latest_rank = -1;  // the rank drawn as last; -1 for "even" (no rank came last)
  };
  const std::vector<std::string>& texts() const { return texts_; }
  const std::vector<StepRow>& rows() const { return rows_; }

 private:
  void heading(const ViewContext& ctx, const char* label);
  // A finding's sentence under its heading (none when `label` is null).
  void text(const ViewContext& ctx, const char* label, const std::string& sentence);
  void draw_steps(ViewContext& ctx);

  std::string caption_;
  float weight_ = 0.8f;
  int64_t followed_step_ = -2;  // the playhead's step the list last scrolled to
  std::vector<std::string> texts_;
  std::vector<StepRow> rows_;
};

}  // namespace dpscope::viz
