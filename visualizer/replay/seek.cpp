// --seek / --size parsing and time formatting.
#include "replay/seek.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "dpscope/base/error.hpp"

namespace dpscope::viz {

namespace {

bool parse_int(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

// A duration with its unit (800ns, 155.7us, 2ms, 1.5s) in nanoseconds; nullopt without a unit, and
// throws `fail(why)` for a bad number.
template <typename Fail>
std::optional<double> parse_duration_ns(std::string_view text, Fail fail) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  for (const auto& [unit, ns_per_unit] : kUnits) {
    if (!text.ends_with(unit)) continue;
    const std::string number(text.substr(0, text.size() - unit.size()));
    if (number.empty() ||
        (unit == "s" && (number.back() == 'n' || number.back() == 'u' || number.back() == 'm')))
      continue;  // "ns", "us", "ms" end with "s" too: their own entries match them
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size() || !std::isfinite(value)) throw fail("not a number");
    return value * ns_per_unit;
  }
  return std::nullopt;
}

SeekSpec parse_seek(std::string_view text) {
  SeekSpec spec;
  auto fail = [&](std::string_view why) {
    return Error(ErrorKind::kUsage,
                 fmt::format("--seek '{}': {}; expected a fraction 0..1, step:N, event:K or t:TIME (e.g. "
                             "t:155.7us)",
                             text, why));
  };
  if (text.starts_with("t:")) {
    spec.kind = SeekSpec::Kind::kTime;
    const std::optional<double> ns = parse_duration_ns(text.substr(2), fail);
    if (!ns) throw fail("the time has no unit (ns, us, ms or s)");
    if (!(*ns >= 0.0 && *ns <= 1e18)) throw fail("the time is outside 0 .. 31 years");
    spec.t_ns = static_cast<int64_t>(std::llround(*ns));
    return spec;
  }
  if (text.starts_with("step:")) {
    spec.kind = SeekSpec::Kind::kStep;
    // Steps count from 1 here as on the screen: step:1 is the trace's "step":0.
    if (!parse_int(text.substr(5), spec.step) || spec.step < 1)
      throw fail("the step is not a positive integer (steps count from 1, as the viewer shows them)");
    spec.step -= 1;
    return spec;
  }
  if (text.starts_with("event:")) {
    spec.kind = SeekSpec::Kind::kEvent;
    if (!parse_int(text.substr(6), spec.event) || spec.event < 0)
      throw fail("the event is not a non-negative integer");
    return spec;
  }
  const std::string copy(text);
  char* end = nullptr;
  const double f = copy.empty() ? NAN : std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(f)) throw fail("not a number");
  if (f < 0.0 || f > 1.0) throw fail("the fraction is outside 0..1");
  spec.fraction = f;
  return spec;
}

ZoomSpec parse_zoom(std::string_view text) {
  if (text == "step") return {};
  if (text == "fit") return {.kind = ZoomSpec::Kind::kFit};
  auto fail = [&](std::string_view why) {
    return Error(ErrorKind::kUsage,
                 fmt::format("--zoom '{}': {}; expected step, fit or a duration like 500us, "
                             "2ms, 1.5s, 800ns",
                             text, why));
  };
  const std::optional<double> ns = parse_duration_ns(text, fail);
  if (!ns) throw fail("no unit");
  if (!(*ns >= 20.0 && *ns <= 1e15)) throw fail("the duration is outside 20 ns .. 11 days");
  return {.kind = ZoomSpec::Kind::kDuration, .duration_ns = static_cast<int64_t>(std::llround(*ns))};
}

std::pair<double, double> zoom_range(const ReplayModel& model, const ZoomSpec& spec, const Cursor& cursor,
                                     int64_t cursor_step) {
  const double begin = static_cast<double>(model.begin_ns());
  const double end = static_cast<double>(model.end_ns());
  const double span = std::max(end - begin, 1.0);
  const std::pair<double, double> fitted{begin - span * 0.005, end + span * 0.005};
  switch (spec.kind) {
    case ZoomSpec::Kind::kFit: return fitted;
    case ZoomSpec::Kind::kDuration: {
      const double w = static_cast<double>(spec.duration_ns);
      const double t = static_cast<double>(cursor.t_ns);
      return {t - w * 0.5, t + w * 0.5};
    }
    case ZoomSpec::Kind::kStep: break;
  }
  if (model.first_step() > model.last_step()) return fitted;
  const int64_t step =
      std::clamp(cursor_step < 0 ? model.first_step() : cursor_step, model.first_step(), model.last_step());
  const auto [a, b] = model.step_window(step);
  const double w = std::max(static_cast<double>(b - a), 1.0);
  return {static_cast<double>(a) - w * 0.01, static_cast<double>(b) + w * 0.01};
}

