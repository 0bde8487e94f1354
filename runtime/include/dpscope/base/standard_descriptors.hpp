// The standard descriptors of a program, at its start and at its end.
//
// At the start: a program started with descriptor 0, 1 or 2 closed (`dpscope ... >&-`) gives the
// first file it opens that number: what it then prints goes into that file (a trace being recorded,
// a rank's pipe, a screenshot). hold_closed_standard_descriptors(), first thing in main(), fills each
// closed one with /dev/null opened read-only: nothing else lands there, and a write still fails
// (EBADF), which the check at the end reports.
//
// At the end: what a program printed is its result (a report, a table), and a full disk or a closed
// stdout loses it while the program exits 0. check_standard_output_written() makes that a failure.
#pragma once

#include <string_view>

#include "dpscope/base/error.hpp"

namespace dpscope {

void hold_closed_standard_descriptors();

// The error of output that did not reach its file: kWriteFailed (exit code 1), "cannot write
// standard output: No space left on device (what it shows is incomplete)". `stream` names it
// ("standard output", "standard error", a rank's stream), `err` is the failed write's errno (0:
// unknown), `what` says what the loss means.
Error output_lost(std::string_view stream, int err, std::string_view what);

// Throws output_lost("standard output", ...) unless everything printed to stdout reached it: the
// last of it is flushed here, and an earlier write that failed left stdio's error flag set.
void check_standard_output_written(std::string_view what = "what it shows is incomplete");

}  // namespace dpscope
