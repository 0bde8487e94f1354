// Export of a dpscope trace to Chrome Trace Event JSON, which opens in https://ui.perfetto.dev and
// chrome://tracing. Used by `dpscope trace export --chrome IN OUT`.
//
// Layout (docs/trace-format.md, "Chrome / Perfetto export"):
//  * one process per device, pid = header id + 1 (Perfetto treats pid 0 as the kernel's idle task),
//    named "sim:0 · NVIDIA H100 SXM5 80GB" and sorted by id;
//  * one thread per stream: tid 1 compute, 2 comm, 3 copy. Slices on one Chrome thread must nest,
//    so a slice that would partly overlap another moves to an extra lane of the same stream
//    (tid + 10·k, named "comm #2", ...): e.g. the host's copy lane when it feeds several GPUs at once;
//  * span → "X" (ts/dur in µs with up to 3 decimals; args keep the numeric args plus step, phase, rank);
//  * transfer → an "X" slice on the sender's stream lane from ts to ts+dur, a 1 ns "X" receive slice
//    on the receiver's lane of that stream at ts+dur, and a flow from the first to the second
//    ("s" at ts, "f" with "bp":"e" at ts+dur, id = the trace's flow id);
//  * counter → "C" per device (memory by category, loss); NaN values are left out;
//  * instant → "i" with thread scope on the compute lane; values, samples and buckets events become
//    instants too, their numbers in args, so they are visible and inspectable.
#pragma once

#include <filesystem>
#include <ostream>

#include "dpscope/trace_tools/reader.hpp"

namespace dpscope::trace {

// The Chrome ids of a device's process and of a stream's (first) lane.
inline int chrome_pid(int32_t device_id) { return device_id + 1; }
inline int chrome_tid(StreamKind stream) { return static_cast<int>(stream) + 1; }
inline constexpr int kChromeExtraLaneTidStep = 10;  // lane k of a stream has tid chrome_tid + 10·k

// Writes `data` as one Chrome Trace Event JSON object. Throws Error(kIo) if the stream fails.
void export_chrome(const TraceData& data, std::ostream& out);
// Same, to `path`, atomically: written to a temporary file next to it and renamed over it, so a
// reader never sees half a file. Throws Error(kIo) naming the path when it cannot be written.
void export_chrome(const TraceData& data, const std::filesystem::path& path);

}  // namespace dpscope::trace