Cursor resolve_seek(const ReplayModel& model, const SeekSpec& spec) {
  switch (spec.kind) {
    case SeekSpec::Kind::kFraction: return model.at_fraction(spec.fraction);
    case SeekSpec::Kind::kStep: {
      if (auto c = model.step_start(spec.step)) return *c;
      if (model.last_step() < model.first_step())
        throw Error(ErrorKind::kUsage,
                    fmt::format("--seek step:{}: the trace has no training steps", shown_count(spec.step)));
      throw Error(ErrorKind::kUsage,
                  fmt::format("--seek step:{}: the trace has steps {}..{}", shown_count(spec.step),
                              shown_count(model.first_step()), shown_count(model.last_step())));
    }
    case SeekSpec::Kind::kTime:
      if (spec.t_ns < model.begin_ns() || spec.t_ns > model.end_ns())
        throw Error(ErrorKind::kUsage,
                    fmt::format("--seek t:{}: the trace runs from {} to {}", format_time(spec.t_ns),
                                format_time(model.begin_ns()), format_time(model.end_ns())));
      return model.at_time(spec.t_ns);
    case SeekSpec::Kind::kEvent:
      // A trace of no events has no event:0 ("the trace has 0 events (event:0..0)" named one).
      if (model.event_count() == 0)
        throw Error(ErrorKind::kUsage, fmt::format("--seek event:{}: the trace has no events", spec.event));
      if (static_cast<uint64_t>(spec.event) >= model.event_count())
        throw Error(ErrorKind::kUsage, fmt::format("--seek event:{}: the trace has {} events (event:0..{})",
                                                   spec.event, model.event_count(), model.event_count() - 1));
      return model.after_event(static_cast<size_t>(spec.event));
  }
  return model.end();
}

PixelSize parse_size(std::string_view text) {
  const size_t x = text.find('x');
  int64_t w = 0;
  int64_t h = 0;
  if (x == std::string_view::npos || !parse_int(text.substr(0, x), w) || !parse_int(text.substr(x + 1), h))
    throw Error(ErrorKind::kUsage,
                fmt::format("--size '{}': expected WIDTHxHEIGHT in pixels, e.g. 1600x900", text));
  if (w < 64 || h < 64 || w > 16384 || h > 16384)
    throw Error(ErrorKind::kUsage,
                fmt::format("--size '{}': each side must be between 64 and 16384 pixels", text));
  // A frame is drawn in software under xvfb-run: 8192x8192 took 21 s and 1.5 GB on the 2-core
  // development machine, 16384x16384 did not end in 30 s.
  constexpr int64_t kMaxPixels = int64_t{8192} * 8192;
  if (w * h > kMaxPixels)
    throw Error(ErrorKind::kUsage,
                fmt::format("--size '{}': {} pixels is more than a frame holds ({}, 8192x8192)", text, w * h,
                            kMaxPixels));
  return {static_cast<int>(w), static_cast<int>(h)};
}

std::string format_time(int64_t ns) {
  const double v = static_cast<double>(ns);
  const double a = std::fabs(v);
  auto digits = [](double x) { return x >= 100 ? 1 : (x >= 10 ? 2 : 3); };
  if (a < 1e3) return fmt::format("{} ns", ns);
  if (a < 1e6) return fmt::format("{:.{}f} µs", v / 1e3, digits(a / 1e3));
  if (a < 1e9) return fmt::format("{:.{}f} ms", v / 1e6, digits(a / 1e6));
  return fmt::format("{:.{}f} s", v / 1e9, digits(a / 1e9));
}

std::string format_duration(int64_t ns) {
  return fmt::format("{}{}", ns >= 0 ? "+" : "-", format_time(ns >= 0 ? ns : -ns));
}

std::string format_value(double v, int digits) {
  digits = std::clamp(digits, 3, 6);
  if (v == 0.0) return "0";
  if (!std::isfinite(v)) return fmt::format("{}", v);
  const double magnitude = std::fabs(v);
  if (magnitude >= 1e-3 && magnitude < 1e4) return fmt::format("{:+#.{}g}", v, digits);
  return fmt::format("{:+.{}e}", v, digits - 1);
}

int distinguishing_digits(const std::vector<double>& values) {
  for (int digits = 3; digits < 6; ++digits) {
    bool apart = true;
    for (size_t i = 0; i < values.size() && apart; ++i)
      for (size_t j = i + 1; j < values.size() && apart; ++j)
        apart = values[i] == values[j] || format_value(values[i], digits) != format_value(values[j], digits);
    if (apart) return digits;
  }
  return 6;
}

}  // namespace dpscope::viz
