// A diagnosis of a DDP trace: what `dpscope trace stats` says after its time table, each finding a
// sentence a user can act on, every number in it computed from the trace (docs/trace-format.md,
// "The DDP diagnosis"). Works on any trace with DDP's events (bucket assignments or launches; a
// trace without them, DataParallel's included, gets none): dpscope's own runs (threads or process
// ranks) and real PyTorch runs recorded by dpscope_torch.
//
//  * Straggler: per step and per bucket, the rank whose last gradient was ready last (on rank 0's
//    clock: a directory's ranks are already merged with their offsets) and its lead over the next
//    latest rank. DDP's all-reduce makes every rank wait for the slowest, so every rank's backward
//    ends at the same time and per-rank step times cannot show who was slow; the gradient-ready
//    times can. A lead counts only when it is above noise: kStragglerStepShare of the step's length
//    (the median over ranks of first to last event of the step) plus the two ranks' clock
//    uncertainties (0 for threads, which share one clock); a later start of the step within that
//    noise is the previous collective's completion order and is taken from the lead first.
//  * Exposed communication: per step, the all-reduce time (union of the backward's all-reduce spans
//    on the comm stream) that falls after the rank's last gradient was ready, when backward has no
//    compute left to hide it behind; measured on the rank whose gradients came last, because an
//    earlier rank's all-reduce also waits for that one (which is the straggler's time, not
//    communication's).
//  * Buckets: each bucket's size against its limit (the first bucket's own `first_bucket_mb`, 1 MiB
//    by default; then `bucket_cap_mb`, default 25 MiB, both from the header's run) and why it closed
//    where it did.
//  * set_epoch: sample orders that repeat an earlier epoch's on every rank. Needs the samples'
//    `epoch` field; without it nothing is said, because where one epoch ends cannot be told soundly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/trace_format/ddp_defaults.hpp"
#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::trace {

// A lead is above noise when it exceeds this share of the step's length plus the two clocks'
// uncertainties.
inline constexpr double kStragglerStepShare = 0.05;

// Which rank's last gradient (of a bucket, or of the whole backward) came last in one step.
struct Lateness {
  int latest_rank = -1;
  int next_rank = -1;   // the next latest rank
  int64_t lead_ns = 0;  // over the next latest rank
  bool above_noise = false;
};

struct BucketLateness {
  int bucket = 0;
  Lateness lateness;
};

struct StepLateness {
  int64_t step = 0;
  int64_t noise_ns = 0;  // the threshold a lead must pass in this step
  Lateness backward;     // the last gradient of all
  // How much later the latest rank began the step (its first event) than the next latest rank: the
  // part of the lead that arose before the step's work (data loading, the previous step's end).
  int64_t start_lead_ns = 0;
  std::vector<BucketLateness> buckets;  // by bucket id; empty when the assignment is unknown
};

struct StragglerFinding {
  std::vector<StepLateness> steps;   // steps where at least two ranks had gradients ready
  int rank = -1;                     // the straggler named, -1 for none
  int steps_late = 0;                // steps in which `rank` was last by more than the noise
  int64_t median_lead_ns = 0;        // its median lead over those steps
  int64_t median_start_lead_ns = 0;  // the median of their start leads
  int64_t median_work_lead_ns = 0;   // the median of lead - start lead: what arose within the step
  int first_late_bucket = -1;        // the lowest bucket in which it is late in most of those steps
  std::string sentence;              // "" when the trace has no two ranks' gradients
};

struct StepExposure {
  int64_t step = 0;
  int rank = 0;                 // the rank measured: the one whose gradients came last
  int64_t all_reduce_ns = 0;    // union of its backward's all-reduce spans
  int64_t exposed_ns = 0;       // the part after its last gradient was ready
  int64_t last_exposed_ns = 0;  // the exposed part of the last all-reduce (the last bucket's)
  int last_bucket = -1;         // the last all-reduce's bucket (-1 when unknown)
};

struct ExposedCommFinding {
  std::vector<StepExposure> steps;  // steps with gradient-ready events and all-reduces
  int64_t median_all_reduce_ns = 0;
  int64_t median_exposed_ns = 0;
  std::string sentence;
};

struct BucketExplanation {
  int id = 0;
  uint64_t bytes = 0;
  uint64_t limit_bytes = 0;  // the first bucket's limit for bucket 0, the cap for the others
  std::vector<int> params;
  std::string sentence;
};

struct BucketFinding {
  double cap_mb = kDefaultBucketCapMb;      // the header run's bucket_cap_mb (or dpscope's bucket_mb)
  double first_mb = kDefaultFirstBucketMb;  // the header run's first_bucket_mb
  bool rebuilt = false;                     // a `rebuilt` assignment was recorded
  int64_t rebuilt_step = -1;                // the step it came in
  size_t initial_buckets = 0;
  std::vector<BucketExplanation> buckets;  // the assignment in effect at the end of the trace
  std::vector<std::string> sentences;      // a heading sentence, then one per bucket
};

struct EpochFinding {
  std::vector<int64_t> epochs;    // the epochs the samples name, in order
  std::vector<int64_t> repeated;  // epochs whose order on every rank repeats an earlier epoch's
  std::string sentence;
};

struct DdpDiagnosis {
  StragglerFinding straggler;
  ExposedCommFinding exposed;
  BucketFinding buckets;
  EpochFinding epochs;
};

DdpDiagnosis diagnose_ddp(const TraceData& data);

// The findings as text: one paragraph per finding that has a sentence; with `per_step`, a table of
// each step's and bucket's latest rank and lead. "" when there is nothing to say (not a DDP trace).
std::string format_diagnosis(const DdpDiagnosis& diagnosis, bool per_step = false);

}  // namespace dpscope::trace
