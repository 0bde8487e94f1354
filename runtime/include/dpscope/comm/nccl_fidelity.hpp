// The fidelity check of the collectives' cost model: published nccl-tests tables of real systems
// (tests/data/nccl-tests/*.csv) against what dpscope's timing-only backend predicts for the same
// sizes. docs/fidelity.md is fidelity_markdown() of every table (bench/fidelity_report writes it,
// tests/runtime/comm/fidelity_test.cpp checks the file is current and the errors within bounds).
//
// A table file: '#'-comment header lines "key: value" (system, source, command, preset,
// gpus_per_node, nodes, gpus_per_thread, nic_gbps, nic_latency_us, nic_latency_note, nvls_latency_us,
// nvls_latency_note, nccl_proto, nccl_proto_note, median_bound, collective), then the CSV header
// size_bytes,time_us,algbw_gbps,busbw_gbps and one row per size (out-of-place columns).
// `collective` begins with nccl-tests' name of the collective the table measures: all_reduce,
// all_gather, reduce_scatter, broadcast, reduce or alltoall; one table per collective and system.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dpscope/comm/types.hpp"
#include "dpscope/core/preset.hpp"

namespace dpscope {

struct MeasuredRow {
  uint64_t bytes = 0;
  double time_us = 0.0;
};

struct MeasuredSystem {
  std::string id;  // file stem
  std::string system, source, command, preset, nic_latency_note;
  int gpus_per_node = 0;
  int nodes = 1;
  // nccl-tests' -g: GPUs one thread drives. That thread launches the collective's kernel on each of
  // its GPUs in turn, so the last one starts (gpus_per_thread - 1) kernel launches after the first:
  // a term of the benchmark's launch mode, added to the model's time (one process per GPU adds none).
  int gpus_per_thread = 1;
  double nic_gbps = 0.0;       // per GPU; 0 = the preset's
  double nic_latency_us = -1;  // beyond NCCL's network hop; < 0 = the preset's
  // NVLS's latency under one step per channel (HardwarePreset's nccl.nvls_latency_us), stated in
  // the table where the table was used to fit it or is judged against it, with nvls_latency_note
  // saying which; < 0 = the preset's.
  double nvls_latency_us = -1;
  std::string nvls_latency_note;
  // "Simple" where the system's network plugin sets NCCL_PROTO=simple (ClusterSpec::simple_only),
  // with the source that says so in nccl_proto_note; empty = every protocol.
  std::string nccl_proto, nccl_proto_note;
  // The median error the test holds this system to: the goal's 10 %, or, where the model does not
  // reach it yet, today's error rounded up (a regression guard; docs/fidelity.md says "not met").
  double median_bound = 0.10;
  OpType op = OpType::kAllReduce;  // the `collective:` line's; bus bandwidth by its nccl-tests factor
  std::vector<MeasuredRow> rows;
};

// Reads one table; kFormat naming the file and line on a malformed one.
MeasuredSystem load_measured_system(const std::filesystem::path& file);
// Every *.csv of `dir`, sorted by file name.
std::vector<MeasuredSystem> load_measured_systems(const std::filesystem::path& dir);

// The folder of `dir` (tests/data/nccl-tests) whose tables are transcribed like the others but lie
// outside the goal's size range (they start above 1 KiB): reported apart, not judged by the goal.
inline constexpr const char* kNotComparedDir = "not-compared";
// Every *.csv of `dir`/not-compared, sorted by file name; none when that folder is absent.
std::vector<MeasuredSystem> load_not_compared_systems(const std::filesystem::path& dir);

// One row's size as nccl-tests counts it and as `dpscope bench` runs it (runtime/bench/collectives.cpp,
// counts_for): all_gather and reduce_scatter take the size as all ranks' data, each rank's block
// rounded down to a multiple of 4 floats; alltoall rounds the buffer down to a whole block per rank.
struct FidelitySize {
  int64_t count = 0;        // elements per rank's call (CollectiveQuery::count: the block for
                            // all_gather and reduce_scatter, the whole buffer otherwise)
  uint64_t nccl_bytes = 0;  // the bytes NCCL's cost model takes (predict_nccl's `bytes`)
};
FidelitySize fidelity_size(OpType op, uint64_t bytes, int ranks);

// The preset the system runs on: the named preset with the table's NIC figures.
HardwarePreset fidelity_preset(const MeasuredSystem& s);

// How long after its thread's first GPU the GPU at `index_in_thread` starts a collective when one
// host thread drives several GPUs (nccl-tests' -g): the thread launches the collective's kernel on
// each of its GPUs in turn inside one group, one `preset.launch_latency_ns` apart. The fidelity
// check adds it for the thread's last GPU (gpus_per_thread - 1); `dpscope bench` waits each
// simulated GPU by its own index.
int64_t grouped_launch_offset_ns(const HardwarePreset& preset, int index_in_thread);

struct FidelityRow {
  uint64_t bytes = 0;
  double measured_us = 0.0;
  double simulated_us = 0.0;
  double measured_busbw = 0.0;  // GB/s, from size and time (nccl-tests rounds small ones to 0.00)
  double simulated_busbw = 0.0;
  double error = 0.0;  // |simulated busbw / measured busbw - 1|
  std::string choice;  // the cost model's algorithm/protocol
};

struct FidelityResult {
  MeasuredSystem system;
  std::vector<FidelityRow> rows;
  double median_error = 0.0;
  double worst_error = 0.0;
  uint64_t worst_bytes = 0;
};

// The timing-only backend's prediction for every row (AnalyticCollectives on the system's world).
FidelityResult evaluate_fidelity(const MeasuredSystem& s);

// docs/fidelity.md: the method, a summary line per system and the per-size tables; `not_compared`
// (load_not_compared_systems) in a section of its own, outside the goal's counts.
std::string fidelity_markdown(const std::vector<FidelityResult>& results,
                              const std::vector<FidelityResult>& not_compared = {});

}  // namespace dpscope
