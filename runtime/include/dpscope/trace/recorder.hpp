// TraceRecorder: writes a dpscope trace (JSON Lines, docs/trace-format.md) while a run executes.
//
// The first line is the header (format version, clock kind, run configuration, devices, links,
// parameters, buckets); every following line is one event. Events are formatted on the calling
// thread and appended to a shared buffer under a mutex; flush() (called by training loops once per
// step, and by close()) writes whole lines only, so a live reader never sees half an event except
// while the OS is writing it. With no recorder attached, devices skip tracing at the cost of one
// pointer test.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dpscope/core/device.hpp"
#include "dpscope/core/tensor.hpp"
#include "dpscope/core/timing.hpp"

namespace dpscope {

inline constexpr int kTraceFormatMajor = 1;
inline constexpr int kTraceFormatMinor = 0;
inline constexpr const char* kTraceFormatName = "dpscope-trace";

struct TraceDeviceInfo {
  int id = 0;
  std::string name;      // "sim:0", "cpu", "host"
  std::string kind;      // "sim", "cpu", "cuda", "host"
  std::string hardware;  // preset display name
  uint64_t memory_bytes = 0;
  double peak_flops = 0.0;
  double mem_bandwidth_bytes_per_s = 0.0;
};

struct TraceLinkInfo {
  int src = 0;  // device ids
  int dst = 0;
  std::string kind;
  double bandwidth_bytes_per_s = 0.0;  // per direction
  double latency_ns = 0.0;
};

struct TraceParamInfo {
  int index = 0;
  std::string name;  // "0.weight"
  Shape shape;
  uint64_t bytes = 0;
};

struct TraceBucketInfo {
  int id = 0;
  std::vector<int> params;  // parameter indices, in the order they are packed
  uint64_t bytes = 0;
};

struct TraceHeader {
  std::string clock = "simulated";  // or "measured"
  std::string run_json = "{}";      // the run configuration, a JSON object
  std::vector<TraceDeviceInfo> devices;
  std::vector<TraceLinkInfo> links;
  std::vector<TraceParamInfo> params;
  std::vector<TraceBucketInfo> buckets;

  // Adds `device` (and, for the first simulated device, the host with its PCIe links) and
  // returns its id. Devices are numbered in the order they are added.
  int add_device(const Device& device);
  // The id of the host entry, or -1 when no simulated device was added.
  int host_id() const { return host_id_; }

 private:
  int host_id_ = -1;
};

class TraceRecorder {
 public:
  // Opens `path` for writing, writes the header line and attaches to `devices`; each one's trace id
  // is that of the header entry with its name (added with TraceHeader::add_device).
  static std::unique_ptr<TraceRecorder> open(const std::filesystem::path& path, const TraceHeader& header,
                                             std::span<const Device> devices);
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int host_id() const { return host_id_; }
  uint64_t events_written() const { return events_.load(std::memory_order_relaxed); }

  // ---- events (every one is stamped with the device's rank, step and phase) ----
  void kernel_span(const Device& device, StreamKind stream, std::string_view name, int64_t ts_ns,
                   int64_t dur_ns, KernelCost cost);
  // `args_json`: empty or a JSON object rendered by the caller.
  void span(const Device& device, StreamKind stream, std::string_view name, std::string_view cat,
            int64_t ts_ns, int64_t dur_ns, std::string_view args_json = {});
  void instant(const Device& device, std::string_view name, int64_t ts_ns, std::string_view args_json = {});
  void counter(const Device& device, std::string_view name, int64_t ts_ns,
               std::span<const std::pair<std::string_view, double>> values);
  void memory_counter(const Device& device, int64_t ts_ns, const MemoryStats& memory);

  struct Transfer {
    int src = 0;  // device trace ids
    int dst = 0;
    uint64_t bytes = 0;
    int64_t ts_ns = 0;
    int64_t dur_ns = 0;
    StreamKind stream = StreamKind::kCopy;
    std::string_view name = "copy";
    int64_t collective = -1;  // the group's sequence number, -1 for plain copies
    std::string_view algo;    // "ring", "tree", ... (empty for copies)
    int algo_step = -1;
    int chunk = -1;
  };
  // A transfer stamped by `device` (the rank that issues it); returns its flow id.
  uint64_t transfer(const Device& device, const Transfer& transfer);
  // A host<->device or device<->device copy made by Tensor::to().
  void copy_transfer(const Device& src, const Device& dst, int64_t ts_ns, int64_t dur_ns, uint64_t bytes);

  // A few values of a tensor (e.g. a gradient before and after all-reduce) and its L2 norm.
  // `when` is a short tag: "local", "before_reduce", "after_reduce", "after_step".
  void values(const Device& device, std::string_view name, int64_t ts_ns, int param, std::string_view when,
              std::span<const float> values, double norm);
  // The dataset indices `device` holds in the current step.
  void samples(const Device& device, int64_t ts_ns, std::span<const int64_t> indices);
  // A (new) bucket assignment: `reason` is "initial" or "rebuilt".
  void buckets(const Device& device, int64_t ts_ns, std::span<const TraceBucketInfo> buckets,
               std::string_view reason);

  void flush();
  void close();

 private:
  TraceRecorder(std::filesystem::path path, std::FILE* file, int host_id);
  void begin_event(fmt::memory_buffer& out, std::string_view type, const Device& device, int64_t ts_ns) const;
  void commit(const fmt::memory_buffer& line);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  int host_id_ = -1;
  std::vector<Device> devices_;  // attached; detached again by close()
  std::mutex mutex_;
  fmt::memory_buffer pending_;
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> next_flow_{1};
};

// Appends `text` to `out` as a JSON string literal (quotes and escapes included).
void append_json_string(fmt::memory_buffer& out, std::string_view text);
// Appends a JSON number (finite values in shortest round-trip form; NaN/inf as null).
void append_json_number(fmt::memory_buffer& out, double value);

}  // namespace dpscope
