// The DDP diagnosis of a trace (definitions in dpscope/trace_tools/ddp_diagnosis.hpp).
//
// One pass collects, per (step, rank): the time each parameter's gradient was ready, the step's
// extent and the backward's all-reduce spans; per rank: its bucket assignments by step and its
// sample indices by epoch. Each finding is then computed from those tables.
#include "dpscope/trace_tools/ddp_diagnosis.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "dpscope/base/format_bytes.hpp"
#include "dpscope/trace_tools/stats.hpp"

namespace dpscope::trace {

namespace {

using StepRank = std::pair<int64_t, int>;  // (step, rank)

struct StepRankData {
  std::map<int, int64_t> grad_ready;  // param -> latest time its gradient was ready
  int64_t begin_ns = INT64_MAX;       // the step's first event on this rank
  int64_t end_ns = INT64_MIN;         // its last end
  std::vector<const Event*> all_reduces;
};

struct RankAssignment {
  int64_t step = -1;
  const std::vector<TraceBucketInfo>* buckets = nullptr;
  BucketReason reason = BucketReason::kOther;
};

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A DDP all-reduce of gradients: a collective all_reduce span on the comm stream in backward (or
// one that names its bucket, as dpscope_torch's do).
bool is_gradient_all_reduce(const TraceData& data, const Event& e) {
  if (e.type != EventType::kSpan || e.category != SpanCategory::kCollective || e.stream != StreamKind::kComm)
    return false;
  if (data.arg(e, trace_key::kBucket)) return true;
  if (e.phase != Phase::kBackward) return false;
  if (const auto op = data.text_arg(e, "op")) return *op == "all_reduce";
  return data.str(e.name).starts_with("all_reduce");
}

// The latest and next latest of per-rank times: `times` maps rank -> time.
Lateness latest_of(const std::map<int, int64_t>& times, int64_t noise_ns) {
  Lateness out;
  if (times.size() < 2) return out;
  std::vector<std::pair<int64_t, int>> order;  // (time, rank)
  for (const auto& [rank, ts] : times) order.emplace_back(ts, rank);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  out.latest_rank = order[0].second;
  out.next_rank = order[1].second;
  out.lead_ns = order[0].first - order[1].first;
  out.above_noise = out.lead_ns > noise_ns;
  return out;
}

// The uncertainty of a rank's clock against rank 0's (0 for threads and single files).
int64_t clock_uncertainty(const TraceData& data, int rank) {
  for (const RankSource& r : data.ranks)
    if (r.rank == rank) return r.clock_uncertainty_ns;
  return 0;
}

// The names of a bucket's parameters: "4.bias, 4.weight" or "4.bias ... 2.weight".
std::string param_names(const TraceData& data, const std::vector<int>& params) {
  auto name = [&](int p) {
    for (const TraceParamInfo& info : data.header.params)
      if (info.index == p) return info.name;
    return fmt::format("parameter {}", p);
  };
  if (params.empty()) return "none";
  if (params.size() <= 2) {
    std::string out = name(params.front());
    if (params.size() == 2) out += ", " + name(params.back());
    return out;
  }
  return name(params.front()) + " ... " + name(params.back());
}

uint64_t param_bytes(const TraceData& data, int p) {
  for (const TraceParamInfo& info : data.header.params)
    if (info.index == p) return info.bytes;
  return 0;
}

uint64_t mib_bytes(double mib) { return static_cast<uint64_t>(mib * 1024.0 * 1024.0); }

std::string plural(size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// ---- the tables ----

struct Tables {
  // DDP's own events were seen (bucket assignments, bucket launches): DataParallel's replicas also
  // have gradient-ready events, but no buckets and no all-reduce, and get no diagnosis.
  bool ddp = false;
  std::map<StepRank, StepRankData> steps;
  std::map<int, std::vector<RankAssignment>> assignments;  // rank -> in trace order
  // rank -> epoch -> (step, indices) in trace order
  std::map<int, std::map<int64_t, std::vector<std::pair<int64_t, const std::vector<int64_t>*>>>> samples;
};

Tables collect(const TraceData& data) {
  Tables t;
  t.ddp = !data.header.buckets.empty();
  StepRank current_key{-1, -1};
  StepRankData* current = nullptr;  // t.steps[current_key] (std::map entries stay where they are)
  for (const Event& e : data.events) {
    if (e.type == EventType::kBuckets && e.payload >= 0) {
      const BucketAssignment& b = data.buckets[static_cast<size_t>(e.payload)];
      t.assignments[e.rank].push_back({e.step, &b.buckets, b.reason_kind});
      t.ddp = true;
      continue;
    }
    if (e.type == EventType::kSamples && e.payload >= 0) {
      const SampleIndices& s = data.samples[static_cast<size_t>(e.payload)];
      if (s.epoch) t.samples[e.rank][*s.epoch].emplace_back(e.step, &s.indices);
      continue;
    }
    if (e.step < 0) continue;
    // Events of one step and rank come in runs: look the entry up only when the key changes.
    if (current == nullptr || current_key != StepRank{e.step, e.rank}) {
      current_key = {e.step, e.rank};
      current = &t.steps[current_key];
    }
    StepRankData& d = *current;
    d.begin_ns = std::min(d.begin_ns, e.ts_ns);
    d.end_ns = std::max(d.end_ns, e.end_ns());
    if (e.known == EventName::kBucketLaunched) t.ddp = true;
    if (e.known == EventName::kGradReady) {
      if (const auto g = data.grad_ready(e)) {
        auto [it, fresh] = d.grad_ready.emplace(g->param, e.ts_ns);
        if (!fresh) it->second = std::max(it->second, e.ts_ns);
      }
    } else if (is_gradient_all_reduce(data, e)) {
      d.all_reduces.push_back(&e);
    }
  }
  return t;
}

// The bucket assignment in effect on `rank` in `step`: its latest `buckets` event up to that step,
// else the header's.
const std::vector<TraceBucketInfo>* assignment_at(const TraceData& data, const Tables& t, int rank,
                                                  int64_t step) {
  const std::vector<TraceBucketInfo>* out = data.header.buckets.empty() ? nullptr : &data.header.buckets;
  if (const auto it = t.assignments.find(rank); it != t.assignments.end())
    for (const RankAssignment& a : it->second)
      if (a.step <= step) out = a.buckets;
  return out;
}

// ---- straggler ----

// When `rank` saw the last of step `step`'s gradient all-reduces complete; nullopt when it traced none.
std::optional<int64_t> last_all_reduce_end(const Tables& t, int64_t step, int rank) {
  const auto it = t.steps.find({step, rank});
  if (it == t.steps.end() || it->second.all_reduces.empty()) return std::nullopt;
  int64_t end = INT64_MIN;
  for (const Event* e : it->second.all_reduces) end = std::max(end, e->end_ns());
  return end;
}

StragglerFinding find_straggler(const TraceData& data, const Tables& t) {
  StragglerFinding f;
  std::map<int64_t, std::vector<int>> ranks_by_step;
  for (const auto& [key, d] : t.steps)
    if (!d.grad_ready.empty()) ranks_by_step[key.first].push_back(key.second);
  std::set<int> ranks_seen;
  for (const auto& [step, ranks] : ranks_by_step) {
    if (ranks.size() < 2) continue;
    std::vector<int64_t> lengths;
    std::map<int, int64_t> backward_end;
    for (int r : ranks) {
      const StepRankData& d = t.steps.at({step, r});
      lengths.push_back(d.end_ns - d.begin_ns);
      int64_t last = INT64_MIN;
      for (const auto& [param, ts] : d.grad_ready) last = std::max(last, ts);
      backward_end[r] = last;
      ranks_seen.insert(r);
    }
    StepLateness s;
    s.step = step;
    const auto share = static_cast<int64_t>(kStragglerStepShare * static_cast<double>(median(lengths)));
    // The threshold is the same for every pair: the largest two uncertainties bound any pair's.
    std::vector<int64_t> uncertainties;
    for (int r : ranks) uncertainties.push_back(clock_uncertainty(data, r));
    std::sort(uncertainties.rbegin(), uncertainties.rend());
    s.noise_ns = share + uncertainties[0] + uncertainties[1];
    s.backward = latest_of(backward_end, s.noise_ns);
    s.start_lead_ns = t.steps.at({step, s.backward.latest_rank}).begin_ns -
                      t.steps.at({step, s.backward.next_rank}).begin_ns;
    // A rank that began the step a little later carries that into its last gradient without being
    // slow: the ranks leave a collective one after another (with gloo's two ranks, rank 1 sees the
    // previous all-reduce complete after rank 0, in most steps of an even job). A late start within
    // noise is that order, not lateness: only the rest of the lead is compared with the noise. A late
    // start beyond noise (slow data loading, a slow optimizer step) still counts whole.
    // The same order is carried from the previous step when the ranks see its last all-reduce complete
    // apart: with gloo, the rank that receives last may learn of it a message's transfer later (0.5-0.8
    // ms in runs of small models on 2 gloo processes) and begin this step as much later, every step,
    // without being slow. A late start within that carried lag (plus noise) is not lateness either.
    int64_t carried_ns = 0;
    if (s.backward.latest_rank >= 0) {
      const auto latest_done = last_all_reduce_end(t, step - 1, s.backward.latest_rank);
      const auto next_done = last_all_reduce_end(t, step - 1, s.backward.next_rank);
      if (latest_done && next_done) carried_ns = std::max<int64_t>(0, *latest_done - *next_done);
    }
    if (s.backward.latest_rank >= 0 && s.start_lead_ns > 0 && s.start_lead_ns <= s.noise_ns + carried_ns)
      s.backward.above_noise = s.backward.lead_ns - s.start_lead_ns > s.noise_ns;
    if (const auto* buckets = assignment_at(data, t, ranks.front(), step)) {
      for (const TraceBucketInfo& b : *buckets) {
        std::map<int, int64_t> last_in_bucket;
        for (int r : ranks) {
          const StepRankData& d = t.steps.at({step, r});
          for (int p : b.params) {
            const auto it = d.grad_ready.find(p);
            if (it == d.grad_ready.end()) continue;
            auto [slot, fresh] = last_in_bucket.emplace(r, it->second);
            if (!fresh) slot->second = std::max(slot->second, it->second);
          }
        }
        s.buckets.push_back({b.id, latest_of(last_in_bucket, s.noise_ns)});
      }
    }
    f.steps.push_back(std::move(s));
  }
  if (f.steps.empty()) return f;

  const size_t total = f.steps.size();
  std::map<int, int> late_steps;  // rank -> steps late above noise
  int64_t largest_lead = 0;
  for (const StepLateness& s : f.steps) {
    largest_lead = std::max(largest_lead, s.backward.lead_ns);
    if (s.backward.above_noise) ++late_steps[s.backward.latest_rank];
  }
  int best = -1;
  int best_count = 0;
  for (const auto& [rank, count] : late_steps)
    if (count > best_count) {
      best = rank;
      best_count = count;
    }

  // Named when late in three steps of four: two ranks of an even job on a busy machine are each last
  // about half the time by chance (a clean PyTorch run had one last in 8 of 16 steps).
  if (best >= 0 && 4 * static_cast<size_t>(best_count) >= 3 * total) {
    f.rank = best;
    f.steps_late = best_count;
    std::vector<int64_t> leads, start_leads, work_leads;
    std::map<int, int> first_bucket_votes;
    int64_t noise = 0;  // the largest threshold of those steps
    for (const StepLateness& s : f.steps) {
      if (!s.backward.above_noise || s.backward.latest_rank != best) continue;
      leads.push_back(s.backward.lead_ns);
      start_leads.push_back(s.start_lead_ns);
      work_leads.push_back(s.backward.lead_ns - s.start_lead_ns);
      noise = std::max(noise, s.noise_ns);
      for (const BucketLateness& b : s.buckets) {
        if (b.lateness.above_noise && b.lateness.latest_rank == best) {
          ++first_bucket_votes[b.bucket];
          break;
        }
      }
    }
    f.median_lead_ns = median(leads);
    f.median_start_lead_ns = median(start_leads);
    f.median_work_lead_ns = median(work_leads);
    int votes = 0;
    for (const auto& [bucket, n] : first_bucket_votes)
      if (n > votes) {
        f.first_late_bucket = bucket;
        votes = n;
      }
    const std::string others =
        ranks_seen.size() == 2 ? fmt::format("rank {}'s", best == *ranks_seen.begin() ? *ranks_seen.rbegin()
                                                                                      : *ranks_seen.begin())
                               : std::string("the next latest rank's");
    f.sentence = fmt::format(
        "rank {} is the straggler in {} of {} steps: its last gradient is ready {} after {} (median; the "
        "all-reduce makes every rank's backward equally long, so per-rank step times cannot show this)",
        best, best_count, total, format_duration(f.median_lead_ns), others);
    // Where the lead arose: before the step (a later start) or in its forward and backward.
    const bool late_start = f.median_start_lead_ns > noise;
    const bool slow_work = f.median_work_lead_ns > noise;
    if (late_start && slow_work) {
      f.sentence += fmt::format(
          ". It starts its steps {} later (data loading, or its previous step ending later) "
          "and its forward and backward take {} longer",
          format_duration(f.median_start_lead_ns), format_duration(f.median_work_lead_ns));
    } else if (late_start) {
      f.sentence += fmt::format(
          ". It starts its steps {} later: the delay arises before forward (data loading, or its "
          "previous step ending later), not in its forward and backward",
          format_duration(f.median_start_lead_ns));
    } else if (slow_work) {
      f.sentence += ". It starts its steps on time: the delay arises in its forward and backward";
    }
    if (f.first_late_bucket >= 0)
      f.sentence +=
          fmt::format(". Bucket {} is the first whose all-reduce waits for it", f.first_late_bucket);
    return f;
  }
  if (!late_steps.empty()) {
    std::vector<std::string> parts;
    for (const auto& [rank, count] : late_steps) parts.push_back(fmt::format("rank {} in {}", rank, count));
    f.sentence = fmt::format(
        "no consistent straggler: the rank whose last gradient comes last by more than the noise changes "
        "from step to step ({} of {} steps)",
        fmt::join(parts, ", "), total);
    return f;
  }
  f.sentence = fmt::format(
      "no straggler: in all {} the ranks' last gradients were ready within noise of each other (largest "
      "lead {}; noise is {:.0f} % of the step plus the clocks' uncertainty)",
      plural(total, "step", "steps"), format_duration(largest_lead), kStragglerStepShare * 100);
  return f;
}

// ---- exposed communication ----

ExposedCommFinding find_exposed(const TraceData& data, const Tables& t, const StragglerFinding& straggler) {
  ExposedCommFinding f;
  for (const StepLateness& s : straggler.steps) {
    const int rank = s.backward.latest_rank;
    const StepRankData& d = t.steps.at({s.step, rank});
    if (d.all_reduces.empty()) continue;
    int64_t compute_end = INT64_MIN;
    for (const auto& [param, ts] : d.grad_ready) compute_end = std::max(compute_end, ts);
    std::vector<const Event*> spans = d.all_reduces;
    std::sort(spans.begin(), spans.end(), [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; });
    StepExposure x;
    x.step = s.step;
    x.rank = rank;
    // Union of the spans, and its part after compute_end, in one sweep over them in start order.
    int64_t covered_until = INT64_MIN;
    for (const Event* e : spans) {
      const int64_t begin = std::max(e->ts_ns, covered_until);
      const int64_t end = e->end_ns();
      if (end > begin) {
        x.all_reduce_ns += end - begin;
        x.exposed_ns += std::max<int64_t>(0, end - std::max(begin, compute_end));
      }
      covered_until = std::max(covered_until, end);
    }
    const Event& last = *spans.back();
    x.last_exposed_ns = std::max<int64_t>(0, last.end_ns() - std::max(last.ts_ns, compute_end));
    const auto bucket = data.arg(last, trace_key::kBucket);
    x.last_bucket = bucket ? static_cast<int>(*bucket) : static_cast<int>(spans.size()) - 1;
    f.steps.push_back(x);
  }
  if (f.steps.empty()) return f;
  std::vector<int64_t> totals, exposed, last_exposed;
  std::map<int, int> last_bucket_votes;
  for (const StepExposure& x : f.steps) {
    totals.push_back(x.all_reduce_ns);
    exposed.push_back(x.exposed_ns);
    last_exposed.push_back(x.last_exposed_ns);
    ++last_bucket_votes[x.last_bucket];
  }
  f.median_all_reduce_ns = median(totals);
  f.median_exposed_ns = median(exposed);
  if (f.median_all_reduce_ns <= 0) return f;
  const double pct =
      100.0 * static_cast<double>(f.median_exposed_ns) / static_cast<double>(f.median_all_reduce_ns);
  f.sentence = fmt::format(
      "backward left {} of {} of all-reduce exposed ({:.0f} %; median over {}, on the rank whose "
      "gradients came last: the all-reduce time after its last gradient was ready, when no backward "
      "compute is left to hide it)",
      format_duration(f.median_exposed_ns), format_duration(f.median_all_reduce_ns), pct,
      plural(f.steps.size(), "step", "steps"));
  const int64_t last_median = median(last_exposed);
  if (last_median > 0) {
    int bucket = -1, votes = 0;
    for (const auto& [b, n] : last_bucket_votes)
      if (n > votes) {
        bucket = b;
        votes = n;
      }
    f.sentence += fmt::format(
        ". The last bucket's all-reduce (bucket {}) accounts for {} of it: it cannot start before its "
        "last gradient, the last of backward",
        bucket, format_duration(last_median));
  }
  return f;
}

// ---- buckets ----

BucketFinding explain_buckets(const TraceData& data, const Tables& t) {
  BucketFinding f;
  simdjson::dom::parser parser;
  simdjson::dom::element run;
  bool from_pytorch = false;  // a real PyTorch run (dpscope_torch), not dpscope's own DDP
  if (!parser.parse(data.header.run_json).get(run)) {
    double v = 0;
    if (!run["bucket_cap_mb"].get_double().get(v) || !run["bucket_mb"].get_double().get(v)) f.cap_mb = v;
    if (!run["first_bucket_mb"].get_double().get(v)) f.first_mb = v;
    std::string_view source;
    from_pytorch = !run["source"].get_string().get(source) && source == "dpscope_torch";
  }
  // The lowest rank's assignments (DDP broadcasts rank 0's rebuilt order to every rank).
  const std::vector<TraceBucketInfo>* initial = data.header.buckets.empty() ? nullptr : &data.header.buckets;
  const std::vector<TraceBucketInfo>* last = initial;
  if (!t.assignments.empty()) {
    for (const RankAssignment& a : t.assignments.begin()->second) {
      if (a.reason == BucketReason::kInitial && initial == nullptr) initial = a.buckets;
      if (a.reason == BucketReason::kRebuilt && !f.rebuilt) {
        f.rebuilt = true;
        f.rebuilt_step = a.step;
      }
      last = a.buckets;
    }
  }
  if (last == nullptr || last->empty()) return f;
  f.initial_buckets = initial ? initial->size() : 0;
  const uint64_t first_limit = mib_bytes(f.first_mb);
  const uint64_t cap = mib_bytes(f.cap_mb);
  const std::string first_label =
      fmt::format("the first bucket's own {} limit (first_bucket_mb)", format_bytes(first_limit));
  const std::string cap_label = fmt::format("the {} cap (bucket_cap_mb)", format_bytes(cap));

  // PyTorch's first assignment of several buckets (find_unused_parameters=True, which 1.13 never
  // rebuilds) is filled in parameter order, the first filled up to the first bucket's limit, and then
  // reversed (torch/nn/parallel/distributed.py: list(reversed(bucket_indices))): the last bucket was
  // the first filled and bucket 0 holds what was left. dpscope's own DDP fills in reverse parameter
  // order, bucket 0 first.
  const bool filled_in_parameter_order = from_pytorch && !f.rebuilt && last->size() > 1;
  if (f.rebuilt) {
    f.sentences.push_back(fmt::format(
        "DDP began with {} and rebuilt the assignment in step {}, in the order the gradients became ready, "
        "filling each bucket up to a limit: {} for bucket 0, {} for the others{}",
        plural(f.initial_buckets, "bucket", "buckets"), f.rebuilt_step, first_label, cap_label,
        f.initial_buckets == 1
            ? " (PyTorch 1.13 with find_unused_parameters=False builds one bucket of every "
              "parameter for the first iteration: bucket_size_limits = [sys.maxsize] in "
              "torch/nn/parallel/distributed.py)"
            : ""));
  } else if (last->size() == 1 && f.initial_buckets == 1 && (*last)[0].bytes > first_limit) {
    f.sentences.push_back(
        "one bucket of every parameter and no rebuild recorded: PyTorch 1.13 with "
        "find_unused_parameters=False "
        "builds one bucket for the first iteration (bucket_size_limits = [sys.maxsize] in "
        "torch/nn/parallel/distributed.py) and rebuilds after it, in gradient-ready order, with limits");
    f.sentences.back() += fmt::format(" {} for bucket 0 and {} for the others", first_label, cap_label);
  } else if (filled_in_parameter_order) {
    f.sentences.push_back(fmt::format(
        "DDP's {} as first assigned (no rebuild recorded), filled in parameter order and then reversed, so "
        "that bucket 0 holds the last parameters: {} for bucket {}, the first filled, {} for the others",
        plural(last->size(), "bucket", "buckets"), first_label, last->size() - 1, cap_label));
  } else {
    f.sentences.push_back(fmt::format(
        "DDP's {}, filled in reverse parameter order, each up to a limit: {} for bucket 0, {} for the others",
        plural(last->size(), "bucket", "buckets"), first_label, cap_label));
  }
  for (size_t i = 0; i < last->size(); ++i) {
    const TraceBucketInfo& b = (*last)[i];
    BucketExplanation x;
    x.id = b.id;
    x.bytes = b.bytes;
    x.params = b.params;
    const bool first_filled = filled_in_parameter_order ? i + 1 == last->size() : i == 0;
    const bool filled_last = filled_in_parameter_order ? i == 0 : i + 1 == last->size();
    x.limit_bytes = first_filled ? first_limit : cap;
    const std::string head =
        fmt::format("bucket {}: {} in {} ({})", b.id, format_bytes(b.bytes),
                    plural(b.params.size(), "parameter", "parameters"), param_names(data, b.params));
    const std::string& label = first_filled ? first_label : cap_label;
    if (!f.rebuilt && last->size() == 1 && f.initial_buckets == 1 && b.bytes > first_limit) {
      x.sentence = head + ": every parameter, with no size limit (the first iteration's bucket)";
    } else if (b.bytes >= x.limit_bytes && !b.params.empty()) {
      // (the parameter that came last into it: its last in gradient-ready or reverse order, its
      // highest index when filled in parameter order)
      const int closer =
          filled_in_parameter_order ? *std::max_element(b.params.begin(), b.params.end()) : b.params.back();
      x.sentence = fmt::format("{}: {} ({}) took it {} {}, which closed it", head,
                               param_names(data, {closer}), format_bytes(param_bytes(data, closer)),
                               b.bytes > x.limit_bytes ? "past" : "to", label);
    } else if (last->size() == 1) {
      x.sentence = fmt::format(
          "{}: every parameter fits under {}, so the one all-reduce cannot start before the last gradient "
          "and none of it overlaps backward (a lower first-bucket limit splits it: "
          "dist._DEFAULT_FIRST_BUCKET_BYTES in PyTorch, or in PyTorch 2.x a bucket_cap_mb given to DDP; "
          "--first-bucket-mb in dpscope)",
          head, label);
    } else if (filled_last) {
      x.sentence = fmt::format("{}: the parameters left over, under {}", head, label);
    } else {
      x.sentence = fmt::format(
          "{}: closed under {} (a parameter of another dtype or device starts a new bucket)", head, label);
    }
    f.sentences.push_back(x.sentence);
    f.buckets.push_back(std::move(x));
  }
  return f;
}

// ---- set_epoch ----

// True when `later` is `earlier`'s first elements.
bool repeats(const std::vector<int64_t>& later, const std::vector<int64_t>& earlier) {
  return !later.empty() && later.size() <= earlier.size() &&
         std::equal(later.begin(), later.end(), earlier.begin());
}

EpochFinding find_epoch_repeats(const Tables& t) {
  EpochFinding f;
  if (t.samples.empty()) return f;
  // rank -> epoch -> the epoch's indices in step order
  std::map<int, std::map<int64_t, std::vector<int64_t>>> orders;
  std::set<int64_t> epochs;
  for (const auto& [rank, by_epoch] : t.samples) {
    for (const auto& [epoch, batches] : by_epoch) {
      std::vector<std::pair<int64_t, const std::vector<int64_t>*>> sorted = batches;
      std::stable_sort(sorted.begin(), sorted.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<int64_t>& order = orders[rank][epoch];
      for (const auto& [step, indices] : sorted) order.insert(order.end(), indices->begin(), indices->end());
      epochs.insert(epoch);
    }
  }
  f.epochs.assign(epochs.begin(), epochs.end());
  if (f.epochs.size() < 2) return f;
  const int64_t first = f.epochs.front();
  // An unshuffled sampler visits the same ascending order every epoch by design: nothing to say.
  bool shuffled = false;
  for (const auto& [rank, by_epoch] : orders) {
    const auto it = by_epoch.find(first);
    if (it != by_epoch.end() && !std::is_sorted(it->second.begin(), it->second.end())) shuffled = true;
  }
  if (!shuffled) {
    f.epochs.clear();
    return f;
  }
  for (size_t k = 1; k < f.epochs.size(); ++k) {
    const int64_t epoch = f.epochs[k];
    bool all_ranks = true;
    for (const auto& [rank, by_epoch] : orders) {
      const auto it = by_epoch.find(epoch);
      if (it == by_epoch.end()) continue;
      bool repeated = false;
      for (size_t j = 0; j < k && !repeated; ++j) {
        const auto earlier = by_epoch.find(f.epochs[j]);
        repeated = earlier != by_epoch.end() && repeats(it->second, earlier->second);
      }
      all_ranks = all_ranks && repeated;
    }
    if (all_ranks) f.repeated.push_back(epoch);
  }
  if (f.repeated.size() + 1 == f.epochs.size()) {
    f.sentence = fmt::format(
        "every epoch repeated epoch {}'s sample order on every rank: call sampler.set_epoch(epoch) at the "
        "start "
        "of each epoch (DistributedSampler shuffles with seed + epoch, so without it every epoch is the "
        "same)",
        first);
  } else if (!f.repeated.empty()) {
    f.sentence = fmt::format(
        "epoch{} {} repeated an earlier epoch's sample order on every rank: call sampler.set_epoch(epoch) at "
        "the "
        "start of each epoch",
        f.repeated.size() == 1 ? "" : "s", fmt::join(f.repeated, ", "));
  } else {
    f.sentence = fmt::format("each of the {} epochs drew a new sample order", f.epochs.size());
  }
  return f;
}

}  // namespace

DdpDiagnosis diagnose_ddp(const TraceData& data) {
  const Tables tables = collect(data);
  DdpDiagnosis d;
  if (!tables.ddp) return d;
  d.straggler = find_straggler(data, tables);
  d.exposed = find_exposed(data, tables, d.straggler);
  d.buckets = explain_buckets(data, tables);
  d.epochs = find_epoch_repeats(tables);
  return d;
}

std::string format_diagnosis(const DdpDiagnosis& d, bool per_step) {
  std::string out;
  auto it = std::back_inserter(out);
  if (!d.straggler.sentence.empty()) fmt::format_to(it, "  straggler: {}\n", d.straggler.sentence);
  if (!d.exposed.sentence.empty()) fmt::format_to(it, "  exposed communication: {}\n", d.exposed.sentence);
  for (size_t i = 0; i < d.buckets.sentences.size(); ++i)
    fmt::format_to(it, "{}{}\n", i == 0 ? "  buckets: " : "    ", d.buckets.sentences[i]);
  if (!d.epochs.sentence.empty()) fmt::format_to(it, "  sampler: {}\n", d.epochs.sentence);
  if (per_step && !d.straggler.steps.empty()) {
    fmt::format_to(it, "\n{:<6} {:<7} {:>11} {:>12} {:>12}\n", "step", "bucket", "latest rank", "lead",
                   "noise");
    for (const StepLateness& s : d.straggler.steps) {
      auto row = [&](const std::string& what, const Lateness& l) {
        fmt::format_to(it, "{:<6} {:<7} {:>11} {:>12} {:>12}{}\n", s.step, what, l.latest_rank,
                       format_duration(l.lead_ns), format_duration(s.noise_ns),
                       l.above_noise ? "  late" : "");
      };
      row("all", s.backward);
      for (const BucketLateness& b : s.buckets)
        if (b.lateness.latest_rank >= 0) row(std::to_string(b.bucket), b.lateness);
    }
  }
  if (out.empty()) return out;
  return "\nDDP diagnosis:\n" + out;
}

}  // namespace dpscope::trace
