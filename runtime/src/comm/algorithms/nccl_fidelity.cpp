// Published nccl-tests tables against the timing-only backend (comm/nccl_fidelity.hpp).
#include "dpscope/comm/nccl_fidelity.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dpscope/base/error.hpp"
#include "dpscope/base/file_guard.hpp"
#include "dpscope/comm/analytic_collectives.hpp"
#include "dpscope/comm/nccl_cost_model.hpp"
#include "nccl_fidelity_detail.hpp"

namespace dpscope {
namespace fs = std::filesystem;
namespace fidelity_detail {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::optional<NcclAlgo> forced_algo(const MeasuredSystem& s) {
  const std::string_view key = "NCCL_ALGO=";
  const size_t at = s.command.find(key);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + key.size();
  const size_t end = s.command.find_first_of(" \t", begin);
  const std::string value =
      s.command.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  if (const std::optional<NcclAlgo> algo = parse_nccl_algo(value)) return algo;
  throw Error(
      ErrorKind::kFormat,
      fmt::format("{}: the command's NCCL_ALGO={}: only Ring, Tree and NVLS are modelled", s.id, value));
}

const char* nccl_tests_name(OpType op) {
  switch (op) {
    case OpType::kAllReduce: return "all_reduce";
    case OpType::kAllGather: return "all_gather";
    case OpType::kReduceScatter: return "reduce_scatter";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kReduce: return "reduce";
    case OpType::kAllToAll: return "alltoall";
    default: return "?";  // not a collective nccl-tests measures
  }
}

}  // namespace fidelity_detail

using namespace fidelity_detail;

namespace {

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

double number(const std::string& text, const fs::path& file, int line, std::string_view what) {
  double v = 0.0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, v);
  DPS_CHECK(ec == std::errc() && ptr == last && std::isfinite(v), ErrorKind::kFormat,
            "{}:{}: {} '{}' is not a number", file.string(), line, what, text);
  return v;
}

// The collective of a table: the first word of its `collective:` line, nccl-tests' name. kFormat
// naming the file for a collective nccl-tests does not measure.
OpType measured_collective(const std::string& text, const fs::path& file) {
  const std::string name = text.substr(0, text.find_first_of(" \t("));
  for (const OpType op : {OpType::kAllReduce, OpType::kAllGather, OpType::kReduceScatter, OpType::kBroadcast,
                          OpType::kReduce, OpType::kAllToAll})
    if (name == nccl_tests_name(op)) return op;
  throw Error(ErrorKind::kFormat,
              fmt::format("{}: collective '{}': expected all_reduce, all_gather, reduce_scatter, broadcast, "
                          "reduce or alltoall (nccl-tests' names)",
                          file.string(), name));
}

}  // namespace

namespace {

// A table's header keys (nccl_fidelity.hpp). An unknown key (a typo: `median_bnd`) was ignored and
// its value silently replaced by the default; a key given twice kept the last value. Both are
// refused, naming the line.
void check_header_key(const fs::path& file, int line, const std::string& key,
                      const std::map<std::string, int>& seen) {
  static constexpr std::string_view kKeys[] = {"system",           "source",          "command",
                                               "preset",           "gpus_per_node",   "nodes",
                                               "gpus_per_thread",  "nic_gbps",        "nic_latency_us",
                                               "nic_latency_note", "nvls_latency_us", "nvls_latency_note",
                                               "nccl_proto",       "nccl_proto_note", "median_bound",
                                               "collective"};
  DPS_CHECK(std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys), ErrorKind::kFormat,
            "{}:{}: unknown header key '{}' (expected one of: {})", file.string(), line,
            key.size() <= 40 ? key : key.substr(0, 40) + "...", fmt::join(kKeys, ", "));
  const auto before = seen.find(key);
  DPS_CHECK(before == seen.end(), ErrorKind::kFormat,
            "{}:{}: header key '{}' is given twice (first on line {})", file.string(), line, key,
            before == seen.end() ? 0 : before->second);
}

}  // namespace

