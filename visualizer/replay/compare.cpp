// summarize_run and speedup (compare.hpp).
#include "replay/compare.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
  for (const TraceParamInfo& p : model.data().header.params)
    s.model += fmt::format("{}[{}];", p.name, fmt::join(p.shape, ","));

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

RunMoment run_moment(const ReplayModel& model, int64_t t_ns) {
  RunMoment m;
  m.t_ns = t_ns;
  m.t0_ns = model.begin_ns();
  m.t1_ns = model.end_ns();
  for (const StepMark& s : model.step_marks()) {
    if (s.ts_ns > t_ns) break;
    m.step = s.step;
  }
  if (m.step >= 0) std::tie(m.t0_ns, m.t1_ns) = model.step_window(m.step);
  const std::vector<PhaseMark>& marks = model.phase_marks();
  for (size_t i = 0; i < marks.size(); ++i) {
    const int64_t t0 = std::max(marks[i].ts_ns, m.t0_ns);
    const int64_t t1 = std::min(i + 1 < marks.size() ? marks[i + 1].ts_ns : model.end_ns(), m.t1_ns);
    if (t1 > t0 && marks[i].phase != Phase::kNone)
      m.phases.push_back({.t0_ns = t0, .t1_ns = t1, .phase = marks[i].phase});
  }
  // The reference device: the lowest rank with a collective span (rank 0 in every lesson run).
  const trace::TraceData& data = model.data();
  int32_t rank = INT32_MAX;
  for (const trace::Event& e : data.events)
    if (e.type == trace::EventType::kSpan && e.category == trace::SpanCategory::kCollective)
      rank = std::min(rank, e.rank);
  for (const trace::Event& e : data.events) {
    if (e.type != trace::EventType::kSpan || e.category != trace::SpanCategory::kCollective || e.rank != rank)
      continue;
    if (e.ts_ns <= t_ns && t_ns < e.end_ns() && m.collective.empty()) {
      m.collective = std::string(data.str(e.name));
      m.collective_ns = e.dur_ns;
    }
    const int64_t t0 = std::max(e.ts_ns, m.t0_ns);
    const int64_t t1 = std::min(e.end_ns(), m.t1_ns);
    if (t1 > t0) m.collectives.push_back({.t0_ns = t0, .t1_ns = t1, .name = std::string(data.str(e.name))});
  }
  for (const Collective& c : model.collectives())
    if (c.step == m.step)
      for (const uint32_t t : c.transfers) m.messages += data.events[t].rank == rank ? 1 : 0;
  return m;
}

SampleRows sample_rows(const ReplayModel& model, int64_t t_ns) {
  SampleRows out;
  const trace::TraceData& data = model.data();
  std::map<int32_t, SampleRows::Rank> ranks;
  for (const trace::Event& e : data.events) {
    if (e.type != trace::EventType::kSamples || e.ts_ns > t_ns || e.payload < 0) continue;
    const trace::SampleIndices& s = data.samples[static_cast<size_t>(e.payload)];
    SampleRows::Rank& r = ranks[e.rank];
    r.rank = e.rank;
    r.batches.push_back({.step = e.step, .epoch = s.epoch.value_or(0), .rows = s.indices});
  }
  for (auto& [rank, r] : ranks) {
    std::stable_sort(r.batches.begin(), r.batches.end(),
                     [](const SampleRows::Batch& a, const SampleRows::Batch& b) { return a.step < b.step; });
    // The k-th batch of epoch e against the k-th of epoch e - 1.
    std::map<int64_t, std::vector<const SampleRows::Batch*>> by_epoch;
    for (SampleRows::Batch& b : r.batches) {
      const std::vector<const SampleRows::Batch*>& previous = by_epoch[b.epoch - 1];
      const size_t k = by_epoch[b.epoch].size();
      b.repeats = b.epoch > 0 && k < previous.size() && !b.rows.empty() && previous[k]->rows == b.rows;
      out.repeated += b.repeats ? 1 : 0;
      by_epoch[b.epoch].push_back(&b);
      out.epochs = std::max(out.epochs, b.epoch + 1);
    }
    out.ranks.push_back(std::move(r));
  }
  return out;
}

double speedup(const RunSummary& run, const RunSummary& baseline) {
  if (run.model != baseline.model || run.model.empty()) return 0.0;  // (different work, or unknown)
  if (run.samples_per_s() > 0 && baseline.samples_per_s() > 0)
    return run.samples_per_s() / baseline.samples_per_s();
  if (run.step_ns > 0 && baseline.step_ns > 0)
    return static_cast<double>(baseline.step_ns) / static_cast<double>(run.step_ns);
  return 0.0;
}

}  // namespace dpscope::viz
