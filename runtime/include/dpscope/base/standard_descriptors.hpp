// A program started with descriptor 0, 1 or 2 closed (`dpscope ... >&-`) gives the first file it
// opens that number: what it then prints goes into that file (a trace being recorded, a rank's pipe,
// a screenshot). hold_closed_standard_descriptors(), first thing in main(), fills each closed one
// with /dev/null opened read-only: nothing else lands there, and a write still fails (EBADF), which
// the program's check of its output reports.
#pragma once

namespace dpscope {

void hold_closed_standard_descriptors();

}  // namespace dpscope
