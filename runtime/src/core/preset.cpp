// Loading hardware presets from assets/presets/*.toml.
#include "dpscope/core/preset.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>

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

// The ranges a preset's numbers must lie in, in the file's units. A NaN, an infinity, a negative or
// zero bandwidth, a negative latency or 1e308 once passed the loader and then crashed a run (a
// negative or NaN launch latency made a kernel of negative duration: an internal check thrown on a
// rank thread, std::terminate) or made it silently meaningless (an infinite bandwidth): each is now
// named with its key, its value and the range, when the preset loads.
struct Range {
  double lo;
  double hi;
  bool lo_open;  // (lo, hi] instead of [lo, hi]
};
constexpr Range kPositiveRate{0.0, 1e6, true};  // GB/s, TFLOP/s, GB: above zero, at most a million
constexpr Range kLatencyUs{0.0, 1e6, false};    // us: zero (an ideal link) up to a second

double in_range(const fs::path& file, std::string_view key, double v, Range r) {
  const bool ok = std::isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) && v <= r.hi;
  DPS_CHECK(ok, ErrorKind::kFormat, "preset {}: '{}' is {}, it must be a number in {}{}, {}]", file.string(),
            key, v, r.lo_open ? "(" : "[", r.lo, r.hi);
  return v;
}

double require_in_range(const toml::table& table, const fs::path& file, std::string_view key, Range r) {
  return in_range(file, key, require_number(table, file, key), r);
}

// A count given as a number (TOML integers and floats alike): a whole number in [lo, hi], never a
// double cast to an int (1e308 GPUs was undefined behaviour, read as -2147483648).
int whole_in_range(const fs::path& file, std::string_view key, double v, int lo, int hi) {
  DPS_CHECK(std::isfinite(v) && v >= lo && v <= hi && v == std::floor(v), ErrorKind::kFormat,
            "preset {}: '{}' is {}, it must be a whole number from {} to {}", file.string(), key, v, lo, hi);
  return static_cast<int>(v);
}

std::string require_string(const toml::table& table, const fs::path& file, std::string_view key) {
  if (auto v = table.at_path(key).value<std::string>()) return *v;
  throw Error(ErrorKind::kFormat, fmt::format("preset {}: missing string key '{}'", file.string(), key));
}

// A link's kind, bandwidth and latency; both numbers in range unless `checked` is false (the caller
// then checks them with a message of its own).
LinkSpec read_link(const toml::table& table, const fs::path& file, const std::string& prefix,
                   bool checked = true) {
  LinkSpec link;
  link.kind = require_string(table, file, prefix + ".kind");
  const std::string bandwidth = prefix + ".bandwidth_gbps";
  const std::string latency = prefix + ".latency_us";
  link.bandwidth_bytes_per_s = (checked ? require_in_range(table, file, bandwidth, kPositiveRate)
                                        : require_number(table, file, bandwidth)) *
                               1e9;
  link.latency_ns =
      (checked ? require_in_range(table, file, latency, kLatencyUs) : require_number(table, file, latency)) *
      1e3;
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
  net.one_flow_efficiency = optional_number(table, file, "network.one_flow_efficiency", 0.0);
  net.max_gpus =
      whole_in_range(file, "network.max_gpus", optional_number(table, file, "network.max_gpus", 0), 0, 1024);
  net.gpus_per_switch = whole_in_range(file, "network.gpus_per_switch",
                                       optional_number(table, file, "network.gpus_per_switch", 0), 0, 1024);
  if (table.at_path("network.switch_uplink"))
    net.switch_uplink = read_link(table, file, "network.switch_uplink");
  if (const toml::node_view p2p = table.at_path("network.peer_to_peer")) {
    DPS_CHECK(p2p.is_boolean(), ErrorKind::kFormat, "preset {}: network.peer_to_peer must be true or false",
              file.string());
    net.peer_to_peer = *p2p.value<bool>();
  }
  if (table.at_path("network.nvlink_gbps"))
    net.nvlink_bandwidth_bytes_per_s =
        require_in_range(table, file, "network.nvlink_gbps", kPositiveRate) * 1e9;
  if (const toml::array* pairs = table.at_path("network.nvlinks").as_array()) {
    for (const toml::node& entry : *pairs) {
      const toml::array* triple = entry.as_array();
      DPS_CHECK(triple != nullptr && triple->size() == 3, ErrorKind::kFormat,
                "preset {}: network.nvlinks entries must be [gpu_a, gpu_b, link_count]", file.string());
      // Read as 64-bit and bounded before narrowing: 4294967297 links once became 1.
      const int64_t a = triple->get(0)->value<int64_t>().value_or(-1);
      const int64_t b = triple->get(1)->value<int64_t>().value_or(-1);
      const int64_t links = triple->get(2)->value<int64_t>().value_or(0);
      DPS_CHECK(a >= 0 && a < 1024 && b >= 0 && b < 1024 && a != b && links > 0 && links <= 64,
                ErrorKind::kFormat, "preset {}: bad network.nvlinks entry [{}, {}, {}]", file.string(), a, b,
                links);
      NvlinkConnection c;
      c.a = static_cast<int>(a);
      c.b = static_cast<int>(b);
      c.links = static_cast<int>(links);
      net.nvlinks.push_back(c);
    }
  }
  DPS_CHECK(net.protocol_efficiency > 0.0 && net.protocol_efficiency <= 1.0, ErrorKind::kFormat,
            "preset {}: network.protocol_efficiency must be in (0, 1], got {}", file.string(),
            net.protocol_efficiency);
  DPS_CHECK(net.one_flow_efficiency >= 0.0 && net.one_flow_efficiency <= 1.0, ErrorKind::kFormat,
            "preset {}: network.one_flow_efficiency must be in [0, 1], got {}", file.string(),
            net.one_flow_efficiency);
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
  cluster.nic = read_link(table, file, "cluster.nic", /*checked=*/false);
  const double nic_gbps = cluster.nic.bandwidth_bytes_per_s / 1e9;
  const double nic_us = cluster.nic.latency_ns / 1e3;
  DPS_CHECK(
      std::isfinite(nic_gbps) && nic_gbps > 0 && nic_gbps <= kPositiveRate.hi && std::isfinite(nic_us) &&
          nic_us >= 0 && nic_us <= kLatencyUs.hi,
      ErrorKind::kFormat,
      "preset {}: cluster.nic needs a positive bandwidth and a latency >= 0 (bandwidth_gbps in (0, {}], "
      "latency_us in [0, {}]; got {} and {})",
      file.string(), kPositiveRate.hi, kLatencyUs.hi, nic_gbps, nic_us);
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
  p.memory_bytes = static_cast<uint64_t>(require_in_range(table, path, "memory_gb", kPositiveRate) * 1e9);
  p.peak_flops = require_in_range(table, path, "fp32_tflops", kPositiveRate) * 1e12;
  p.mem_bandwidth_bytes_per_s = require_in_range(table, path, "memory_bandwidth_gbps", kPositiveRate) * 1e9;
  p.launch_latency_ns = require_in_range(table, path, "launch_latency_us", kLatencyUs) * 1e3;
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
  // Only a name with nothing behind it is unknown: a FIFO, a directory or a link to /dev/zero named
  // x.toml was "unknown preset 'x' (available: ..., x)"; load_preset_file's input guard names it.
  const PathStatus status = path_status(file);
  if (status.kind == FileKind::kMissing) {
    std::vector<std::string> ids = list_presets();
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("unknown preset '{}' (available: {}; searched {})", id,
                            ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", ")),
                            (asset_dir() / "presets").string()));
  }
  return load_preset_file(file);
}

}  // namespace dpscope
