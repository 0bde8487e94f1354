// RunInfo: a tolerant read of the header's "run" object.
#include "replay/run_info.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

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
  info.shuffle = text("shuffle") == "true";
  info.timing_only = text("timing_only") == "true";
  if (auto it = j.find("devices"); it != j.end() && it->is_number_integer()) info.devices = it->get<int>();
  if (auto it = j.find("trace_kernels_every");
      it != j.end() && it->is_number_integer() && it->get<int64_t>() >= 1)
    info.kernels_every = it->get<int64_t>();
  if (auto it = j.find("pitfalls"); it != j.end() && it->is_array())
    for (const auto& p : *it)
      if (p.is_string()) info.pitfalls.push_back(p.get<std::string>());
  return info;
}

bool RunInfo::has_pitfall(std::string_view name) const {
  return std::find(pitfalls.begin(), pitfalls.end(), name) != pitfalls.end();
}

std::string reduction_verdict(const RunInfo& run, bool is_mean, bool is_sum, size_t ranks) {
  if (is_mean)
    return fmt::format("after = mean of the {} ranks' gradients (all-reduce SUM, then ÷ {})", ranks, ranks);
  if (!is_sum) return "";
  if (run.mode == "dp")
    return "after = sum of the replicas' gradients (DataParallel's reduce-add onto GPU 0)";
  if (run.mode == "ddp" && run.has_pitfall("no-average"))
    return fmt::format(
        "after = SUM of the {} ranks' gradients, not their mean: the no-average pitfall "
        "(the learning rate is in effect {}x larger)",
        ranks, ranks);
  return fmt::format("after = sum of the {} ranks' gradients (all-reduce SUM, no ÷ {})", ranks, ranks);
}

}  // namespace dpscope::viz
