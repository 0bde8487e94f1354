// Per-device and per-step time breakdown of a trace (definitions in dpscope/trace_tools/stats.hpp).
//
// Each event contributes an interval to one of three classes (compute, comm, copy) of its device
// (and of its device's step); every class is sorted and merged into disjoint intervals, and the
// intersections come from one linear two-pointer walk.
#include "dpscope/trace_tools/stats.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace dpscope::trace {

namespace {

using Interval = std::pair<int64_t, int64_t>;  // [begin, end) in ns

// The intervals of one device (or one device in one step), by class.
struct Activity {
  std::vector<Interval> compute;
  std::vector<Interval> comm;
  std::vector<Interval> copy;
  int64_t begin_ns = INT64_MAX;
  int64_t end_ns = INT64_MIN;

  void add(const Event& e) {
    const int64_t begin = e.ts_ns;
    const int64_t end = e.end_ns();
    begin_ns = std::min(begin_ns, begin);
    end_ns = std::max(end_ns, end);
    if (end <= begin) return;
    switch (busy_class(e)) {
      case BusyClass::kNone: break;
      case BusyClass::kCompute: compute.emplace_back(begin, end); break;
      case BusyClass::kComm:
        comm.emplace_back(begin, end);
        if (e.stream == StreamKind::kCopy) copy.emplace_back(begin, end);
        break;
    }
  }
};

// Sorts and merges into disjoint, increasing intervals, in place (a 10M-event trace has millions).
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  size_t n = 0;
  for (const Interval& i : v) {
    if (n > 0 && i.first <= v[n - 1].second) {
      v[n - 1].second = std::max(v[n - 1].second, i.second);
    } else {
      v[n++] = i;
    }
  }
  v.resize(n);
  return v;
}

int64_t total(const std::vector<Interval>& v) {
  int64_t sum = 0;
  for (const Interval& i : v) sum += i.second - i.first;
  return sum;
}

// Length of the intersection of two merged lists.
int64_t intersection(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t sum = 0;
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first);
    const int64_t hi = std::min(a[i].second, b[j].second);
    if (lo < hi) sum += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return sum;
}

// Takes the intervals over (they are sorted and merged where they lie, and freed after).
DeviceStats summarize(int32_t dev, Activity&& a) {
  DeviceStats s;
  s.dev = dev;
  s.begin_ns = a.begin_ns;
  s.end_ns = a.end_ns;
  s.span_ns = a.end_ns - a.begin_ns;
  const std::vector<Interval> compute = merged(std::move(a.compute));
  const std::vector<Interval> comm = merged(std::move(a.comm));
  s.compute_ns = total(compute);
  s.comm_ns = total(comm);
  s.copy_ns = total(merged(std::move(a.copy)));
  const int64_t overlap_ns = intersection(compute, comm);
  s.busy_ns = s.compute_ns + s.comm_ns - overlap_ns;
  s.exposed_comm_ns = s.comm_ns - overlap_ns;
  s.idle_ns = s.span_ns - s.busy_ns;
  s.overlap_pct =
      s.comm_ns > 0 ? 100.0 * static_cast<double>(overlap_ns) / static_cast<double>(s.comm_ns) : 0.0;
  return s;
}

}  // namespace

BusyClass busy_class(const Event& e) {
  if (e.type != EventType::kSpan && e.type != EventType::kTransfer) return BusyClass::kNone;
  // Phase spans wrap a whole phase, idle gaps included: markers, not work.
  if (e.type == EventType::kSpan && e.category == SpanCategory::kPhase) return BusyClass::kNone;
  return e.stream == StreamKind::kCompute ? BusyClass::kCompute : BusyClass::kComm;
}