MeasuredSystem load_measured_system(const fs::path& file) {
  // Opened without blocking and bounded (a FIFO named *.csv once hung the report; a table is a few KiB).
  constexpr uint64_t kMaxTableBytes = uint64_t{64} << 20;
  std::istringstream in(
      InputFile::open(file, "nccl-tests table", kMaxTableBytes).read_all("nccl-tests table"));
  // A count or size is a whole number in [lo, hi], never a double cast to an integer (1e30 was
  // undefined behaviour, 2.5 GPUs became 2).
  auto whole = [&](const std::string& text, int line, std::string_view what, int64_t lo, int64_t hi) {
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    DPS_CHECK(ec == std::errc() && ptr == text.data() + text.size() && v >= lo && v <= hi, ErrorKind::kFormat,
              "{}:{}: {} '{}' must be a whole number from {} to {}", file.string(), line, what,
              text.size() <= 40 ? text : text.substr(0, 40) + "...", lo, hi);
    return v;
  };
  MeasuredSystem s;
  s.id = file.stem().string();
  std::map<std::string, std::string> header;
  std::map<std::string, int> header_lines;  // the line of each header key, for messages
  std::string line;
  int n = 0;
  bool columns = false;
  std::vector<int> row_lines;  // the line of each row
  while (std::getline(in, line)) {
    ++n;
    line = trim(line);
    if (line.empty()) continue;
    if (line[0] == '#') {
      const size_t colon = line.find(':');
      DPS_CHECK(colon != std::string::npos, ErrorKind::kFormat, "{}:{}: expected '# key: value'",
                file.string(), n);
      const std::string key = trim(line.substr(1, colon - 1));
      check_header_key(file, n, key, header_lines);
      header[key] = trim(line.substr(colon + 1));
      header_lines[key] = n;
      continue;
    }
    if (!columns) {
      DPS_CHECK(line == "size_bytes,time_us,algbw_gbps,busbw_gbps", ErrorKind::kFormat,
                "{}:{}: expected the header size_bytes,time_us,algbw_gbps,busbw_gbps", file.string(), n);
      columns = true;
      continue;
    }
    std::vector<std::string> cells;
    size_t begin = 0;
    for (size_t comma; (comma = line.find(',', begin)) != std::string::npos; begin = comma + 1)
      cells.push_back(line.substr(begin, comma - begin));
    cells.push_back(line.substr(begin));
    DPS_CHECK(cells.size() == 4, ErrorKind::kFormat, "{}:{}: expected 4 columns, got {}", file.string(), n,
              cells.size());
    const int64_t bytes = whole(cells[0], n, "size_bytes", 1, int64_t{1} << 50);  // 1 PiB
    const double time = number(cells[1], file, n, "time_us");
    DPS_CHECK(time > 0, ErrorKind::kFormat, "{}:{}: time_us must be positive", file.string(), n);
    s.rows.push_back({static_cast<uint64_t>(bytes), time});
    row_lines.push_back(n);
  }
  auto need = [&](const char* key) -> const std::string& {
    const auto it = header.find(key);
    DPS_CHECK(it != header.end() && !it->second.empty(), ErrorKind::kFormat, "{}: no '# {}:' line",
              file.string(), key);
    return it->second;
  };
  s.system = need("system");
  s.source = need("source");
  s.command = need("command");
  s.preset = need("preset");
  // The ranges of dpscope bench (--devices, --nodes), so that gpus_per_node x nodes fits an int.
  s.gpus_per_node =
      static_cast<int>(whole(need("gpus_per_node"), header_lines["gpus_per_node"], "gpus_per_node", 1, 64));
  s.nodes = static_cast<int>(whole(need("nodes"), header_lines["nodes"], "nodes", 1, 65536));
  if (header.count("gpus_per_thread"))
    s.gpus_per_thread = static_cast<int>(
        whole(header["gpus_per_thread"], header_lines["gpus_per_thread"], "gpus_per_thread", 1, 64));
  // A header value given is a finite number in its range, never taken as the "use the preset's"
  // sentinel it may collide with (a negative nic_latency_us) nor as a bound that means nothing
  // (median_bound -0.1 was reported as a "test bound -10 %", 1e300 as one no table can fail): the
  // line and the range are named.
  auto bounded = [&](const char* key, double lo, double hi, bool lo_open) {
    const double v = number(header[key], file, header_lines[key], key);
    DPS_CHECK((lo_open ? v > lo : v >= lo) && v <= hi, ErrorKind::kFormat,
              "{}:{}: {} '{}' must be in {}{}, {}]", file.string(), header_lines[key], key, header[key],
              lo_open ? "(" : "[", lo, hi);
    return v;
  };
  if (header.count("nic_gbps")) s.nic_gbps = bounded("nic_gbps", 0.0, 1e6, true);
  if (header.count("nic_latency_us")) s.nic_latency_us = bounded("nic_latency_us", 0.0, 1e6, false);
  if (header.count("nic_latency_note")) s.nic_latency_note = header["nic_latency_note"];
  if (header.count("nvls_latency_us")) {
    s.nvls_latency_us = bounded("nvls_latency_us", 0.0, 1000.0, false);  // the presets' nccl.nvls_latency_us
    s.nvls_latency_note = need("nvls_latency_note");
  }
  if (header.count("nccl_proto")) {
    s.nccl_proto = header["nccl_proto"];
    DPS_CHECK(s.nccl_proto == "Simple", ErrorKind::kFormat,
              "{}: nccl_proto '{}': only Simple (a network plugin's NCCL_PROTO=simple) is modelled",
              file.string(), s.nccl_proto);
    s.nccl_proto_note = need("nccl_proto_note");
  }
  if (header.count("median_bound")) s.median_bound = bounded("median_bound", 0.0, 1.0, true);  // a fraction
  s.op = measured_collective(need("collective"), file);
  DPS_CHECK(s.gpus_per_node >= 1 && s.nodes >= 1 && !s.rows.empty(), ErrorKind::kFormat,
            "{}: needs gpus_per_node >= 1, nodes >= 1 and at least one row", file.string());
  DPS_CHECK(s.gpus_per_thread >= 1 && s.gpus_per_thread <= s.gpus_per_node, ErrorKind::kFormat,
            "{}: gpus_per_thread {} must be between 1 and gpus_per_node ({})", file.string(),
            s.gpus_per_thread, s.gpus_per_node);
  MeasuredSystem named = s;
  named.id = file.string();
  forced_algo(named);  // refuses an NCCL_ALGO the model lacks, naming the file
  const int ranks = s.gpus_per_node * s.nodes;
  for (const MeasuredRow& row : s.rows)
    DPS_CHECK(fidelity_size(s.op, row.bytes, ranks).count > 0, ErrorKind::kFormat,
              "{}: size {} holds no element per GPU for {} on {} GPUs once rounded down as nccl-tests "
              "rounds it (leave out the 0-byte rows nccl-tests prints)",
              file.string(), row.bytes, nccl_tests_name(s.op), ranks);
  // nccl-tests prints sizes growing; the findings compare each row with the next larger one.
  for (size_t i = 1; i < s.rows.size(); ++i)
    DPS_CHECK(s.rows[i].bytes > s.rows[i - 1].bytes, ErrorKind::kFormat,
              "{}:{}: size_bytes {} does not grow from the row before ({}): one row per size, smallest first",
              file.string(), row_lines[i], s.rows[i].bytes, s.rows[i - 1].bytes);
  return s;
}

