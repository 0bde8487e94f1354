// Compare: two or three runs of the same model (single device, DataParallel, DDP) one above the
// other on one time axis, each from its own first event: their phases step by step, the step time,
// the throughput, and the speedup over the run with the fewest GPUs. `dpscope-viz --compare A B C`
// or View > Compare traces with several traces open; it takes the stage's place.
//
// In lesson mode a chapter that compares (`compare = [...]` in the lesson file) hands it its runs
// (show_lesson_runs): then it draws those runs in columns side by side, each at its own moment —
// the step that holds the moment on one time scale, the moment marked, the collective or step time
// in large type, and the rows of data each rank read per epoch with the batches that repeat the
// previous epoch's outlined (lesson 8's no-set-epoch pitfall). The timeline and the inspector show
// one of those runs meanwhile (followed_run), never a run that is not on screen.
#pragma once

#include <optional>
#include <string>
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

  // A run of a lesson's compare chapter.
  struct LessonRun {
    std::string label;                   // "tree", or the lesson's own run's "this run (ring)"
    const ReplayModel* model = nullptr;  // null: it cannot be shown, `error` says why
    std::optional<int64_t> at_ns;        // its moment, on its own trace clock; nullopt: never came
    std::string error;
    bool operator==(const LessonRun&) const = default;
  };
  // The lesson's runs to show instead of the open traces; empty: the open traces again.
  void show_lesson_runs(std::vector<LessonRun> runs);
  bool showing_lesson_runs() const { return !lesson_runs_.empty(); }
  // The run the timeline and the inspector show while the lesson's runs are on screen (the Viewer
  // asks): the lesson's own (`own`) when it is one of the columns, else the first column that can
  // be shown; null when none can. Its column says so under its name.
  const LessonRun* followed_run(const ReplayModel* own) const;
  // What the last show_lesson_runs() computed, per run (for tests): the moment and the rows read.
  struct LessonColumn {
    RunSummary summary;
    RunMoment moment;
    SampleRows samples;
  };
  const std::vector<LessonColumn>& lesson_columns() const { return columns_; }

 private:
  void draw_lesson_runs(ViewContext& ctx);

  std::vector<RunSummary> runs_;
  std::vector<const ReplayModel*> summarized_;  // the models runs_ were made from
  size_t baseline_ = 0;
  std::vector<LessonRun> lesson_runs_;
  std::vector<LessonColumn> columns_;  // one per lesson run, same order
};

}  // namespace dpscope::viz
