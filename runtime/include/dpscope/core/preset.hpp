// Hardware presets: the datasheet numbers a simulated GPU is timed with.
//
// Presets live in assets/presets/NAME.toml (one file per product, each number citing its source) and
// are found through find_preset(): $DPSCOPE_ASSETS/presets, then the source tree's assets/presets,
// then <exe>/../share/dpscope/presets. [network] details the GPU-to-GPU topology of one machine,
// [cluster] the nodes a timing-only run spans (comm/analytic_collectives.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dpscope {

// One kind of link: bandwidth per direction and a fixed per-message latency (alpha-beta model).
struct LinkSpec {
  std::string kind;                    // "pcie4", "nvlink4", "nvswitch", ...
  double bandwidth_bytes_per_s = 0.0;  // per direction
  double latency_ns = 0.0;             // alpha: cost of a zero-byte message
};

// One NVLink connection of a hybrid cube-mesh: GPUs `a` and `b` joined by `links` NVLinks.
struct NvlinkConnection {
  int a = 0;
  int b = 0;
  int links = 1;
};

// GPU-to-GPU network details beyond peer_link, read from the optional [network] table of a preset
// (used by the collectives' timing model, comm/network.hpp). Every field has a neutral default.
struct NetworkSpec {
  double protocol_efficiency = 1.0;  // fraction of a link's line rate a collective achieves
  // pcie-host without peer access: the fraction of the switch uplink's line rate one flow moves
  // when it is the only one in its direction (a broadcast's chain of two GPUs); where several share
  // a direction, they share protocol_efficiency of it. 0: protocol_efficiency.
  double one_flow_efficiency = 0.0;
  int max_gpus = 0;                           // GPUs one box holds for fixed topologies; 0 = any count
  int gpus_per_switch = 0;                    // pcie-host: GPUs behind one PCIe switch; 0 = all on the host
  LinkSpec switch_uplink;                     // pcie-host: PCIe switch <-> host root complex
  double nvlink_bandwidth_bytes_per_s = 0.0;  // hybrid-cube-mesh: one NVLink, per direction
  std::vector<NvlinkConnection> nvlinks;      // hybrid-cube-mesh: which GPU pairs have NVLinks
  // pcie-host: whether the GPUs may read and write each other's memory over PCIe (CUDA peer access,
  // NCCL's P2P transport). false where the driver refuses it (GeForce cards: `nvidia-smi topo -p2p`
  // prints NS): every peer transfer then goes through host memory (NCCL's SHM transport), up the
  // sender's switch uplink and down the receiver's, even between GPUs under one switch.
  bool peer_to_peer = true;
};

// A cluster of such machines, from the optional [cluster] table: nodes of `gpus_per_node` GPUs
// (each node the preset's own topology), joined by one network card per GPU on a rail-optimized
// fabric: GPU k of every node reaches GPU k of every other node through its own NIC
// (NVIDIA DGX SuperPOD). gpus_per_node 0: the preset describes one machine and cannot span nodes.
struct ClusterSpec {
  int gpus_per_node = 0;
  LinkSpec nic;  // per GPU: "ib-ndr", 50 GB/s per direction
  // The network transport carries only NCCL's Simple protocol: LL and LL128 need each 8- or
  // 128-byte line to land whole and in order, which EFA without in-order 128-byte delivery does not
  // promise, so its NCCL plugin sets NCCL_PROTO=simple (aws/aws-ofi-nccl#76, #280, #850).
  // Preset key `cluster.simple_only` (default false).
  bool simple_only = false;
};

// The optional [nccl] table: what NCCL's cost model of the collectives needs beyond the links
// (comm/nccl_cost_model.hpp). Without it a preset keeps the plain alpha-beta flow timing of its
// links (the idealised presets of the unit tests).
struct NcclSpec {
  bool present = false;
  int channels = 0;                  // rings / trees NCCL builds on this topology
  double nvls_algbw_fraction = 0.0;  // NVLink SHARP all-reduce algbw / peer line rate; 0 = no NVLS
  // What an NVLS all-reduce inside a node takes beyond its bytes on this hardware when it is under
  // one NVLS step per channel, in us, where it differs from NCCL's tuner figure (25 us, which still
  // decides the choice of algorithm); < 0 = time NVLS by the tuner's figure at every size. Preset
  // key `nccl.nvls_latency_us`.
  double nvls_latency_us = -1.0;
};

struct HardwarePreset {
  std::string id;    // file stem: "h100-sxm"
  std::string name;  // display name: "NVIDIA H100 SXM5 80GB"
  uint64_t memory_bytes = 0;
  double peak_flops = 0.0;  // FP32 dense (non-tensor-core) FLOP/s
  double mem_bandwidth_bytes_per_s = 0.0;
  double launch_latency_ns = 0.0;  // per kernel
  // The optional [calibration] table, measured on a real GPU by gpu_calibrate (docs/gpu.md): the
  // fractions of peak_flops and mem_bandwidth a kernel achieves, and the host time the runtime
  // takes to issue one kernel (a step cannot run faster than the host issues its kernels). The
  // defaults leave the datasheet roofline as it is.
  double compute_efficiency = 1.0;
  double bandwidth_fraction = 1.0;
  double host_issue_ns = 0.0;
  std::string calibrated_on;         // "NVIDIA H100 80GB HBM3, 2026-11-22", empty when not calibrated
  LinkSpec host_link;                // host <-> device (PCIe)
  LinkSpec peer_link;                // device <-> device (NVLink/NVSwitch or PCIe via host)
  std::string topology;              // "nvswitch", "pcie-host", "hybrid-cube-mesh"
  NetworkSpec network;               // optional topology details ([network] table)
  ClusterSpec cluster;               // optional multi-node description ([cluster] table)
  NcclSpec nccl;                     // optional NCCL cost-model parameters ([nccl] table)
  std::vector<std::string> sources;  // where the numbers come from
};

// Parses a preset file; throws Error(kFormat) naming the file and the missing or bad key.
HardwarePreset load_preset_file(const std::filesystem::path& path);

// Finds assets/presets/<id>.toml (see header comment); throws Error(kInvalidArgument) listing the
// available ids when none matches.
HardwarePreset find_preset(const std::string& id);

// The ids of every preset found, sorted.
std::vector<std::string> list_presets();

}  // namespace dpscope
