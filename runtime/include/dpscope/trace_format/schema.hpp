// The trace contract's vocabulary as plain data: the serialized enums (stream, phase, memory
// category), the format's name and version, and the header (devices, links, parameters, buckets).
//
// This layer (schema and events, the vocabulary core needs) depends on nothing of ours but base/:
// the recorder (trace/) writes these types, and the reader (trace_tools/reader.hpp, the layer above
// that reads, merges and exports traces) returns them to the CLI, lessons and the visualizer.
// docs/trace-format.md is the human contract and must agree with this header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dpscope {

inline constexpr int kTraceFormatMajor = 1;
inline constexpr int kTraceFormatMinor = 0;
inline constexpr const char* kTraceFormatName = "dpscope-trace";

// The stream a span or transfer ran on. Serialized as "compute", "comm", "copy".
enum class StreamKind : uint8_t { kCompute, kComm, kCopy };
inline constexpr int kStreamCount = 3;
const char* to_string(StreamKind stream);

// What device memory holds. Serialized as the keys of a memory counter.
enum class MemoryCategory : uint8_t { kParameters, kGradients, kOptimizerState, kActivations, kBuffers };
inline constexpr int kMemoryCategoryCount = 5;
const char* to_string(MemoryCategory category);

// What the training loop is doing; stamped on every event. Serialized as "none", "data", ...
enum class Phase : uint8_t { kNone, kData, kForward, kBackward, kOptimizer, kCheckpoint };
const char* to_string(Phase phase);

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
  std::string name;            // "0.weight"
  std::vector<int64_t> shape;  // [out, in]
  uint64_t bytes = 0;
};

struct TraceBucketInfo {
  int id = 0;
  std::vector<int> params;  // parameter indices, in the order they are packed
  uint64_t bytes = 0;
};

// The cluster a timing-only run modelled when its world spans more than one node (header field
// "cluster", docs/trace-format.md "The cluster"): node k holds ranks [k*gpus_per_node,
// (k+1)*gpus_per_node); inside a node the GPUs meet over `intra`; GPU i of every node reaches GPU i
// of every other node through rail i (its own NIC: a rail-optimized fabric).
struct TraceClusterInfo {
  int nodes = 0;
  int gpus_per_node = 0;
  std::string intra_topology;                // "nvswitch", "pcie-host", ...
  std::string intra_link;                    // "nvlink4", ...
  double intra_bandwidth_bytes_per_s = 0.0;  // one GPU's, per direction (line rate)
  double intra_latency_ns = 0.0;
  int rails_per_node = 0;                   // NICs per node, one per GPU
  std::string rail_kind;                    // "ib-ndr"
  double rail_bandwidth_bytes_per_s = 0.0;  // one NIC's, per direction (line rate)
  double rail_latency_ns = 0.0;             // added per network hop beyond NCCL's own figure
  bool operator==(const TraceClusterInfo&) const = default;
};

// The first line of a trace.
struct TraceHeader {
  std::string clock = "simulated";  // or "measured"
  std::string run_json = "{}";      // the run configuration, a JSON object
  std::vector<TraceDeviceInfo> devices;
  std::vector<TraceLinkInfo> links;
  std::vector<TraceParamInfo> params;
  std::vector<TraceBucketInfo> buckets;
  int host_id = -1;                         // the id of the "host" device entry, -1 when there is none
  std::optional<TraceClusterInfo> cluster;  // only when the modelled world spans nodes
};

}  // namespace dpscope
