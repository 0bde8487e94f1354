// --bench-knobs N with --lesson ID: how long a knob change takes before the student sees the new
// run. N times, a fresh lesson viewer opens the lesson at its defaults, then turns each knob to
// another value and back, doing what the lesson panel does: the lesson run again as a child
// `dpscope lesson run` (the runs the knob changes; the others' traces are reused), its text
// evaluated on the new traces, and the trace loaded and indexed by the replay model. Prints one row
// per knob: the change to a new value, and the way back to the default.
#pragma once

#include "app/lesson_mode.hpp"

namespace dpscope::viz {

// Returns the process exit code: 0, or 1 when a run fails (its error is printed).
int run_knob_bench(const LessonModeOptions& options, int rounds);

}  // namespace dpscope::viz
