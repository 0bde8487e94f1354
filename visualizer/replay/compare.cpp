// summarize_run and speedup (compare.hpp).
#include "replay/compare.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "replay/run_info.hpp"

namespace dpscope::viz {

double RunSummary::samples_per_s() const {
  if (samples_per_step <= 0 || step_ns <= 0) return 0.0;
  return static_cast<double>(samples_per_step) / (static_cast<double>(step_ns) * 1e-9);
}

RunSummary summarize_run(const ReplayModel& model) {
  RunSummary s;
  for (const ModelDevice& d : model.devices()) s.gpus += d.is_host || d.is_switch ? 0 : 1;
  const RunInfo run = parse_run_info(model.data().header.run_json);
  const std::string mode = run.mode_title().empty() ? "trace" : run.mode_title();
  s.title = fmt::format("{} · {} GPU{}", mode, s.gpus, s.gpus == 1 ? "" : "s");
  int64_t batch = 0;
  if (!run.batch.empty()) std::from_chars(run.batch.data(), run.batch.data() + run.batch.size(), batch);
  s.samples_per_step = run.mode == "ddp" ? batch * s.gpus : batch;
  s.duration_ns = model.end_ns() - model.begin_ns();

  std::vector<int64_t> durations;
  for (int64_t step = model.first_step(); step <= model.last_step(); ++step) {
    const auto [t0, t1] = model.step_window(step);
    if (t1 > t0) durations.push_back(t1 - t0);
  }
  s.steps = static_cast<int>(durations.size());
  if (durations.size() > 1) durations.erase(durations.begin());  // the first step warms up
  if (!durations.empty()) {
    std::nth_element(durations.begin(), durations.begin() + static_cast<std::ptrdiff_t>(durations.size() / 2),
                     durations.end());
    s.step_ns = durations[durations.size() / 2];
  }

  const std::vector<PhaseMark>& marks = model.phase_marks();
  for (size_t i = 0; i < marks.size(); ++i) {
    const int64_t t0 = marks[i].ts_ns - model.begin_ns();
    const int64_t t1 = (i + 1 < marks.size() ? marks[i + 1].ts_ns : model.end_ns()) - model.begin_ns();
    if (t1 > t0)
      s.phases.push_back({.t0_ns = t0, .t1_ns = t1, .step = marks[i].step, .phase = marks[i].phase});
  }
  return s;
}

double speedup(const RunSummary& run, const RunSummary& baseline) {
  if (run.samples_per_s() > 0 && baseline.samples_per_s() > 0)
    return run.samples_per_s() / baseline.samples_per_s();
  if (run.step_ns > 0 && baseline.step_ns > 0)
    return static_cast<double>(baseline.step_ns) / static_cast<double>(run.step_ns);
  return 0.0;
}

}  // namespace dpscope::viz
