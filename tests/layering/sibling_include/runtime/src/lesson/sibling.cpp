// A fixture for the test `layering_check_refuses_sibling_include`: lesson and core both sit on the
// trace layers, side by side, and neither lists the other among its DEPS, so lesson may not
// include core (though a straight line of layers once put core above it). Never compiled;
// cmake/CheckLayers.cmake must report the include of core, not those of trace_tools (a DEP) or base
// (a DEP of a DEP).
#include "dpscope/base/error.hpp"
#include "dpscope/core/device.hpp"
#include "dpscope/trace_tools/reader.hpp"