std::vector<MeasuredSystem> load_measured_systems(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".csv") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<MeasuredSystem> systems;
  for (const fs::path& f : files) systems.push_back(load_measured_system(f));
  return systems;
}

std::vector<MeasuredSystem> load_not_compared_systems(const fs::path& dir) {
  const fs::path folder = dir / kNotComparedDir;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return {};
  return load_measured_systems(folder);
}

FidelitySize fidelity_size(OpType op, uint64_t bytes, int ranks) {
  DPS_CHECK(ranks >= 1, ErrorKind::kInvalidArgument, "fidelity_size: {} ranks", ranks);
  const int64_t total = nccl_tests_elements(op, bytes, ranks, sizeof(float));  // the tables ran -d float
  const bool per_rank = op == OpType::kAllGather || op == OpType::kReduceScatter;
  return {per_rank ? total / ranks : total, static_cast<uint64_t>(total) * sizeof(float)};
}

HardwarePreset fidelity_preset(const MeasuredSystem& s) {
  HardwarePreset p = find_preset(s.preset);
  if (s.nodes > 1) {
    p.cluster.gpus_per_node = s.gpus_per_node;
    if (s.nic_gbps > 0) p.cluster.nic.bandwidth_bytes_per_s = s.nic_gbps * 1e9;
    if (s.nic_latency_us >= 0) p.cluster.nic.latency_ns = s.nic_latency_us * 1e3;
    p.cluster.simple_only = s.nccl_proto == "Simple";
  }
  if (s.nvls_latency_us >= 0) p.nccl.nvls_latency_us = s.nvls_latency_us;
  return p;
}

