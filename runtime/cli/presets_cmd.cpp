// `dpscope presets`: lists the hardware presets and their datasheet numbers. No preset found (a wrong
// DPSCOPE_ASSETS, a broken install) is an error naming the folder searched, not an empty list.
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "dpscope/base/asset_dir.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/core/preset.hpp"

namespace dpscope::cli {

void register_presets(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("presets", "list hardware presets (assets/presets/*.toml)");
  cmd->callback([] {
    const std::vector<std::string> ids = list_presets();
    const char* env = std::getenv("DPSCOPE_ASSETS");
    DPS_CHECK(
        !ids.empty(), ErrorKind::kIo, "no hardware presets (*.toml) in '{}'{}",
        (asset_dir() / "presets").string(),
        env != nullptr && *env != '\0' ? " (DPSCOPE_ASSETS is set: is it the folder holding presets/?)" : "");
    for (const std::string& id : ids) {
      const HardwarePreset p = find_preset(id);
      fmt::print(
          "{:<12} {:<26} {:>6.0f} GB  {:>6.0f} GB/s HBM  {:>5.1f} TFLOP/s fp32  {} {:.0f} GB/s  host {} "
          "{:.0f} GB/s\n",
          id, p.name, p.memory_bytes / 1e9, p.mem_bandwidth_bytes_per_s / 1e9, p.peak_flops / 1e12,
          p.peer_link.kind, p.peer_link.bandwidth_bytes_per_s / 1e9, p.host_link.kind,
          p.host_link.bandwidth_bytes_per_s / 1e9);
    }
  });
}

}  // namespace dpscope::cli
