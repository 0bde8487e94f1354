// RunInfo: a tolerant read of the header's "run" object.
#include "replay/run_info.hpp"

#include <nlohmann/json.hpp>

namespace dpscope::viz {

std::string RunInfo::mode_title() const {
  if (mode == "ddp") return "DistributedDataParallel (DDP)";
  if (mode == "dp") return "DataParallel (DP)";
  if (mode == "single") return "single device";
  if (!mode.empty()) return mode;
  if (!collective.empty()) return "benchmark: " + collective;
  return command;
}

RunInfo parse_run_info(std::string_view run_json) {
  RunInfo info;
  const nlohmann::json j = nlohmann::json::parse(run_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return info;
  auto text = [&](const char* key) -> std::string {
    auto it = j.find(key);
    if (it == j.end()) return "";
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number() || it->is_boolean()) return it->dump();
    return "";
  };
  info.mode = text("mode");
  info.backend = text("backend");
  info.model = text("model");
  info.preset = text("preset");
  info.batch = text("batch");
  info.algo = text("algo");
  info.command = text("command");
  info.collective = text("collective");
  return info;
}

}  // namespace dpscope::viz