int64_t grouped_launch_offset_ns(const HardwarePreset& preset, int index_in_thread) {
  DPS_CHECK(index_in_thread >= 0, ErrorKind::kInvalidArgument, "grouped_launch_offset_ns: index {}",
            index_in_thread);
  return static_cast<int64_t>(std::llround(index_in_thread * preset.launch_latency_ns));
}

FidelityResult evaluate_fidelity(const MeasuredSystem& s) {
  const HardwarePreset preset = fidelity_preset(s);
  const int n = s.gpus_per_node * s.nodes;
  const AnalyticCollectives model(preset, n);
  const std::optional<NcclFabric> fabric = nccl_fabric(preset, n, s.nodes);
  DPS_CHECK(fabric.has_value(), ErrorKind::kInvalidArgument, "preset {} has no [nccl] table", s.preset);
  FidelityResult r;
  r.system = s;
  std::vector<double> errors;
  const double factor = bus_bandwidth_factor(s.op, n);
  const double launch_us = static_cast<double>(grouped_launch_offset_ns(preset, s.gpus_per_thread - 1)) / 1e3;
  // A command that forces NCCL_ALGO is compared with the cost model forced so (the timing-only
  // backend takes no NVLS choice; it runs the model's own choice).
  const std::optional<NcclAlgo> algo = forced_algo(s);
  for (const MeasuredRow& m : s.rows) {
    FidelityRow row;
    row.bytes = m.bytes;
    row.measured_us = m.time_us;
    const FidelitySize size = fidelity_size(s.op, m.bytes, n);
    int64_t duration_ns = 0;
    if (algo) {
      duration_ns = predict_nccl(*fabric, s.op, size.nccl_bytes, {.algo = algo}).time_ns;
    } else {
      duration_ns = model.estimate({.op = s.op, .count = size.count, .elem_bytes = 4}).duration_ns;
    }
    row.simulated_us = static_cast<double>(duration_ns) / 1e3 + launch_us;
    row.measured_busbw = static_cast<double>(m.bytes) / (m.time_us * 1e3) * factor;
    row.simulated_busbw = static_cast<double>(m.bytes) / (row.simulated_us * 1e3) * factor;
    row.error = std::abs(row.simulated_busbw / row.measured_busbw - 1.0);
    row.choice = predict_nccl(*fabric, s.op, size.nccl_bytes, {.algo = algo}).label();
    errors.push_back(row.error);
    if (row.error > r.worst_error) {
      r.worst_error = row.error;
      r.worst_bytes = m.bytes;
    }
    r.rows.push_back(row);
  }
  r.median_error = median(errors);
  return r;
}

}  // namespace dpscope
