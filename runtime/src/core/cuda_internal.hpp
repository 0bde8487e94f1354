// What the cuda and no_cuda builds of core/cuda.hpp share (private to core): the checks of a
// make_devices() request that come before any question to the driver, and the trace context a
// thread's TraceContextScope put in place.
#pragma once

#include "dpscope/core/cuda.hpp"

namespace dpscope::cuda::detail {

// Throws kInvalidArgument "--devices N: need at least one cuda device" for a count below 1.
void check_options(const LogicalGpuOptions& options);

// The trace context a TraceContextScope set on this thread for `device` (a DeviceImpl), or nullptr.
TraceContext* thread_trace_context(const void* device);

}  // namespace dpscope::cuda::detail
