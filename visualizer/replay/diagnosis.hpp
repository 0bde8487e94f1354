// The DDP diagnosis of an open trace (trace::diagnose_ddp, the same findings `dpscope trace stats`
// prints), kept by the Document for the Diagnosis panel (ui/diagnosis_view.hpp). A finished file is
// diagnosed once; a live one again as it grows, but only when that can change the findings and
// never every frame: when the trace's last step changed (a step was completed), else once the
// trace has gone `settle` without a new computation (the run's last step finishing, or a stalled
// run), and at most once per `min_interval` (or 4x the last computation's cost, if longer). No GL,
// no ImGui.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "dpscope/trace_tools/ddp_diagnosis.hpp"
#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::viz {

struct DiagnosisThrottle {
  std::chrono::milliseconds min_interval{500};
  std::chrono::milliseconds settle{2000};
};

class DiagnosisCache {
 public:
  using Clock = std::chrono::steady_clock;

  // Recomputes the diagnosis of `data` when due. `generation` changes whenever `data` did
  // (Document::generation()); `last_step` is the trace's last training step so far. Returns true
  // when it recomputed.
  bool update(const trace::TraceData& data, uint64_t generation, int64_t last_step, Clock::time_point now,
              DiagnosisThrottle throttle = {});
  // Forgets the diagnosis (a live file was replaced).
  void reset() { *this = DiagnosisCache{}; }

  bool computed() const { return computations_ > 0; }
  const trace::DdpDiagnosis& diagnosis() const { return diagnosis_; }
  // Whether the trace has DDP's events: some finding has a sentence (a DataParallel or single
  // trace has none).
  bool has_findings() const;
  // The last step the diagnosis covers (-1 when none).
  int64_t diagnosed_step() const { return step_; }
  // How often it was computed, and the last computation's wall time (for --bench-frames).
  uint64_t computations() const { return computations_; }
  double last_ms() const { return last_ms_; }
  // A diagnosis that failed: its reason, shown in the panel ("" when none).
  const std::string& error() const { return error_; }

 private:
  trace::DdpDiagnosis diagnosis_;
  std::string error_;
  uint64_t generation_ = 0;
  int64_t step_ = -1;
  uint64_t computations_ = 0;
  double last_ms_ = 0.0;
  Clock::duration last_cost_{};
  Clock::time_point computed_at_{};
};

}  // namespace dpscope::viz
