// Loading hardware presets from assets/presets/*.toml.
#include "dpscope/core/preset.hpp"

#include <toml++/toml.h>

#include <algorithm>

#include "dpscope/base/asset_dir.hpp"
#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"

namespace dpscope {
namespace {

namespace fs = std::filesystem;

double require_number(const toml::table& table, const fs::path& file, std::string_view key) {
  const toml::node_view<const toml::node> node = table.at_path(key);
  if (auto v = node.value<double>()) return *v;
  throw Error(ErrorKind::kFormat,
              fmt::format("preset {}: missing or non-numeric key '{}'", file.string(), key));
}

std::string require_string(const toml::table& table, const fs::path& file, std::string_view key) {
  if (auto v = table.at_path(key).value<std::string>()) return *v;
  throw Error(ErrorKind::kFormat, fmt::format("preset {}: missing string key '{}'", file.string(), key));
}

LinkSpec read_link(const toml::table& table, const fs::path& file, const std::string& prefix) {
  LinkSpec link;
  link.kind = require_string(table, file, prefix + ".kind");
  link.bandwidth_bytes_per_s = require_number(table, file, prefix + ".bandwidth_gbps") * 1e9;
  link.latency_ns = require_number(table, file, prefix + ".latency_us") * 1e3;
  return link;
}

double optional_number(const toml::table& table, const fs::path& file, std::string_view key,
                       double fallback) {
  const toml::node_view<const toml::node> node = table.at_path(key);
  if (!node) return fallback;
  if (auto v = node.value<double>()) return *v;
  throw Error(ErrorKind::kFormat, fmt::format("preset {}: key '{}' must be a number", file.string(), key));
}

// The optional [calibration] table: fractions in (0, 1], times >= 0 (HardwarePreset).
void read_calibration(const toml::table& table, const fs::path& file, HardwarePreset& p) {
  if (!table.contains("calibration")) return;
  const auto fraction = [&](std::string_view key) {
    const double v = optional_number(table, file, key, 1.0);
    DPS_CHECK(v > 0.0 && v <= 1.0, ErrorKind::kFormat, "preset {}: '{}' is {}, it must be in (0, 1]",
              file.string(), key, v);
    return v;
  };
  const auto micros = [&](std::string_view key, double fallback_ns) {
    const double v = optional_number(table, file, key, fallback_ns / 1e3);
    DPS_CHECK(v >= 0.0 && v < 1e6, ErrorKind::kFormat, "preset {}: '{}' is {}, it must be in [0, 1e6) us",
              file.string(), key, v);
    return v * 1e3;
  };
  p.compute_efficiency = fraction("calibration.gemm_efficiency");
  p.bandwidth_fraction = fraction("calibration.memory_bandwidth_fraction");
  p.launch_latency_ns = micros("calibration.launch_latency_us", p.launch_latency_ns);
  p.host_issue_ns = micros("calibration.host_issue_us", 0.0);
  if (auto on = table.at_path("calibration.measured_on").value<std::string>()) p.calibrated_on = *on;
}

// The optional [network] table (topology details for the collectives' timing model).
NetworkSpec read_network(const toml::table& table, const fs::path& file) {
  NetworkSpec net;
  if (!table.contains("network")) return net;
  net.protocol_efficiency = optional_number(table, file, "network.protocol_efficiency", 1.0);
  net.max_gpus = static_cast<int>(optional_number(table, file, "network.max_gpus", 0));
  net.gpus_per_switch = static_cast<int>(optional_number(table, file, "network.gpus_per_switch", 0));
  if (table.at_path("network.switch_uplink"))
    net.switch_uplink = read_link(table, file, "network.switch_uplink");
  if (const toml::node_view p2p = table.at_path("network.peer_to_peer")) {
    DPS_CHECK(p2p.is_boolean(), ErrorKind::kFormat, "preset {}: network.peer_to_peer must be true or false",
              file.string());
    net.peer_to_peer = *p2p.value<bool>();
  }
  net.nvlink_bandwidth_bytes_per_s = optional_number(table, file, "network.nvlink_gbps", 0.0) * 1e9;
  if (const toml::array* pairs = table.at_path("network.nvlinks").as_array()) {
    for (const toml::node& entry : *pairs) {
      const toml::array* triple = entry.as_array();
      DPS_CHECK(triple != nullptr && triple->size() == 3, ErrorKind::kFormat,
                "preset {}: network.nvlinks entries must be [gpu_a, gpu_b, link_count]", file.string());
      NvlinkConnection c;
      c.a = static_cast<int>(triple->get(0)->value<int64_t>().value_or(-1));
      c.b = static_cast<int>(triple->get(1)->value<int64_t>().value_or(-1));
      c.links = static_cast<int>(triple->get(2)->value<int64_t>().value_or(0));
      DPS_CHECK(c.a >= 0 && c.b >= 0 && c.a != c.b && c.links > 0, ErrorKind::kFormat,
                "preset {}: bad network.nvlinks entry [{}, {}, {}]", file.string(), c.a, c.b, c.links);
      net.nvlinks.push_back(c);
    }
  }
  DPS_CHECK(net.protocol_efficiency > 0.0 && net.protocol_efficiency <= 1.0, ErrorKind::kFormat,
            "preset {}: network.protocol_efficiency must be in (0, 1], got {}", file.string(),
            net.protocol_efficiency);
  return net;
}

// The optional [cluster] table: gpus_per_node >= 1 and a [cluster.nic] link.
ClusterSpec read_cluster(const toml::table& table, const fs::path& file) {
  ClusterSpec cluster;
  if (!table.contains("cluster")) return cluster;
  const double per_node = require_number(table, file, "cluster.gpus_per_node");
  DPS_CHECK(per_node >= 1 && per_node <= 1024 && per_node == static_cast<int>(per_node), ErrorKind::kFormat,
            "preset {}: cluster.gpus_per_node must be a whole number in [1, 1024], got {}", file.string(),
            per_node);
  cluster.gpus_per_node = static_cast<int>(per_node);
  cluster.nic = read_link(table, file, "cluster.nic");
  DPS_CHECK(cluster.nic.bandwidth_bytes_per_s > 0 && cluster.nic.latency_ns >= 0, ErrorKind::kFormat,
            "preset {}: cluster.nic needs a positive bandwidth and a latency >= 0", file.string());
  if (const toml::node_view simple = table.at_path("cluster.simple_only")) {
    DPS_CHECK(simple.is_boolean(), ErrorKind::kFormat, "preset {}: cluster.simple_only must be true or false",
              file.string());
    cluster.simple_only = *simple.value<bool>();
  }
  return cluster;
}

// The optional [nccl] table: channels >= 1, an NVLS fraction in [0, 1], an NVLS latency in [0, 1000] us.
NcclSpec read_nccl(const toml::table& table, const fs::path& file) {
  NcclSpec nccl;
  if (!table.contains("nccl")) return nccl;
  nccl.present = true;
  const double channels = require_number(table, file, "nccl.channels");
  DPS_CHECK(channels >= 1 && channels <= 64 && channels == static_cast<int>(channels), ErrorKind::kFormat,
            "preset {}: nccl.channels must be a whole number in [1, 64], got {}", file.string(), channels);
  nccl.channels = static_cast<int>(channels);
  nccl.nvls_algbw_fraction = optional_number(table, file, "nccl.nvls_algbw_fraction", 0.0);
  DPS_CHECK(nccl.nvls_algbw_fraction >= 0.0 && nccl.nvls_algbw_fraction <= 1.0, ErrorKind::kFormat,
            "preset {}: nccl.nvls_algbw_fraction must be in [0, 1], got {}", file.string(),
            nccl.nvls_algbw_fraction);
  nccl.nvls_latency_us = optional_number(table, file, "nccl.nvls_latency_us", -1.0);
  DPS_CHECK(nccl.nvls_latency_us == -1.0 || (nccl.nvls_latency_us >= 0.0 && nccl.nvls_latency_us <= 1000.0),
            ErrorKind::kFormat, "preset {}: nccl.nvls_latency_us must be in [0, 1000], got {}", file.string(),
            nccl.nvls_latency_us);
  return nccl;
}

}  // namespace

HardwarePreset load_preset_file(const fs::path& path) {
  // Through the input guard: a FIFO named x.toml in a presets folder is refused, never waited on.
  constexpr uint64_t kMaxPresetBytes = 1 << 20;  // the shipped presets are under 4 KiB
  const std::string text = InputFile::open(path, "preset", kMaxPresetBytes).read_all("preset");
  toml::table table;
  try {
    table = toml::parse(text, path.string());
  } catch (const toml::parse_error& e) {
    throw Error(ErrorKind::kFormat,
                fmt::format("preset {}:{}: {}", path.string(), e.source().begin.line, e.description()));
  }
  HardwarePreset p;
  p.id = path.stem().string();
  p.name = require_string(table, path, "name");
  p.memory_bytes = static_cast<uint64_t>(require_number(table, path, "memory_gb") * 1e9);
  p.peak_flops = require_number(table, path, "fp32_tflops") * 1e12;
  p.mem_bandwidth_bytes_per_s = require_number(table, path, "memory_bandwidth_gbps") * 1e9;
  p.launch_latency_ns = require_number(table, path, "launch_latency_us") * 1e3;
  p.host_link = read_link(table, path, "host_link");
  p.peer_link = read_link(table, path, "peer_link");
  p.topology = require_string(table, path, "topology");
  p.network = read_network(table, path);
  p.cluster = read_cluster(table, path);
  p.nccl = read_nccl(table, path);
  read_calibration(table, path, p);
  if (const toml::array* sources = table["sources"].as_array()) {
    for (const toml::node& s : *sources)
      if (auto str = s.value<std::string>()) p.sources.push_back(*str);
  }
  DPS_CHECK(p.memory_bytes > 0 && p.peak_flops > 0 && p.mem_bandwidth_bytes_per_s > 0, ErrorKind::kFormat,
            "preset {}: memory, flops and bandwidth must be positive", path.string());
  return p;
}

std::vector<std::string> list_presets() {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(asset_dir() / "presets", ec))
    if (entry.path().extension() == ".toml") ids.push_back(entry.path().stem().string());
  std::sort(ids.begin(), ids.end());
  return ids;
}

HardwarePreset find_preset(const std::string& id) {
  const fs::path file = asset_dir() / "presets" / (id + ".toml");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    std::vector<std::string> ids = list_presets();
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("unknown preset '{}' (available: {}; searched {})", id,
                            ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", ")),
                            (asset_dir() / "presets").string()));
  }
  return load_preset_file(file);
}

}  // namespace dpscope
