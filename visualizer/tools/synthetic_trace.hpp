// Synthetic training traces written with the real TraceRecorder, for the visualizer's tests,
// screenshots and benchmarks: single-device, DataParallel-like and DDP-like runs of an MLP on
// simulated GPUs (Device::sim with a hardware preset, kernels timed by KernelScope, transfers by
// the link model). The events follow docs/trace-format.md and the shape of the real DP/DDP
// runtime (chunked scatter, replicate, gather, reduce-add; strided sampler, gradient buckets
// launched in order, ring all-reduce chunk by chunk, values before/after each reduction), so the
// visualizer can be tested now against everything the runtime will write later.
// Used by tests/visualizer and by dpscope-viz-tracegen (tools/tracegen_main.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dpscope/trace/recorder.hpp"

namespace dpscope::viz::tools {

enum class SyntheticMode { kSingle, kDataParallel, kDistributed };
const char* to_string(SyntheticMode mode);

struct SyntheticTraceOptions {
  SyntheticMode mode = SyntheticMode::kDistributed;
  int devices = 4;  // GPUs (ranks for DDP, replicas for DP); 1 for single
  int steps = 2;
  std::vector<int64_t> widths = {784, 256, 128, 10};  // MLP: Linear layers with ReLU between
  int64_t batch = 16;                                 // single/DP: the whole mini-batch; DDP: per rank
  int64_t dataset_len = 1000;                         // rows; indices wrap around
  uint64_t first_bucket_bytes = 64 * 1024;            // DDP buckets after the rebuild (step >= 1)
  uint64_t bucket_cap_bytes = 256 * 1024;
  int values_per_tensor = 4;  // elements recorded in `values` events
  std::string preset = "h100-sxm";
};

struct SyntheticTraceInfo {
  uint64_t events = 0;
  int host_id = -1;
  std::vector<int> gpu_ids;  // header ids of the GPUs, by rank / replica
  // samples[step][rank]: the dataset rows each GPU holds in that step (empty: it sat the step out).
  std::vector<std::vector<std::vector<int64_t>>> samples;
  std::vector<TraceBucketInfo> initial_buckets;  // DDP step 0 (and the header)
  std::vector<TraceBucketInfo> rebuilt_buckets;  // DDP steps >= 1
  std::vector<std::string> param_names;          // "0.weight", "0.bias", ...
  int64_t end_ns = 0;
};

// Writes the trace; throws dpscope::Error for bad options or an unwritable path.
SyntheticTraceInfo write_synthetic_trace(const std::filesystem::path& path,
                                         const SyntheticTraceOptions& options);

// The gradient values rank `rank` records for `param` in `step` (deterministic, distinct per rank).
std::vector<float> synthetic_grad_values(int64_t step, int rank, int param, int count);

}  // namespace dpscope::viz::tools
