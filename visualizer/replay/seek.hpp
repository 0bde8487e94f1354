// Seek positions given on the command line (`--seek POS`) and time/size formatting shared by the
// views: POS is a fraction of the trace (`0.5`), a training step (`step:N`, its first event) or an
// event (`event:K`, after the K-th event in time order, 0-based). No GL, no ImGui.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "replay/replay_model.hpp"

namespace dpscope::viz {

struct SeekSpec {
  enum class Kind { kFraction, kStep, kEvent, kTime };
  Kind kind = Kind::kFraction;
  double fraction = 1.0;
  int64_t step = 0;
  int64_t event = 0;
  int64_t t_ns = 0;  // kTime: a time on the trace's clock (what the viewer shows as t = ...)
};

// Parses POS; throws Error(kUsage) naming the text and the accepted forms.
SeekSpec parse_seek(std::string_view text);
// The cursor for `spec` in `model`; throws Error(kUsage) when the step or event is not in the trace.
Cursor resolve_seek(const ReplayModel& model, const SeekSpec& spec);

// How the timeline opens on a trace (`--zoom Z`): on the training step under the playhead (`step`,
// the default: one step fills the width, so its kernels and transfers are readable), the whole
// trace (`fit`), or a window of a given length around the playhead (`500us`, `2ms`, `1.5s`, `800ns`).
struct ZoomSpec {
  enum class Kind { kStep, kFit, kDuration };
  Kind kind = Kind::kStep;
  int64_t duration_ns = 0;
};
// Parses Z; throws Error(kUsage) naming the text and the accepted forms.
ZoomSpec parse_zoom(std::string_view text);
// The time range [first, second) a timeline shows for `spec` with the playhead at `cursor` in
// `model` (a trace without training steps opens fitted).
std::pair<double, double> zoom_range(const ReplayModel& model, const ZoomSpec& spec, const Cursor& cursor,
                                     int64_t cursor_step);

// "WxH" (e.g. "1600x900"), each in [64, 16384]; throws Error(kUsage).
struct PixelSize {
  int width = 0;
  int height = 0;
};
PixelSize parse_size(std::string_view text);

// "0 ns", "850 ns", "12.35 µs", "4.500 ms", "2.000 s": 4 significant digits, unit chosen by size.
std::string format_time(int64_t ns);
// The same with an explicit sign for deltas: "+1.20 µs".
std::string format_duration(int64_t ns);
// A traced tensor value in 3 significant digits with its sign, so small gradients stay readable
// ("+0.000123" as "+1.23e-04", "-0.0457", "+12.3"); an exact zero is "0" (a ReLU that let nothing
// through), never a rounded "+0.0000" that hides a non-zero value. `digits`: 3 to 6 significant
// digits.
std::string format_value(double v, int digits = 3);
// The fewest significant digits, from 3 to 6, at which values that differ are written
// differently: the review found two ranks' gradients both shown as -0.312 (they differed in the
// fourth digit), so averaging looked like it changed nothing. The inspector uses one count per
// column of its table.
int distinguishing_digits(const std::vector<double>& values);

}  // namespace dpscope::viz
