// DiagnosisCache: when to run trace::diagnose_ddp again on a growing trace.
#include "replay/diagnosis.hpp"

#include <algorithm>
#include <exception>

namespace dpscope::viz {

bool DiagnosisCache::update(const trace::TraceData& data, uint64_t generation, int64_t last_step,
                            Clock::time_point now, DiagnosisThrottle throttle) {
  if (computations_ > 0) {
    if (generation == generation_) return false;  // nothing new was read
    // A big live trace costs more to diagnose: never more often than 4x the last computation's
    // cost, so the viewer spends at most a fifth of its time on it (as Document::poll does for
    // the model).
    const auto min_interval = std::max<Clock::duration>(throttle.min_interval, 4 * last_cost_);
    if (now - computed_at_ < min_interval) return false;
    if (last_step == step_ && now - computed_at_ < std::max<Clock::duration>(throttle.settle, min_interval))
      return false;
  }
  const auto start = Clock::now();
  try {
    diagnosis_ = trace::diagnose_ddp(data);
    error_.clear();
  } catch (const std::exception& e) {
    // A trace the reader accepted should always be diagnosable; if not, say so in the panel
    // rather than take the viewer down.
    diagnosis_ = trace::DdpDiagnosis{};
    error_ = e.what();
  }
  last_cost_ = Clock::now() - start;
  last_ms_ = std::chrono::duration<double, std::milli>(last_cost_).count();
  generation_ = generation;
  step_ = last_step;
  computed_at_ = now;
  ++computations_;
  return true;
}

bool DiagnosisCache::has_findings() const {
  const trace::DdpDiagnosis& d = diagnosis_;
  return !d.straggler.sentence.empty() || !d.exposed.sentence.empty() || !d.buckets.sentences.empty() ||
         !d.epochs.sentence.empty() || !error_.empty();
}

}  // namespace dpscope::viz
