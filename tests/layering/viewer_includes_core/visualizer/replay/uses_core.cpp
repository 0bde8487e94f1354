// A fixture for the test `layering_check_refuses_viewer_includes_core`: the viewer's replay model
// reads traces (trace_tools) and may not include core. Never compiled; cmake/CheckLayers.cmake
// must report the include of core, not that of trace_tools.
#include "dpscope/core/device.hpp"
#include "dpscope/trace_tools/reader.hpp"