TraceStats compute_stats(const TraceData& data, bool per_step) {
  // Per device, then (a second pass, once those intervals are freed) per step: a 10M-event trace
  // has millions of intervals of each.
  TraceStats stats;
  {
    std::map<int32_t, Activity> by_device;
    // Counted first, so each device's intervals are allocated once (doubling would briefly hold
    // the largest vector three times over).
    std::map<int32_t, std::array<size_t, 3>> counts;  // compute, comm, copy
    for (const Event& e : data.events) {
      const BusyClass busy = busy_class(e);
      if (busy == BusyClass::kNone) continue;
      std::array<size_t, 3>& n = counts[e.dev];
      ++n[busy == BusyClass::kCompute ? 0 : 1];
      if (busy == BusyClass::kComm && e.stream == StreamKind::kCopy) ++n[2];
    }
    for (const auto& [dev, n] : counts) {
      Activity& a = by_device[dev];
      a.compute.reserve(n[0]);
      a.comm.reserve(n[1]);
      a.copy.reserve(n[2]);
    }
    for (const Event& e : data.events)
      if (e.type == EventType::kSpan || e.type == EventType::kTransfer) by_device[e.dev].add(e);
    std::vector<int32_t> order;  // header order first, then ids the header does not list
    for (const TraceDeviceInfo& d : data.header.devices) order.push_back(d.id);
    for (const auto& [dev, activity] : by_device)
      if (std::find(order.begin(), order.end(), dev) == order.end()) order.push_back(dev);
    for (int32_t dev : order) {
      const auto it = by_device.find(dev);
      if (it != by_device.end()) stats.devices.push_back(summarize(dev, std::move(it->second)));
    }
  }
  if (!per_step) return stats;
  std::map<std::pair<int64_t, int32_t>, Activity> by_step;  // (step, dev)
  for (const Event& e : data.events)
    if ((e.type == EventType::kSpan || e.type == EventType::kTransfer) && e.step >= 0)
      by_step[{e.step, e.dev}].add(e);
  for (auto& [key, activity] : by_step)
    stats.steps.push_back({key.first, summarize(key.second, std::move(activity))});
  return stats;
}

std::string format_duration(int64_t ns) {
  const double v = static_cast<double>(ns);
  const int64_t magnitude = ns < 0 ? -ns : ns;
  if (magnitude < 1000) return fmt::format("{} ns", ns);
  if (magnitude < 1000000) return fmt::format("{:.3f} us", v / 1e3);
  if (magnitude < 1000000000) return fmt::format("{:.3f} ms", v / 1e6);
  return fmt::format("{:.3f} s", v / 1e9);
}

namespace {

std::string device_label(const TraceData& data, int32_t dev) {
  const TraceDeviceInfo* d = data.device(dev);
  return d != nullptr ? d->name : fmt::format("dev {}", dev);
}

void append_row(std::string& out, std::string_view first, const DeviceStats& s) {
  fmt::format_to(std::back_inserter(out),
                 "{:<10} {:>12} {:>12} {:>12} {:>12} {:>13} {:>12} {:>12} {:>8.1f}%\n", first,
                 format_duration(s.span_ns), format_duration(s.busy_ns), format_duration(s.compute_ns),
                 format_duration(s.comm_ns), format_duration(s.exposed_comm_ns), format_duration(s.idle_ns),
                 format_duration(s.copy_ns), s.overlap_pct);
}

void append_heading(std::string& out, std::string_view first) {
  fmt::format_to(std::back_inserter(out), "{:<10} {:>12} {:>12} {:>12} {:>12} {:>13} {:>12} {:>12} {:>9}\n",
                 first, "span", "busy", "compute", "comm", "exposed comm", "idle", "copy", "overlap");
}

}  // namespace

std::string format_stats(const TraceStats& stats, const TraceData& data, bool per_step) {
  std::string out;
  if (stats.devices.empty()) return "no spans or transfers in this trace\n";
  append_heading(out, "device");
  for (const DeviceStats& s : stats.devices) append_row(out, device_label(data, s.dev), s);
  if (per_step && !stats.steps.empty()) {
    out += '\n';
    append_heading(out, "step/dev");
    for (const StepStats& s : stats.steps) {
      append_row(out, fmt::format("{} {}", s.step, device_label(data, s.stats.dev)), s.stats);
    }
  }
  return out;
}

}  // namespace dpscope::trace
