// merge_rank_traces() (trace/merge.hpp).
#include "dpscope/trace/merge.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>

#include "dpscope/base/error.hpp"
#include "dpscope/trace/recorder.hpp"
#include "dpscope/trace_format/reader.hpp"

namespace dpscope::trace {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kFlowStride = int64_t{1} << 40;  // rank K's flow ids move to K * 2^40 + id

// The integer after `key` (`"ts":`) in a line the recorder wrote, and where its digits are.
struct IntField {
  size_t begin = 0;
  size_t end = 0;
  int64_t value = 0;
};

std::optional<IntField> find_int(std::string_view line, std::string_view key) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  IntField f;
  f.begin = at + key.size();
  const auto [end, error] = std::from_chars(line.data() + f.begin, line.data() + line.size(), f.value);
  if (error != std::errc()) return std::nullopt;
  f.end = static_cast<size_t>(end - line.data());
  return f;
}

// Rewrites the integer of `key` in place with fn(value), when the line has the key.
template <typename Fn>
void rewrite_int(std::string& line, std::string_view key, Fn fn) {
  if (const std::optional<IntField> f = find_int(line, key))
    line.replace(f->begin, f->end - f->begin, std::to_string(fn(f->value)));
}

// rank -> file, for the rank-K.jsonl files of `dir`.
std::map<int, fs::path> rank_files(const fs::path& dir) {
  std::error_code ec;
  DPS_CHECK(fs::is_directory(dir, ec), ErrorKind::kIo, "trace merge: '{}' is not a directory", dir.string());
  static const std::regex name("rank-([0-9]{1,6})\\.jsonl");
  std::map<int, fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name)) files[std::stoi(m[1].str())] = entry.path();
  }
  DPS_CHECK(!files.empty(), ErrorKind::kFormat, "trace merge: no rank-K.jsonl files in '{}'", dir.string());
  for (int k = 0; k <= files.rbegin()->first; ++k)
    DPS_CHECK(files.count(k) > 0, ErrorKind::kFormat,
              "trace merge: '{}' has rank-{}.jsonl but no rank-{}.jsonl", dir.string(), files.rbegin()->first,
              k);
  return files;
}

// The "process" entry's clock of a rank's run object (written by train_mpi.cpp).
RankClock clock_of(const TraceData& data, int rank, const fs::path& file) {
  const std::string& run = data.header.run_json;
  const std::optional<IntField> r = find_int(run, "\"process\":{\"rank\":");
  const std::optional<IntField> offset = find_int(run, "\"clock_offset_ns\":");
  const std::optional<IntField> uncertainty = find_int(run, "\"clock_uncertainty_ns\":");
  DPS_CHECK(r && offset && uncertainty, ErrorKind::kFormat,
            "trace merge: {} has no \"process\" entry with its rank and clock offset in its header",
            file.string());
  DPS_CHECK(r->value == rank, ErrorKind::kFormat, "trace merge: {} says it is rank {}", file.string(),
            r->value);
  return {rank, offset->value, uncertainty->value};
}

}  // namespace

MergeResult merge_rank_traces(const fs::path& dir, const fs::path& out) {
  const std::map<int, fs::path> files = rank_files(dir);
  for (const auto& [rank, file] : files) {
    std::error_code ec;
    DPS_CHECK(!(fs::exists(out, ec) && fs::equivalent(out, file, ec)), ErrorKind::kUsage,
              "trace merge: OUT '{}' is rank {}'s trace; refusing to overwrite it", out.string(), rank);
  }
  MergeResult result;
  TraceHeader merged;
  merged.clock = "measured";
  std::vector<std::pair<int64_t, std::string>> events;  // (time on rank 0's clock, line)
  for (const auto& [rank, file] : files) {
    const TraceData data = read_trace(file);
    const RankClock clock = clock_of(data, rank, file);
    result.clocks.push_back(clock);
    std::map<int64_t, int64_t> ids;  // this rank's device id -> the merged one
    for (const TraceDeviceInfo& d : data.header.devices) {
      TraceDeviceInfo renamed = d;
      renamed.id = static_cast<int>(merged.devices.size());
      renamed.name = fmt::format("{}:{}", d.name, rank);
      ids[d.id] = renamed.id;
      merged.devices.push_back(renamed);
    }
    if (rank == 0) {
      merged.run_json = data.header.run_json;
      merged.params = data.header.params;
      merged.buckets = data.header.buckets;
    }
    std::ifstream in(file, std::ios::binary);
    std::string line;
    std::getline(in, line);  // the header, read above
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto device = [&](int64_t id) {
        const auto it = ids.find(id);
        DPS_CHECK(it != ids.end(), ErrorKind::kFormat,
                  "trace merge: {}: an event names device {}, not in its header", file.string(), id);
        return it->second;
      };
      rewrite_int(line, "\"ts\":", [&](int64_t ts) { return ts + clock.offset_ns; });
      rewrite_int(line, "\"dev\":", device);
      rewrite_int(line, "\"src\":", device);
      rewrite_int(line, "\"dst\":", device);
      rewrite_int(line, "\"flow\":", [&](int64_t flow) { return flow + rank * kFlowStride; });
      const std::optional<IntField> ts = find_int(line, "\"ts\":");
      events.emplace_back(ts ? ts->value : 0, line);
    }
    ++result.ranks;
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  const fs::path temp = out.string() + ".tmp";
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    DPS_CHECK(file.good(), ErrorKind::kIo, "trace merge: cannot write '{}'", temp.string());
    fmt::memory_buffer header;
    append_trace_header(header, merged);
    file.write(header.data(), static_cast<std::streamsize>(header.size()));
    file << '\n';
    for (const auto& [ts, line] : events) file << line << '\n';
    DPS_CHECK(file.good(), ErrorKind::kIo, "trace merge: writing '{}' failed", temp.string());
  }
  std::error_code ec;
  fs::rename(temp, out, ec);
  DPS_CHECK(!ec, ErrorKind::kIo, "trace merge: cannot move '{}' to '{}': {}", temp.string(), out.string(),
            ec.message());
  result.events = events.size();
  return result;
}

}  // namespace dpscope::trace
