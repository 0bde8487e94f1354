// The one line a rank of a multi-process job prints when its launcher (mpirun, dpscope launch)
// stops it with SIGTERM, and what keeps that line true.
//
// A launcher stops every rank once one fails. A rank stopped so says why ("rank 1 was stopped by
// SIGTERM: its launcher stops every rank when one fails"). But a rank that failed itself tells
// its peers first and prints its error after, while its stack unwinds: a peer told of the error
// may fail and be reaped before that, and the launcher's SIGTERM then arrives in the failing rank
// too. Its line must then be its own error, not "stopped". So a process that has its own error
// says so before it tells its peers (own_error_on_termination), and the handler prints that.
//
// The handler only write()s a line prepared beforehand, then ends the process as SIGTERM would.
#pragma once

#include <string_view>

namespace dpscope {

// From now on a SIGTERM writes `line` (ending in '\n'; at most 1 KiB is kept) to stderr, then ends
// the process with SIGTERM's default action.
void arm_termination_notice(std::string_view line);
// The process has its own error: a SIGTERM from now on writes "dpscope: error: <message>\n"
// instead (only once armed; a process that is no rank of a job prints nothing extra).
void own_error_on_termination(std::string_view message);
// The process is about to print its error itself and exit: a SIGTERM from now on is ignored (the
// line is printed once, whole, by the process, and its exit status is its own).
void hold_termination();

}  // namespace dpscope
