// `dpscope presets`: lists the hardware presets and their datasheet numbers, one aligned row each. No preset
// found (a wrong DPSCOPE_ASSETS, a broken install) is an error naming the folder searched, not an empty list.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "dpscope/base/asset_dir.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/terminal_text.hpp"
#include "dpscope/core/preset.hpp"

namespace dpscope::cli {
namespace {

std::string link_text(const LinkSpec& link) {
  return fmt::format("{} {:.0f} GB/s", link.kind, link.bandwidth_bytes_per_s / 1e9);
}

// One row per preset under a header, each column as wide as its widest cell.
void print_table(const std::vector<std::string>& ids) {
  std::vector<std::vector<std::string>> rows = {
      {"preset", "GPU", "memory", "bandwidth", "fp32", "GPU to GPU", "host link"}};
  for (const std::string& id : ids) {
    const HardwarePreset p = find_preset(id);
    std::string peer = link_text(p.peer_link);
    if (!p.network.peer_to_peer) peer += ", no peer access";  // through host memory (presets' [network])
    // The name is a preset file's (DPSCOPE_ASSETS: a user's own): written out (base/terminal_text.hpp).
    rows.push_back({printable_line(id), printable_line(p.name),
                    fmt::format("{:.0f} GB", p.memory_bytes / 1e9),
                    fmt::format("{:.0f} GB/s", p.mem_bandwidth_bytes_per_s / 1e9),
                    fmt::format("{:.1f} TFLOP/s", p.peak_flops / 1e12), peer, link_text(p.host_link)});
  }
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  // Numbers are right-aligned, words left-aligned; no trailing spaces.
  const auto numeric = [](size_t c) { return c >= 2 && c <= 4; };
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const bool last = c + 1 == row.size();
      line += numeric(c) ? fmt::format("{:>{}}", row[c], widths[c])
                         : (last ? row[c] : fmt::format("{:<{}}", row[c], widths[c]));
    }
    fmt::print("{}\n", line);
  }
}

}  // namespace

void register_presets(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("presets", "list hardware presets (assets/presets/*.toml)");
  cmd->callback([] {
    const std::vector<std::string> ids = list_presets();
    const char* env = std::getenv("DPSCOPE_ASSETS");
    DPS_CHECK(
        !ids.empty(), ErrorKind::kIo, "no hardware presets (*.toml) in '{}'{}",
        (asset_dir() / "presets").string(),
        env != nullptr && *env != '\0' ? " (DPSCOPE_ASSETS is set: is it the folder holding presets/?)" : "");
    print_table(ids);
  });
}

}  // namespace dpscope::cli
