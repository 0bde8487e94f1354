// Knob-change benchmark (knob_bench.hpp).
#include "app/knob_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "dpscope/base/terminal_text.hpp"
#include "replay/document.hpp"

namespace dpscope::viz {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A value the knob allows that is not its default: the next step up (down at the top of the
// range), or the first other choice. "" when the knob has no other value.
std::string other_value(const lesson::Knob& knob) {
  if (!knob.numeric) {  // choices, a switch's "off" and "on" among them
    for (const std::string& c : knob.choices)
      if (c != knob.default_value) return c;
    return "";
  }
  const double value = std::stod(knob.default_value);
  const double next = value + knob.step <= knob.max ? value + knob.step : value - knob.step;
  const std::string text = fmt::format("{:g}", next);
  return knob.check(text).empty() ? text : "";
}

// One knob change, split the way a student waits for it.
struct Reload {
  double run_s = 0;     // the child `dpscope lesson run` (scenario and comparison runs)
  double script_s = 0;  // the lesson's text evaluated on the new traces
  double load_s = 0;    // the trace read and indexed for the replay
  double total() const { return run_s + script_s + load_s; }
};

struct Row {
  std::string knob;
  std::string change;
  std::vector<Reload> to_new;   // the knob turned to a value this viewer has not run yet
  std::vector<Reload> to_seen;  // and back to its default, run before
};

double mean_of(const std::vector<Reload>& rs, double (*part)(const Reload&)) {
  double sum = 0;
  for (const Reload& r : rs) sum += part(r);
  return rs.empty() ? 0 : sum / static_cast<double>(rs.size());
}

double max_total(const std::vector<Reload>& rs) {
  double max = 0;
  for (const Reload& r : rs) max = std::max(max, r.total());
  return max;
}

}  // namespace

int run_knob_bench(const LessonModeOptions& options, int rounds) {
  std::vector<Row> rows;
  std::string id;
  for (int round = 0; round < rounds; ++round) {
    // A fresh viewer each round: its first run at the defaults (as when the lesson opens), then
    // each knob turned to another value (a run this viewer has not made) and back (one it has).
    LessonMode mode(options);
    id = mode.lesson().id;
    auto reload = [&](const std::map<std::string, std::string>& knobs, Reload& r) {
      const auto start = Clock::now();
      const LessonRun run = mode.run(knobs);
      const double total = seconds_since(start);
      if (!run.error.empty()) {
        fmt::print(stderr, "dpscope-viz: error: {}\n",
                   printable_line(fmt::format("lesson {}: {}", id, run.error)));
        return false;
      }
      r.run_s = run.seconds;
      r.script_s = total - run.seconds;
      const auto load_start = Clock::now();
      const std::unique_ptr<Document> doc = Document::open(run.trace, OpenOptions{.strict = true});
      r.load_s = seconds_since(load_start);
      if (!doc->error().empty()) {
        fmt::print(stderr, "dpscope-viz: error: {}\n", printable_line(doc->error()));
        return false;
      }
      return true;
    };
    Reload opened;
    if (!reload(mode.knobs(), opened)) return 1;
    size_t row = 0;
    for (const lesson::Knob& knob : mode.lesson().knobs) {
      const std::string value = other_value(knob);
      if (value.empty()) continue;
      if (round == 0) rows.push_back({knob.flag, fmt::format("{} -> {}", knob.default_value, value), {}, {}});
      std::map<std::string, std::string> changed = mode.knobs();
      changed[knob.flag] = value;
      Reload to_new;
      Reload to_seen;
      if (!reload(changed, to_new) || !reload(mode.knobs(), to_seen)) return 1;
      rows[row].to_new.push_back(to_new);
      rows[row].to_seen.push_back(to_seen);
      ++row;
    }
  }

  fmt::print("dpscope-viz knob benchmark: lesson {} ({} knob{}, {} round{})\n", printable_line(id),
             rows.size(), rows.size() == 1 ? "" : "s", rounds, rounds == 1 ? "" : "s");
  fmt::print("{:<14} {:<18} {:>10} {:>10} {:>10} {:>10} {:>11}\n", "knob", "change", "run s", "text+load s",
             "mean s", "max s", "back s");
  double slowest = 0;
  for (const Row& r : rows) {
    slowest = std::max(slowest, max_total(r.to_new));
    fmt::print("{:<14} {:<18} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.3f}\n", printable_line(r.knob),
               printable_line(r.change), mean_of(r.to_new, [](const Reload& x) { return x.run_s; }),
               mean_of(r.to_new, [](const Reload& x) { return x.script_s + x.load_s; }),
               mean_of(r.to_new, [](const Reload& x) { return x.total(); }), max_total(r.to_new),
               mean_of(r.to_seen, [](const Reload& x) { return x.total(); }));
  }
  if (rows.empty()) {
    fmt::print("(the lesson has no knob to turn)\n");
  } else {
    fmt::print(
        "slowest change to a new value: {:.3f} s (wall time from the knob's release to the loaded "
        "trace; back s: returning to the default, whose runs the viewer has made)\n",
        slowest);
  }
  return 0;
}

}  // namespace dpscope::viz
