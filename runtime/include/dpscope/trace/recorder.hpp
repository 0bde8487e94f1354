// TraceRecorder: writes a dpscope trace (JSON Lines, docs/trace-format.md) while a run executes.
//
// The first line is the header (format version, clock kind, run configuration, devices, links,
// parameters, buckets); every following line is one event. Events are formatted on the calling
// thread and appended to a shared buffer under a mutex. The file is written by a thread of the
// recorder's own (trace/background_writer.hpp), whole lines only, so a live reader never sees half
// an event except while the OS is writing it: flush_soon() (training loops, once per step) hands
// the lines over and returns; flush() also waits until they are in the file. A path ending in
// ".zst" is written zstd-compressed (trace_tools/compressed.hpp): each flush ends a zstd block, so
// a live reader can decode all that was flushed, and close() ends the frame. With no recorder
// attached, devices skip tracing at the cost of one pointer test.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dpscope/core/device.hpp"
#include "dpscope/core/tensor.hpp"
#include "dpscope/core/timing.hpp"
#include "dpscope/core/trace_sink.hpp"
#include "dpscope/trace_format/events.hpp"
#include "dpscope/trace_format/schema.hpp"
#include "dpscope/trace_tools/compressed.hpp"
#include "dpscope/trace_tools/json_text.hpp"

namespace dpscope {

namespace trace {
class BackgroundWriter;
}

// Adds `device` to `header` (and, for the first simulated device, the host) with its PCIe link to
// the host, and returns its id. Devices are numbered in the order they are added. Links between
// GPUs come from the topology: call add_network_links (comm/network.hpp) once all are added.
int add_trace_device(TraceHeader& header, const Device& device);

// Appends the header line of a trace (no newline): the recorder's first line, and the merged
// header of `dpscope trace merge` (trace/merge.hpp).
void append_trace_header(fmt::memory_buffer& out, const TraceHeader& header);

class TraceRecorder final : public TraceSink {
 public:
  // Opens `path` for writing, writes the header line and attaches to `devices`; each one's trace id
  // is that of the header entry with its name (added with add_trace_device).
  static std::unique_ptr<TraceRecorder> open(const std::filesystem::path& path, const TraceHeader& header,
                                             std::span<const Device> devices);
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int host_id() const { return host_id_; }
  uint64_t events_written() const { return events_.load(std::memory_order_relaxed); }

  // ---- TraceSink: events, each stamped with the device's rank, step and phase ----
  void kernel_span(const Device& device, StreamKind stream, std::string_view name, int64_t ts_ns,
                   int64_t dur_ns, KernelCost cost) override;
  void span(const Device& device, const SpanEvent& span) override;
  void instant(const Device& device, int64_t ts_ns, const InstantPayload& payload) override;
  void loss_counter(const Device& device, int64_t ts_ns, double loss) override;
  void memory_counter(const Device& device, int64_t ts_ns, const MemoryStats& memory) override;
  // A transfer; "src_rank"/"dst_rank" are written only when set (an mpi rank's transfer to a peer
  // process, whose device id refers to that rank's own file).
  uint64_t transfer(const Device& device, const TraceTransfer& transfer) override;
  void copy_transfer(const Device& src, const Device& dst, int64_t ts_ns, int64_t dur_ns,
                     uint64_t bytes) override;
  void values(const Device& device, int64_t ts_ns, const ValuesEvent& values) override;
  // "epoch" is written only when known.
  void samples(const Device& device, int64_t ts_ns, std::span<const int64_t> indices,
               std::optional<int64_t> epoch) override;
  void buckets(const Device& device, int64_t ts_ns, std::span<const TraceBucketInfo> buckets,
               BucketReason reason) override;

  // The lines so far are in the file (and, zstd, a block is ended) when this returns.
  void flush() override;
  // Hands the lines so far to the writing thread, which writes and flushes them at once. Throws
  // kWriteFailed when an earlier write failed (disk full), so a run stops at its next step.
  void flush_soon() override;
  // Detaches the devices, writes every line and closes the file; throws kWriteFailed with the
  // system's reason ("No space left on device") when writing failed.
  void close();

 private:
  TraceRecorder(std::filesystem::path path, std::unique_ptr<trace::TraceFileWriter> file, int host_id);
  void begin_event(fmt::memory_buffer& out, EventType type, const Device& device, int64_t ts_ns) const;
  void counter(const Device& device, EventName name, int64_t ts_ns,
               std::span<const std::pair<std::string_view, double>> values);
  void commit(const fmt::memory_buffer& line);

  std::filesystem::path path_;
  std::unique_ptr<trace::BackgroundWriter> writer_;  // null once closed
  int host_id_ = -1;
  std::vector<Device> devices_;  // attached; detached again by close()
  std::mutex mutex_;             // pending_ and writer_
  std::string pending_;          // lines not handed to the writer yet
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> next_flow_{1};
};

}  // namespace dpscope
