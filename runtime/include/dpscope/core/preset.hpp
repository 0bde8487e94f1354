// Hardware presets: the datasheet numbers a simulated GPU is timed with.
//
// Presets live in assets/presets/NAME.toml (one file per product, each number citing its source) and
// are found through find_preset(): $DPSCOPE_ASSETS/presets, then the source tree's assets/presets,
// then <exe>/../share/dpscope/presets. The collectives milestone adds the GPU-to-GPU topology.
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

struct HardwarePreset {
  std::string id;    // file stem: "h100-sxm"
  std::string name;  // display name: "NVIDIA H100 SXM5 80GB"
  uint64_t memory_bytes = 0;
  double peak_flops = 0.0;            // FP32 dense (non-tensor-core) FLOP/s
  double mem_bandwidth_bytes_per_s = 0.0;
  double launch_latency_ns = 0.0;     // per kernel
  LinkSpec host_link;                 // host <-> device (PCIe)
  LinkSpec peer_link;                 // device <-> device (NVLink/NVSwitch or PCIe via host)
  std::string topology;               // "nvswitch", "pcie-host", "hybrid-cube-mesh"
  std::vector<std::string> sources;   // where the numbers come from
};

// Parses a preset file; throws Error(kFormat) naming the file and the missing or bad key.
HardwarePreset load_preset_file(const std::filesystem::path& path);

// Finds assets/presets/<id>.toml (see header comment); throws Error(kInvalidArgument) listing the
// available ids when none matches.
HardwarePreset find_preset(const std::string& id);

// The ids of every preset found, sorted.
std::vector<std::string> list_presets();

// The asset directory in use (for messages and lessons).
std::filesystem::path asset_dir();

}  // namespace dpscope
